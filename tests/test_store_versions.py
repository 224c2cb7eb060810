"""Older run directories and studies still resume (distillscope.store_versions).

``tests/data/study-v1/`` is a study written by the code of commit ee21ac4, before run directories
recorded their schema version (``tests/data/study-v1.yaml`` is the file it was run from: two
2-step runs, student- and teacher-written, with the teacher's rollouts cached); the weights were
left out (a finished run is never reloaded to resume a study).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from distillscope.config import evaluation_key, load_run_config
from distillscope.rollout.cache import key_digest
from distillscope.store import (
    CONFIG_FILE,
    FINGERPRINT_FILE,
    StoreError,
    check_run_config,
    claim_run,
    read_fingerprint,
)
from distillscope.store_versions import (
    ADDED_FIELDS,
    SCHEMA_VERSION,
    TEACHER_KEY_ADDED,
    skipped_fields,
)
from distillscope.study.run_study import run_study
from distillscope.study.spec import load_spec
from distillscope.train.scoring import LogitScores
from distillscope.train.teacher import _rollout_key, _score_key

STUDY_V1 = Path(__file__).parent / "data" / "study-v1"
RUNS = sorted(p for p in (STUDY_V1 / "runs").iterdir())


@pytest.fixture
def study(tmp_path: Path) -> Path:
    out = tmp_path / "study"
    shutil.copytree(STUDY_V1, out)
    return out


def _dump(run: Path) -> dict:
    return load_run_config(run / CONFIG_FILE).model_dump(mode="json")


def test_the_fixture_is_a_version_1_study_with_every_added_field_at_its_default():
    assert [p.name for p in RUNS] == [
        "baseline",
        "main_policy-student_49c26c9c",
        "main_policy-teacher_1d3e0eb1",
    ]
    for run in RUNS:
        assert "schema_version" not in read_fingerprint(run)
        assert skipped_fields(_dump(run), 1) == set(ADDED_FIELDS)
        assert skipped_fields(_dump(run), SCHEMA_VERSION) == set()


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_a_version_1_run_directory_matches_its_config(run: Path, tmp_path: Path):
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    recorded = (copy / FINGERPRINT_FILE).read_text()
    fingerprint = check_run_config(copy, _dump(copy))
    assert fingerprint == json.loads(recorded)["fingerprint"]
    assert claim_run(copy, _dump(copy)) == fingerprint
    assert (copy / FINGERPRINT_FILE).read_text() == recorded  # read, never rewritten
    if (copy / "checkpoint" / "meta.json").is_file():  # what a resumed run compares with
        assert json.loads((copy / "checkpoint" / "meta.json").read_text())["step"] == 2
        assert json.loads((copy / "checkpoint" / "meta.json").read_text())["fingerprint"] == (
            fingerprint
        )
    changed = _dump(copy)
    changed["optim"]["lr"] = 0.5
    with pytest.raises(StoreError, match=r"optim.lr: 0.001 → 0.5"):
        check_run_config(copy, changed)


def test_a_version_1_study_resumes_without_rerunning_anything(study: Path):
    before = pd.read_parquet(study / "results.parquet")
    metrics = {p: (p / "metrics.jsonl").read_text() for p in (study / "runs").glob("main_*")}
    spec = load_spec(Path(__file__).parent / "data" / "study-v1.yaml")
    steps: list[str] = []
    after = pd.read_parquet(run_study(spec, study, on_step=lambda r, s, row: steps.append(r)))
    assert steps == []  # nothing trained again
    assert {p: (p / "metrics.jsonl").read_text() for p in metrics} == metrics
    assert sorted(after["run_id"]) == sorted(before["run_id"])
    keep = [c for c in before.columns if not c.startswith("time/")]
    pd.testing.assert_frame_equal(
        after[keep].sort_values("run_id").reset_index(drop=True),
        before[keep].sort_values("run_id").reset_index(drop=True),
    )


def test_a_new_run_directory_records_its_schema_version(tmp_path: Path):
    config = _dump(RUNS[1])
    fingerprint = claim_run(tmp_path / "run", config)
    recorded = read_fingerprint(tmp_path / "run")
    assert recorded["schema_version"] == SCHEMA_VERSION and recorded["fingerprint"] == fingerprint
    assert recorded["fields"]["rollout.engine"] == "builtin"  # every field, at any value
    assert check_run_config(tmp_path / "run", config) == fingerprint


def test_a_directory_of_a_newer_version_is_refused_in_one_line(tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(RUNS[1], run)
    recorded = read_fingerprint(run)
    (run / FINGERPRINT_FILE).write_text(json.dumps({**recorded, "schema_version": 99}))
    with pytest.raises(StoreError, match=r"schema version 99; this distillscope reads versions 1"):
        check_run_config(run, _dump(run))
    with pytest.raises(StoreError, match="schema version 99"):
        claim_run(run, _dump(run))


def _cached_keys() -> list[tuple[str, dict]]:
    return [
        (p.name.removesuffix(".key.json"), json.loads(p.read_text()))
        for p in sorted((STUDY_V1 / "rollout-cache").glob("*.key.json"))
    ]


def test_the_rollout_cache_of_a_version_1_study_is_still_found():
    """This version's keys for the fixture's runs are the ones the study wrote: the teacher's
    rollouts and scores (train/teacher.py) and the untrained student's skills (evaluation_key)."""
    teacher = load_run_config(RUNS[2] / CONFIG_FILE)
    student = load_run_config(RUNS[1] / CONFIG_FILE)
    found = set()
    for digest, key in _cached_keys():
        if "skills_before" in key:
            ours = {"skills_before": evaluation_key(student)}
        else:
            ours = _rollout_key(teacher, key["step"], key["prompts"])
            if "scores" in key:
                ours |= _score_key(teacher, LogitScores, key["vocab_size"])
        assert ours == key and key_digest(ours) == digest
        found.add(digest)
    assert len(found) == 5
    assert set(TEACHER_KEY_ADDED) == {"instruction", "engine"}
    told = teacher.model_copy(
        update={"rollout": teacher.rollout.model_copy(update={"engine": "vllm"})}
    )
    assert _rollout_key(told, 0, "p")["engine"] == "vllm"  # set: it changes the rollouts
