"""A study on a Ray cluster (``--executor ray --address``) survives the death of a worker node.

A local cluster (:class:`ray.cluster_utils.Cluster`: a head that runs nothing and a one-CPU
worker node) runs a two-run study into one directory, the shared filesystem of a real cluster.
Once the first run has trained past a checkpoint, its node is killed and a second worker node
joins: Ray retries the run's task on the new node, the run resumes from its last checkpoint,
and the study ends with the table of an uninterrupted sequential one.
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

STEPS = 16  # a wide window to kill in: a tiny step takes milliseconds on a fast machine
ATTEMPTS = 3  # a run that passed the window between two polls is not counted; try afresh


def _comparable(df: pd.DataFrame) -> pd.DataFrame:
    keep = [c for c in df.columns if not c.startswith(("time/", "perf/"))]
    return df[keep].sort_values("run_id").reset_index(drop=True)


def _study_in_thread(spec, out: Path, executor: ExecutorSpec) -> tuple[threading.Thread, dict]:
    """Run the study in a thread (the cluster's nodes start from the main thread only)."""
    result: dict = {}

    def run() -> None:
        try:
            result["table"] = run_study(spec, out, executor)
        except BaseException as err:  # noqa: BLE001 — re-raised by the test
            result["error"] = err

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def _kill_node(cluster, node) -> None:
    """What a machine's death does: the node's workers and its raylet killed at once."""
    import psutil
    from ray._private import ray_constants

    raylet = node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid
    for child in psutil.Process(raylet).children(recursive=True):
        child.kill()
    cluster.remove_node(node, allow_graceful=False)


@pytest.mark.slow
def test_a_study_finishes_when_a_worker_node_dies(tiny_study, tmp_path):
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'distillscope[ray]'")
    from ray.cluster_utils import Cluster

    spec = tiny_study({"objective.kind": ["forward_kl", "reverse_kl"]}, steps=STEPS)
    clean = pd.read_parquet(run_study(spec, tmp_path / "clean"))

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})  # runs nothing
    try:
        doomed = cluster.add_node(num_cpus=1)  # the only node with a CPU: both runs queue here
        cluster.wait_for_nodes()
        executor = ExecutorSpec("ray", address=cluster.address, cpus_per_run=1)
        for attempt in range(ATTEMPTS):
            out = tmp_path / f"cluster-{attempt}"
            study, result = _study_in_thread(spec, out, executor)
            killed = False
            while study.is_alive() and not killed:  # the first run part-way: kill its node
                rows = [len(read_metrics(m.parent)) for m in (out / "runs").glob("*/metrics.jsonl")]
                if any(3 <= n < STEPS - 1 for n in rows):  # after the step-2 checkpoint
                    _kill_node(cluster, doomed)  # first: adding a node takes seconds
                    cluster.add_node(num_cpus=1)
                    killed = True
                time.sleep(0.02)
            study.join()
            if killed or "error" in result:
                break
    finally:
        cluster.shutdown()
    if "error" in result:
        raise result["error"]
    assert killed, f"no worker node was killed mid-run in {ATTEMPTS} attempts"
    pd.testing.assert_frame_equal(_comparable(clean), _comparable(pd.read_parquet(result["table"])))
