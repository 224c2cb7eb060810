"""Where runs execute: in this process, in a local process pool, or as Ray tasks.

An :class:`ExecutorSpec` says which, and with what (workers, Ray address, resources per run);
the ``study`` command builds one from its options and hands it to
:func:`~distillscope.study.run_study.run_study`, which hands it to :func:`run_jobs`. Every
executor calls :func:`execute_run` for each pending run; runs are independent and each writes
only its own run directory, so the executors give the same results (timings aside).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, get_args

from distillscope.config import ConfigError
from distillscope.workers import watch_parent

ExecutorKind = Literal["sequential", "pool", "ray"]
EXECUTORS: tuple[str, ...] = get_args(ExecutorKind)
#: times Ray re-runs a run whose worker process or node died; the run resumes from its last
#: checkpoint in the shared study directory, so the study's results are unchanged
RAY_RUN_RETRIES = 3


def execute_run(
    config: dict[str, Any],
    run_dir: str,
    cache_dir: str | None,
    threads: int | None,
    on_step: Callable[[int, dict], None] | None = None,
) -> str:
    """Run one config into ``run_dir`` (train + eval); returns its final status.

    Takes plain data (not a RunConfig) so it pickles cheaply into worker processes and Ray.
    ``threads`` sets torch's intra-op threads (None keeps the process's setting).
    """
    from distillscope.store import read_status
    from distillscope.study.run_one import run_one

    cfg = _worker_config(config, threads)
    cache = Path(cache_dir) if cache_dir else None
    try:
        run_one(cfg, Path(run_dir), rollout_cache=cache, on_step=on_step)
    except Exception:  # noqa: BLE001 — recorded in status.json by run_one; the study goes on
        pass
    return read_status(Path(run_dir))["status"]


def execute_baseline(
    run_id: str, config: dict[str, Any], run_dir: str, cache_dir: str | None, threads: int | None
) -> str:
    """Evaluate one untrained-student baseline into ``run_dir``; returns its final status."""
    from distillscope.study.baseline import PlannedBaseline, run_baseline

    baseline = PlannedBaseline(run_id, _worker_config(config, threads))
    return run_baseline(baseline, Path(run_dir), Path(cache_dir) if cache_dir else None)


def _worker_config(config: dict[str, Any], threads: int | None):
    """The validated RunConfig of a job, with torch's intra-op threads set (None: unchanged)."""
    import torch

    from distillscope.config import run_config_from_dict

    if threads is not None:
        torch.set_num_threads(max(1, threads))
    return run_config_from_dict(config, f"run {config.get('name', '')}")


Job = tuple[str, dict[str, Any], str]  # (run_id, config, run_dir)


def _start_worker(parent: int) -> None:
    # Workers watch their parent: a SIGKILLed study leaves no worker running its queue, even
    # one killed while this worker was still starting.
    watch_parent(parent)
    import distillscope.study.run_one  # noqa: F401 — torch, transformers, the training stack: once


#: The environment variable ``--threads N`` (train, eval, study) sets: torch's intra-op threads
#: of the command's process and of each of a study's pool workers.
THREADS_ENV = "DISTILLSCOPE_THREADS"


