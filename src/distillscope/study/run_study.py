"""``run_study``: plan the grid, skip finished runs, execute the rest, rebuild the table, report.

    distillscope study                       # the quick preset on the shipped testbed
    distillscope study --preset smoke --out /tmp/s
    distillscope study my-study.yaml --executor pool --workers 2
    distillscope study status DIR
    distillscope study --preset paper --only main,rlvr   # a subset of the study's experiments

Before the runs, the study evaluates its baseline(s), the untrained student
(:mod:`distillscope.study.baseline`): in this process, or with ``--executor pool`` as the
first jobs of the pool. Re-running on an existing directory
resumes: runs whose status is ``done`` or ``diverged`` are skipped, interrupted ones restart from
their last checkpoint, a finished baseline is not evaluated again.
"""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

import yaml
from pydantic import ValidationError

from distillscope import __version__
from distillscope.config import ConfigError, RunConfig, evaluation_key
from distillscope.safeyaml import YamlError, load_yaml_file, quote
from distillscope.store import atomic_write_text, read_status
from distillscope.study.baseline import plan_baselines, run_baseline
from distillscope.study.executors import ExecutorSpec, Job, WorkerPool, run_jobs
from distillscope.study.lock import StudyLock
from distillscope.study.spec import PlannedRun, StudySpec, expand, load_spec
from distillscope.study.table import write_table
from distillscope.train import preflight_all

FINISHED = ("done", "diverged")
#: study_status key listing runs whose status.json is corrupt (they also count as pending).
UNREADABLE = "unreadable status.json"


def prepare(spec: StudySpec, out: Path) -> list[PlannedRun]:
    """Write (or check) ``study.yaml`` in ``out`` and return the planned runs."""
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / "study.yaml"
    text = yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)
    if spec_path.is_file() and _read_spec_file(spec_path) != spec.model_dump(mode="json"):
        raise ConfigError(f"{out} holds a different study; choose another --out to start anew")
    atomic_write_text(spec_path, text)
    return expand(spec)


def _read_spec_file(spec_path: Path) -> object:
    """The study.yaml a study directory holds, read within safeyaml's limits, with the fields
    a later version added at their defaults (so an older directory resumes)."""
    try:
        stored = load_yaml_file(spec_path, "study file")
    except YamlError as err:
        raise ConfigError(f"{err}; choose another --out to start anew") from None
    try:
        return StudySpec.model_validate(stored).model_dump(mode="json")
    except ValidationError:
        return stored  # not a study this version reads: it differs


def run_study(
    spec: StudySpec,
    out: Path,
    executor: ExecutorSpec | str = "sequential",
    *,
    workers: int | WorkerPool | None = None,
    on_run_done: Callable[[str, str], None] | None = None,
    on_step: Callable[[str, int, dict], None] | None = None,
    only: Sequence[str] | None = None,
) -> Path:
    """Execute every unfinished run of ``spec`` into ``out``; returns the results table path.

    ``only``: names of experiments (or of the RLVR stage) whose runs execute; the others stay
    as they are (pending, or finished by an earlier call), and the study directory holds the
    whole study, so later calls with other names, or none, complete it (:func:`select`).

    ``executor``: what executes the runs (:class:`~distillscope.study.executors.ExecutorSpec`:
    kind, workers or a started pool, Ray address, resources per run), or only its kind, with
    ``workers`` for a pool's size or started
    :class:`~distillscope.study.executors.WorkerPool` (the ``study`` command starts one before
    it plans, so worker start-up overlaps planning). ``on_run_done(run_id, status)`` is called
    as each run finishes, ``on_step(run_id, step, row)`` after each step of the sequential
    executor. The study directory is locked for the duration
    (:class:`~distillscope.study.lock.StudyLock`): a second study on it fails at once naming
    the holder.
    """
    if isinstance(executor, str):  # the kind alone: a convenience for scripts and tests
        executor = ExecutorSpec(executor) if workers is None else ExecutorSpec(executor, workers)
    elif workers is not None:
        raise TypeError("run_study: give workers inside the ExecutorSpec, not beside it")
    # A missing model or a bad task file stops the study before it writes anything.
    chosen = select(spec, expand(spec), only)
    preflight_all([r.config for r in _unfinished(chosen, out)])
    out.mkdir(parents=True, exist_ok=True)
    with StudyLock(out):
        return _run_locked(spec, out, executor, on_run_done, on_step, only)


