"""Fault injection: SIGKILL a real `distillscope study` at random moments, re-run, compare.

Two ways to die: (a) the whole process tree (main process and pool worker, as an OOM killer or
`kill -9 -PGID` would), (b) only the main process — its pool worker must then stop by itself
within seconds (it polls its parent), so a re-run never shares run directories with an orphan.
After every kill the study is re-run (and may be killed again); the final results table must
equal an uninterrupted study's bit for bit, timing columns aside. Each kill moment is drawn at
random — the n-th logged optimizer step, a checkpoint write or swap, evaluation, or the table
write — then watched for in the study directory and hit after a random 0–50 ms, so moments do
not depend on the machine's speed (a moment missed because it passed too fast is not counted).

The clean reference runs in-process with the sequential executor (the executors agree: see
test_study_run.py). The CI variant kills once per mode; the ``slow`` variant ten times per mode.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from distillscope.study.run_study import run_study, study_status
from distillscope.study.spec import load_spec


def micro_spec(tiny_pair) -> dict:
    teacher, student = tiny_pair
    return {
        "name": "micro",
        "base": {
            "model": {"teacher": str(teacher), "student": str(student)},
            "task": {"max_new_tokens": 4},
            "rollout": {"prompts_per_step": 2},
            "optim": {"steps": 3, "warmup_steps": 1, "lr": 1e-3},
            "checkpoint_every": 1,
            "eval": {"items": 2, "coverage_items": 0, "skill_items": 0, "harder_task": None},
        },
        "experiments": [{"name": "main", "axes": {"rollout.policy": ["student", "teacher"]}}],
    }


def launch(spec_file: Path, out: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "distillscope.cli",
        "study",
        str(spec_file),
        "--out",
        str(out),
        "--executor",
        "pool",
        "--workers",
        "1",
        "--no-report",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, env=env
    )


def wait_started(proc: subprocess.Popen, out: Path) -> None:
    """Until the study process holds the directory's lock (its imports are done)."""
    while proc.poll() is None:
        try:
            if json.loads((out / ".lock").read_text() or "{}").get("pid") == proc.pid:
                return
        except (OSError, json.JSONDecodeError):
            pass
        time.sleep(0.02)


def live_members(pgid: int) -> list[int]:
    """PIDs of non-zombie processes in process group ``pgid`` (read from /proc)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def wait_gone(pgid: int, seconds: float) -> list[int]:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if not live_members(pgid):
            return []
        time.sleep(0.1)
    return live_members(pgid)


def comparable(df: pd.DataFrame) -> pd.DataFrame:
    keep = [c for c in df.columns if not c.startswith(("time/", "perf/"))]
    return df[keep].sort_values("run_id").reset_index(drop=True)


def run_clean(spec_file: Path, out: Path) -> pd.DataFrame:
    """An uninterrupted study, in this process, at the torch threads of the killed study's one
    pool worker (all cores): a GEMM's sums may be ordered by the thread count, so a table
    equals another bit for bit only at the same count."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    try:
        return pd.read_parquet(run_study(load_spec(spec_file), out))
    finally:
        torch.set_num_threads(threads)


MOMENTS = ("step", "checkpoint", "eval", "table")


def moment_reached(out: Path, kind: str, step: int) -> bool:
    """Whether the running study in ``out`` is at a moment of ``kind`` (polled every 5 ms)."""
    runs = list((out / "runs").glob("*")) if (out / "runs").is_dir() else []
    if kind == "step":  # the n-th optimizer step of the study has just been logged
        lines = sum(len(m.read_bytes().splitlines()) for r in runs for m in r.glob("metrics.jsonl"))
        return lines >= step
    if kind == "checkpoint":  # a checkpoint is being written or swapped in
        return any(
            (r / ".checkpoint.tmp").exists() or (r / ".checkpoint.old").exists() for r in runs
        )
    if kind == "eval":
        return any(b'"eval"' in s.read_bytes() for r in runs for s in r.glob("status.json"))
    return any(out.glob(".results.*"))  # the table is being written


def kill_and_resume(spec_file: Path, out: Path, kills: int, whole_tree: bool, steps: int):
    rng = random.Random(1234 + whole_tree)
    landed = []
    for _ in range(kills):
        kind, step = rng.choice(MOMENTS), rng.randint(1, steps)
        delay = rng.uniform(0.0, 0.05)
        proc = launch(spec_file, out)
        wait_started(proc, out)
        while proc.poll() is None and not moment_reached(out, kind, step):
            time.sleep(0.005)
        time.sleep(delay)
        if proc.poll() is None:
            landed.append(kind)
            os.killpg(proc.pid, signal.SIGKILL) if whole_tree else proc.kill()
        proc.wait()
        proc.stderr.close()
        # (b): the orphaned pool worker stops by itself within a few seconds.
        assert wait_gone(proc.pid, 10.0) == [], "a worker outlived its killed study"
    final = launch(spec_file, out)
    _, err = final.communicate(timeout=600)
    assert final.returncode == 0, err.decode()[-2000:]
    return pd.read_parquet(out / "results.parquet"), landed


# The thorough variant (10 kills per mode, ~2 min on an idle machine) waits on worker deaths
# with wall-clock deadlines, which a heavily loaded machine can miss; it runs on request.
THOROUGH = pytest.mark.skipif(
    os.environ.get("DISTILLSCOPE_SOAK") != "1",
    reason="10-kill soak runs with DISTILLSCOPE_SOAK=1 (the 1-kill variant runs always)",
)


@pytest.mark.parametrize(
    "kills",
    [pytest.param(1, id="ci"), pytest.param(10, marks=[pytest.mark.slow, THOROUGH], id="thorough")],
)
def test_sigkill_at_random_moments_leaves_the_uninterrupted_table(tiny_pair, tmp_path, kills):
    spec_file = tmp_path / "micro.yaml"
    spec_file.write_text(yaml.safe_dump(micro_spec(tiny_pair)))
    clean = run_clean(spec_file, tmp_path / "clean")
    assert set(clean["status"]) == {"done"}
    for whole_tree in (True, False):
        out = tmp_path / ("tree" if whole_tree else "main")
        table, landed = kill_and_resume(spec_file, out, kills, whole_tree, steps=6)
        print(f"{'tree' if whole_tree else 'main'}: {len(landed)}/{kills} kills landed: {landed}")
        assert len(landed) >= (kills + 1) // 2, f"only {landed} of {kills} kills hit a study"
        pd.testing.assert_frame_equal(comparable(clean), comparable(table), check_exact=True)
        assert study_status(out) == {"done": sorted(clean["run_id"])}