def set_threads(threads: int) -> None:
    """torch's intra-op threads for this process and the workers it starts: torch's own
    setting when torch is imported already, else ``OMP_NUM_THREADS`` (read as torch loads);
    :data:`THREADS_ENV` for a pool's workers (:class:`WorkerPool`)."""
    if threads < 1:
        raise ValueError(f"--threads must be 1 or more, got {threads}")
    os.environ[THREADS_ENV] = os.environ["OMP_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def requested_threads() -> int | None:
    """The threads ``--threads`` asked for (:data:`THREADS_ENV`), None when unset."""
    value = os.environ.get(THREADS_ENV, "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def _ready() -> None:
    """A no-op task: submitting one per worker makes the executor spawn them all at once."""


class WorkerPool:
    """``workers`` spawned processes that import the training stack as soon as they start.

    Importing torch and transformers takes seconds per process, so the ``study`` command
    starts its pool before it plans the study: the workers' imports overlap the parent's.
    Each worker runs ``cores / workers`` torch threads (``--threads``: that many). Use as a
    context manager.
    """

    def __init__(self, workers: int):
        self.threads = requested_threads() or max(1, (os.cpu_count() or 1) // workers)
        ctx = mp.get_context("spawn")  # fork + torch threads can deadlock
        self.executor = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=ctx,
            initializer=_start_worker,
            initargs=(os.getpid(),),
        )
        for _ in range(workers):  # one task per worker spawns every worker now
            self.executor.submit(_ready)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class ExecutorSpec:
    """What executes a study's runs; the ``study`` command's executor options as one value."""

    kind: ExecutorKind = "sequential"
    """``sequential`` (this process, step-level progress), ``pool`` (local processes) or ``ray``."""
    workers: int | WorkerPool = 2
    """pool: the number of worker processes, or a started :class:`WorkerPool`."""
    address: str | None = None
    """ray: the cluster address (None: start a local Ray)."""
    cpus_per_run: float = 1.0
    """ray: CPUs requested per run (also its torch threads)."""
    gpus_per_run: float = 0.0
    """ray: GPUs requested per run."""

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ConfigError(f"--executor must be sequential, pool or ray, got {self.kind!r}")
        if isinstance(self.workers, int) and self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {self.workers}")

    @contextmanager
    def started(self) -> Iterator[ExecutorSpec]:
        """This spec with its pool's workers running (a pool of ``workers`` processes is started
        here and shut down on exit; any other spec is returned as it is)."""
        if self.kind != "pool" or isinstance(self.workers, WorkerPool):
            yield self
            return
        with WorkerPool(self.workers) as pool:
            yield replace(self, workers=pool)


def run_jobs(
    executor: ExecutorSpec,
    jobs: list[Job],
    cache_dir: str,
    baselines: Sequence[Job] = (),
    on_step: Callable[[str, int, dict], None] | None = None,
) -> Iterator[tuple[str, str]]:
    """Run ``jobs`` on ``executor``; yields (run_id, status) as they finish.

    ``baselines`` are evaluated by the pool's workers ahead of the runs (other executors leave
    them to the caller); ``on_step(run_id, step, row)`` reports steps of the sequential executor.
    """
    if executor.kind == "sequential":
        return run_sequential(jobs, cache_dir, on_step)
    if executor.kind == "pool":
        return run_pool(jobs, cache_dir, executor, baselines)
    return run_ray(jobs, cache_dir, executor)


def run_pool(
    jobs: list[Job],
    cache_dir: str,
    executor: ExecutorSpec,
    baselines: Sequence[Job] = (),
) -> Iterator[tuple[str, str]]:
    """Run jobs in ``executor``'s :class:`WorkerPool` (or a new one of ``executor.workers``
    processes); yields (run_id, status) as they finish.

    ``baselines`` are queued first: they run side by side on the workers and are done long
    before any run evaluates (a run reads their skill scores from the shared cache and scores
    the skills itself on a miss, so the order is for speed, not correctness).
    """
    with executor.started() as running:  # a pool started here is shut down here
        pool = running.workers
        submit, threads = pool.executor.submit, pool.threads
        futures = {
            submit(execute_baseline, rid, cfg, d, cache_dir, threads): rid
            for rid, cfg, d in baselines
        }
        futures.update(
            {submit(execute_run, cfg, d, cache_dir, threads): rid for rid, cfg, d in jobs}
        )
        for fut in as_completed(futures):
            yield futures[fut], fut.result()


def run_ray(jobs: list[Job], cache_dir: str, executor: ExecutorSpec) -> Iterator[tuple[str, str]]:
    """Run each job as a Ray task with ``executor``'s CPU/GPU request; yields (run_id, status).

    A task whose node dies is re-run elsewhere (:data:`RAY_RUN_RETRIES`) and resumes from the
    run's checkpoint: every node must see the study directory at the same path.
    """
    try:
        import ray
    except ImportError:
        raise ValueError("--executor ray needs Ray: pip install 'distillscope[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=executor.address, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(
        num_cpus=executor.cpus_per_run, num_gpus=executor.gpus_per_run, max_retries=RAY_RUN_RETRIES
    )(execute_run)
    threads = max(1, int(executor.cpus_per_run))
    refs = {remote.remote(cfg, d, cache_dir, threads): rid for rid, cfg, d in jobs}
    try:
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield refs[done[0]], ray.get(done[0])
    finally:
        if started_here:
            ray.shutdown()


def run_sequential(
    jobs: list[Job], cache_dir: str, on_step: Callable[[str, int, dict], None] | None = None
) -> Iterator[tuple[str, str]]:
    """Run jobs one after another in this process (step-level progress available)."""
    for rid, cfg, d in jobs:
        callback = (lambda s, row, rid=rid: on_step(rid, s, row)) if on_step else None
        yield rid, execute_run(cfg, d, cache_dir, None, callback)
