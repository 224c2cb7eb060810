"""A study on a Ray cluster (``--executor ray --address``) survives the death of a worker node.

A local cluster (:class:`ray.cluster_utils.Cluster`: a head that runs nothing and two one-CPU
worker nodes) runs a two-run study into one directory, the shared filesystem of a real
cluster; one worker node is killed while a run trains on it. Ray retries the run's task on the
surviving node, the run resumes from its last checkpoint, and the study ends with the table of
an uninterrupted sequential one.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from distillscope.store import read_metrics
from distillscope.study.executors import ExecutorSpec
from distillscope.study.run_study import run_study

STEPS = 6


def _comparable(df: pd.DataFrame) -> pd.DataFrame:
    keep = [c for c in df.columns if not c.startswith(("time/", "perf/"))]
    return df[keep].sort_values("run_id").reset_index(drop=True)


def _kill_mid_run(cluster, node, runs: Path, killed: list[bool]) -> None:
    """Kill ``node`` once both runs are part-way through training: one of them runs on it (each
    node has one CPU, each run asks for one)."""
    deadline = time.time() + 240
    while time.time() < deadline:
        rows = [len(read_metrics(m.parent)) for m in runs.glob("*/metrics.jsonl")]
        if len(rows) == 2 and all(1 <= n < STEPS - 1 for n in rows):
            cluster.remove_node(node, allow_graceful=False)
            killed.append(True)
            return
        time.sleep(0.02)


@pytest.mark.slow
def test_a_study_finishes_when_a_worker_node_dies(tiny_study, tmp_path):
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'distillscope[ray]'")
    from ray.cluster_utils import Cluster

    spec = tiny_study({"objective.kind": ["forward_kl", "reverse_kl"]}, steps=STEPS)
    clean = pd.read_parquet(run_study(spec, tmp_path / "clean"))

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        doomed = cluster.add_node(num_cpus=1)
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        killed: list[bool] = []
        out = tmp_path / "cluster"
        watcher = threading.Thread(
            target=_kill_mid_run, args=(cluster, doomed, out / "runs", killed), daemon=True
        )
        watcher.start()
        executor = ExecutorSpec("ray", address=cluster.address, cpus_per_run=1)
        table = pd.read_parquet(run_study(spec, out, executor))
        watcher.join()
    finally:
        cluster.shutdown()
    assert killed, "no worker node was killed mid-run"
    pd.testing.assert_frame_equal(_comparable(clean), _comparable(table))
