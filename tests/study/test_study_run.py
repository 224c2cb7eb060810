"""End-to-end studies on tiny models: executors agree, a crashed study resumes exactly."""

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

from distillscope.store import read_status
from distillscope.study.executors import ExecutorSpec, WorkerPool
from distillscope.study.run_study import run_study, study_status
from distillscope.study.spec import load_spec


def tiny_spec(tiny_study, steps: int = 3):
    axes = {
        "rollout.policy": ["student", "teacher"],
        "objective.kind": ["forward_kl", "reverse_kl"],
    }
    return tiny_study(axes, steps=steps)


def comparable(df: pd.DataFrame) -> pd.DataFrame:
    keep = [c for c in df.columns if not c.startswith(("time/", "perf/"))]
    return df[keep].sort_values("run_id").reset_index(drop=True)


@pytest.mark.slow
def test_smoke_preset_sequential_and_pool_give_identical_tables(tmp_path):
    spec = load_spec("smoke")  # the shipped testbed, end to end
    seq = pd.read_parquet(run_study(spec, tmp_path / "seq"))
    pool = pd.read_parquet(run_study(spec, tmp_path / "pool", ExecutorSpec("pool", workers=2)))
    assert len(seq) == 5 and set(seq["status"]) == {"done"}  # 4 runs and the baseline
    assert list(seq["experiment"]).count("baseline") == 1
    pd.testing.assert_frame_equal(comparable(seq), comparable(pool))
    assert "eval/accuracy" in seq and "rollout.policy" in seq and "train/grad_norm_mean" in seq


@pytest.mark.slow
def test_a_pool_started_before_planning_gives_the_same_table(tiny_study, tmp_path):
    """The CLI's path: a WorkerPool whose workers spawn at once, handed to run_study."""
    spec = tiny_spec(tiny_study)
    seq = pd.read_parquet(run_study(spec, tmp_path / "seq"))
    with WorkerPool(2) as pool:
        assert len(pool.executor._processes) == 2  # spawned now, not at the first run
        table = run_study(spec, tmp_path / "pool", ExecutorSpec("pool", workers=pool))
    pd.testing.assert_frame_equal(comparable(seq), comparable(pd.read_parquet(table)))
    assert (tmp_path / "pool" / "runs" / "baseline" / "eval.json").is_file()


@pytest.mark.slow
def test_ray_executor_matches_sequential(tiny_study, tmp_path):
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'distillscope[ray]'")
    spec = tiny_spec(tiny_study)
    seq = pd.read_parquet(run_study(spec, tmp_path / "seq"))
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        via_ray = pd.read_parquet(run_study(spec, tmp_path / "ray", ExecutorSpec("ray")))
    finally:
        ray.shutdown()
    pd.testing.assert_frame_equal(comparable(seq), comparable(via_ray))


@pytest.mark.slow
def test_killed_study_resumes_to_the_same_table(tiny_study, tmp_path):
    """Kill a real `distillscope study` process mid-run (SIGKILL), re-run, compare tables."""
    spec = tiny_spec(tiny_study, steps=12)  # a window wide enough for a fast machine
    clean = pd.read_parquet(run_study(spec, tmp_path / "clean"))

    spec_file = tmp_path / "tiny.yaml"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distillscope.cli",
            "study",
            str(spec_file),
            "--out",
            str(out),
            "--no-report",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 240
    killed_mid_run = False
    while time.time() < deadline and proc.poll() is None:
        runs = sorted((out / "runs").glob("*/metrics.jsonl")) if (out / "runs").exists() else []
        # Kill once the second run is part-way: one finished run, one interrupted mid-training.
        # (Pick the run still training, not the last by name: that may be the finished one.)
        training = [
            p
            for p in runs
            if read_status(p.parent)["status"] == "running" and len(p.read_text().splitlines()) >= 3
        ]
        if len(runs) >= 2 and training:
            # the whole process group: a worker outlives a killed parent by up to its
            # watch_parent poll, long enough to finish a short run it is part-way through
            os.killpg(proc.pid, signal.SIGKILL)
            killed_mid_run = True
            break
        time.sleep(0.02)
    proc.wait()
    assert killed_mid_run, "the study finished before it could be killed"
    assert "done" not in {read_status(p.parent)["status"] for p in training}

    resumed = pd.read_parquet(run_study(spec, out))
    assert len(resumed) == len(clean)
    pd.testing.assert_frame_equal(comparable(clean), comparable(resumed))
    assert {k: sorted(v) for k, v in study_status(out).items()} == {"done": sorted(clean["run_id"])}
