"""The run store: layout, atomic writes, tolerant readers — and no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distillscope import store


def test_status_round_trip_and_pending_default(tmp_path: Path):
    run = tmp_path / "runs" / "r0"
    assert store.read_status(run) == {"status": "pending", "reason": ""}
    assert store.read_status(None)["status"] == "pending"
    store.write_status(run, "running", phase="train")
    st = store.read_status(run)
    assert (st["status"], st["reason"], st["phase"]) == ("running", "", "train")
    with pytest.raises(ValueError, match="status must be one of"):
        store.write_status(run, "finished")


def test_metrics_log_keeps_steps_before_resume_and_ignores_a_torn_line(tmp_path: Path):
    log = store.MetricsLog(tmp_path, keep_steps=0)
    for step in range(3):
        log.append({"step": step, "train/loss": float(step)})
    with (tmp_path / store.METRICS_FILE).open("a") as f:
        f.write('{"step": 3, "train/lo')  # a crash mid-line
    assert [r["step"] for r in store.read_metrics(tmp_path)] == [0, 1, 2]
    store.MetricsLog(tmp_path, keep_steps=2)
    assert [r["step"] for r in store.read_metrics(tmp_path)] == [0, 1]
    assert store.read_metrics(tmp_path / "missing") == []


def test_eval_and_config_files(tmp_path: Path):
    assert store.read_eval(tmp_path) == {}
    store.write_eval(tmp_path, {"eval/b": 2.0, "eval/a": 1.0})
    assert store.read_eval(tmp_path) == {"eval/a": 1.0, "eval/b": 2.0}
    assert list(json.loads((tmp_path / store.EVAL_FILE).read_text())) == ["eval/a", "eval/b"]
    store.write_config(tmp_path, "seed: 1\n")
    assert (tmp_path / store.CONFIG_FILE).read_text() == "seed: 1\n"
    assert store.checkpoint_dir(tmp_path) == tmp_path / "checkpoint"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_run_dir_refuses_ids_that_leave_runs(tmp_path: Path):
    assert store.run_dir(tmp_path, "r1") == tmp_path / "runs" / "r1"
    for bad in ("", ".", "..", "a/b", "..\\x", "a\0b"):
        assert store.run_dir(tmp_path, bad) is None


def test_store_imports_no_torch():
    code = "import sys, distillscope.store; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
