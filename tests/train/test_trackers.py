"""Trackers (``log.trackers``): what TensorBoard and W&B (offline) hold, read back from their
own files, equals ``metrics.jsonl`` — keys, steps and values — for a fresh, a resumed and a
study run."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path

import pytest
from tests.train.conftest import tensorboard_rows
from tests.train.test_distill import tiny_cfg

from distillscope.config import TRACKER_MISSING, ConfigError
from distillscope.store import read_metrics
from distillscope.study.run_study import run_study
from distillscope.study.spec import StudySpec
from distillscope.train.loop import distill
from distillscope.train.run_checks import preflight

pytest.importorskip("tensorboard")
pytest.importorskip("wandb")

from wandb.proto import wandb_internal_pb2  # noqa: E402

BOTH = {"log": "{trackers: [tensorboard, wandb], wandb_project: lab}", "optim.steps": 3}


@pytest.fixture(autouse=True)
def _wandb_offline(tmp_path, monkeypatch):
    """W&B offline, its caches and settings inside the test's directory."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    for var in ("WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb-home"))


def numbers(row: dict) -> dict[str, float]:
    return {k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))}


def wandb_records(path: Path) -> list:
    """The protobuf records of a ``.wandb`` file (W&B's LevelDB-style log: a 7-byte header,
    32 KiB blocks of records each with a checksum, length and FULL/FIRST/MIDDLE/LAST type)."""
    data = path.read_bytes()
    assert struct.unpack("<4sHB", data[:7]) == (b":W&B", 0xBEE1, 0)
    block, pos, parts, out = 32768, 7, [], []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a record header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        parts.append(data[pos + 7 : pos + 7 + length])
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(parts))
            out.append(record)
            parts = []
    return out


def wandb_run(run_dir: Path, session: int = 0) -> tuple[dict, dict[int, dict[str, float]]]:
    """The run record (id, name, project, group) and step → {key: value} of one offline
    session (0 = the first) of ``run_dir``."""
    files = sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    info, rows = {}, {}
    for record in wandb_records(files[session]):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            info = {"id": r.run_id, "name": r.display_name, "project": r.project}
            info["group"] = r.run_group
        elif kind == "history":
            items = {
                i.key or "/".join(i.nested_key): json.loads(i.value_json)
                for i in record.history.item
            }
            step = items.pop("_step")
            rows[step] = {k: v for k, v in items.items() if not k.startswith("_")}
    return info, rows


def test_tensorboard_and_wandb_hold_the_rows_of_metrics_jsonl(tiny_pair, tmp_path):
    run = tmp_path / "run"
    distill(tiny_cfg(tiny_pair, **BOTH), run)
    want = {r["step"]: numbers(r) for r in read_metrics(run)}
    assert sorted(want) == [0, 1, 2] and len(want[0]) > 20
    board = tensorboard_rows(run / "tensorboard")
    assert board.keys() == want.keys()
    for step, row in want.items():
        assert board[step].keys() == row.keys()
        for key, value in row.items():  # TensorBoard stores float32
            assert board[step][key] == pytest.approx(value, rel=1e-6, abs=1e-30), key
    info, logged = wandb_run(run)
    assert logged == want  # JSON: the same numbers, bit for bit
    assert info["name"] == "run" and info["project"] == "lab" and info["group"] == ""
    # --overwrite clears the trackers' folders with the rest of the run (nothing is refused)
    distill(tiny_cfg(tiny_pair, **{**BOTH, "optim.steps": 1}), run, overwrite=True)
    assert len(list((run / "wandb").glob("offline-run-*"))) == 1
    assert tensorboard_rows(run / "tensorboard").keys() == {0}


def test_a_resumed_run_logs_each_step_once(tiny_pair, tmp_path):
    cfg = tiny_cfg(tiny_pair, **{**BOTH, "optim.steps": 4})
    run = tmp_path / "run"

    def killed_at_step_2(step, row):  # after the step-2 row, before its checkpoint at 4
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        distill(cfg, run, on_step=killed_at_step_2)
    first = {r["step"]: numbers(r) for r in read_metrics(run)}
    distill(cfg, run)
    want = {r["step"]: numbers(r) for r in read_metrics(run)}
    board = tensorboard_rows(run / "tensorboard")  # step 2 of the killed session is purged
    assert board.keys() == want.keys() == {0, 1, 2, 3}
    for step, row in want.items():
        assert board[step] == pytest.approx(row, rel=1e-6, abs=1e-30)
    # W&B offline: the killed session's directory holds steps 0–2, the resumed one's 2–3
    (id_a, a), (id_b, b) = wandb_run(run, 0), wandb_run(run, 1)
    assert id_a["id"] == id_b["id"]
    assert a == first and sorted(b) == [2, 3] and {**a, **b} == want


def test_a_studys_runs_are_grouped_under_it(tiny_pair, tmp_path):
    teacher, student = tiny_pair
    base = {
        "model": {"teacher": str(teacher), "student": str(student)},
        "task": {"max_new_tokens": 6},
        "rollout": {"prompts_per_step": 4},
        "optim": {"steps": 1, "warmup_steps": 1},
        "eval": {"items": 2, "coverage_items": 0, "skill_items": 0, "harder_task": None},
        "log": {"trackers": ["tensorboard", "wandb"]},
    }
    axes = {"seed": [42, 43]}
    spec = StudySpec.model_validate(
        {"name": "tiny", "base": base, "experiments": [{"name": "main", "axes": axes}]}
    )
    study = tmp_path / "my-study"
    run_study(spec, study)
    runs = [p for p in sorted((study / "runs").iterdir()) if (p / "metrics.jsonl").is_file()]
    assert len(runs) == 2
    for run in runs:  # one TensorBoard directory per run, under the study's
        assert not (run / "tensorboard").exists()
        board = tensorboard_rows(study / "tensorboard" / run.name)
        assert board.keys() == {0}
        assert board[0] == pytest.approx(numbers(read_metrics(run)[0]), rel=1e-6, abs=1e-30)
        info, logged = wandb_run(run)
        assert info["group"] == "my-study" and info["name"] == run.name
        assert logged == {0: numbers(read_metrics(run)[0])}


@pytest.mark.parametrize("name", ["tensorboard", "wandb"])
def test_a_missing_tracker_is_one_line_naming_its_extra(tiny_pair, monkeypatch, name):
    cfg = tiny_cfg(tiny_pair, **BOTH)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == name else real(n))
    with pytest.raises(ConfigError) as err:
        preflight(cfg)
    assert str(err.value) == TRACKER_MISSING.format(name=name)
    assert f"pip install 'distillscope[{name}]'" in str(err.value)