def select(spec: StudySpec, runs: list[PlannedRun], only: Sequence[str] | None) -> list[PlannedRun]:
    """The runs of the experiments named in ``only`` (all runs when ``None``).

    A name that is neither an experiment of ``spec`` nor its RLVR stage is one line naming the
    names there are. RLVR runs start from their parents' students: choosing the stage without
    its source experiment runs only those whose parent is already ``done``.
    """
    if only is None:
        return runs
    names = [e.name for e in spec.experiments] + [stage.name for stage in spec.stages]
    unknown = [n for n in only if n not in names]
    if unknown or not only:
        what = f"{quote(unknown[0], 60)} is not" if unknown else "no experiment is"
        raise ConfigError(
            f"--only: {what} an experiment of study {spec.name} (choose from {names})"
        )
    return [r for r in runs if r.experiment in only]


def _job(out: Path, run_id: str, config: RunConfig) -> Job:
    """What an executor needs of one run or baseline: plain data that pickles cheaply."""
    return run_id, config.model_dump(mode="json"), str(out / "runs" / run_id)


def _run_locked(
    spec: StudySpec,
    out: Path,
    executor: ExecutorSpec,
    on_run_done: Callable[[str, str], None] | None,
    on_step: Callable[[str, int, dict], None] | None,
    only: Sequence[str] | None,
) -> Path:
    runs = prepare(spec, out)
    chosen = select(spec, runs, only)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    baselines = plan_baselines(runs)  # numbered over the whole study, so ids never move
    needed = {evaluation_key(r.config) for r in chosen}
    cache = str(out / "rollout-cache")
    baseline_jobs = []  # a pool evaluates the baselines in its workers, ahead of the runs
    for b in baselines:
        if evaluation_key(b.config) not in needed:
            continue
        if executor.kind != "pool":
            run_baseline(b, out / "runs" / b.run_id, Path(cache))
        elif read_status(out / "runs" / b.run_id)["status"] != "done":
            baseline_jobs.append(_job(out, b.run_id, b.config))
    write_table(out, runs, baselines)
    baseline_ids = {b.run_id for b in baselines}
    # the distillation runs, then the RLVR stage's runs whose parent finished (a diverged or
    # failed parent leaves its RLVR run pending, with nothing to start from)
    for stage in ("distill", "rlvr"):
        pending = [r for r in _unfinished(chosen, out) if _stage(r) == stage and _ready(r, out)]
        jobs = [_job(out, r.run_id, r.config) for r in pending]
        results = run_jobs(
            executor, jobs, cache, baseline_jobs if stage == "distill" else (), on_step
        )
        for run_id, status in results:
            # after every run: a killed study loses at most the runs in flight
            write_table(out, runs, baselines)
            if on_run_done is not None and run_id not in baseline_ids:
                on_run_done(run_id, status)
    table = write_table(out, runs, baselines)
    saved = table.get("time/teacher_saved_s")
    provenance = {
        "command": "distillscope " + " ".join(sys.argv[1:]) if sys.argv else "",
        "version": __version__,
        "started": started,
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()} {platform.python_version()}",
        "executor": executor.kind,
        # generation + teacher forward the runs read from the shared rollout cache
        "teacher_time_saved_s": round(float(saved.sum()), 1) if saved is not None else 0.0,
    }
    atomic_write_text(out / "provenance.json", json.dumps(provenance, indent=1) + "\n")
    return out / "results.parquet"


def _stage(run: PlannedRun) -> str:
    return "distill" if run.parent is None else "rlvr"


def _ready(run: PlannedRun, out: Path) -> bool:
    """A distillation run is always ready; an RLVR run once its parent is ``done``."""
    return run.parent is None or read_status(out / "runs" / run.parent)["status"] == "done"


def _unfinished(runs: list[PlannedRun], out: Path) -> list[PlannedRun]:
    return [r for r in runs if read_status(out / "runs" / r.run_id)["status"] not in FINISHED]


def study_status(out: Path) -> dict[str, list[str]]:
    """Run ids (baselines included), sorted, by status for the study in ``out``."""
    spec_path = out / "study.yaml"
    if not spec_path.is_file():
        raise FileNotFoundError(f"{out} is not a study directory (no study.yaml)")
    spec = load_spec(spec_path)
    by: dict[str, list[str]] = {}
    runs = expand(spec)
    for rid in [r.run_id for r in runs] + [b.run_id for b in plan_baselines(runs)]:
        status = read_status(out / "runs" / rid)
        by.setdefault(status["status"], []).append(rid)
        if status.get("corrupt"):  # counted as pending too; listed so that the user sees it
            by.setdefault(UNREADABLE, []).append(rid)
    return {status: sorted(ids) for status, ids in by.items()}
