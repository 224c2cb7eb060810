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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from distillscope import __version__
from distillscope.config import ConfigError, RunConfig, evaluation_key
from distillscope.safeyaml import quote
from distillscope.store import (
    METRICS_FILE,
    atomic_write_text,
    clear_run,
    holds_other_config,
    read_status,
    run_dir,
)
from distillscope.study.baseline import plan_baselines, run_baseline
from distillscope.study.executors import ExecutorSpec, Job, run_jobs
from distillscope.study.legacy import legacy_runs
from distillscope.study.lock import StudyLock, is_held
from distillscope.study.preflight import preflight_runs
from distillscope.study.spec import PlannedRun, StudySpec, expand, load_spec
from distillscope.study.spec_diff import stored_change
from distillscope.study.table import write_table

FINISHED = ("done", "diverged")
#: study_status key listing runs whose status.json is corrupt (they also count as pending).
UNREADABLE = "unreadable status.json"


def planned(spec: StudySpec, out: Path | None = None) -> list[PlannedRun]:
    """``spec``'s runs; under the ids the study directory ``out`` gave them when it holds the
    same runs written by an older version or since moved (:mod:`~distillscope.study.legacy`)."""
    kept = legacy_runs(out, spec) if out is not None else None
    return kept if kept is not None else expand(spec)


def prepare(spec: StudySpec, out: Path, overwrite: bool = False) -> list[PlannedRun]:
    """Write (or check) ``study.yaml`` in ``out`` and return the planned runs.

    A directory holding another study is refused with what differs
    (:func:`~distillscope.study.spec_diff.spec_change`) unless ``overwrite``: then its
    ``study.yaml`` is replaced, unchanged runs resume, and a finished baseline whose config
    changed is cleared to be evaluated again.
    """
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / "study.yaml"
    text = yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)
    older = legacy_runs(out, spec)  # a study of schema version ≤ 3: its runs keep their ids
    if older is not None:
        return older
    change = stored_change(out, spec)
    if change is not None:
        if not overwrite:
            raise ConfigError(
                f"{out} holds a different study ({change.line()}); pass --overwrite to replace "
                "its study.yaml, or choose another --out"
            )
        _clear_changed_baselines(out, expand(spec))
    atomic_write_text(spec_path, text)
    return expand(spec)


def _clear_changed_baselines(out: Path, runs: list[PlannedRun]) -> None:
    """Delete each planned baseline's directory that holds another config's evaluation."""
    for b in plan_baselines(runs):
        if holds_other_config(run_dir(out, b.run_id), b.config.model_dump(mode="json")):
            clear_run(run_dir(out, b.run_id))


def run_study(
    spec: StudySpec,
    out: Path,
    executor: ExecutorSpec | None = None,
    *,
    on_run_done: Callable[[str, str], None] | None = None,
    on_step: Callable[[str, int, dict], None] | None = None,
    only: Sequence[str] | None = None,
    overwrite: bool = False,
) -> Path:
    """Execute every unfinished run of ``spec`` into ``out``; returns the results table path.

    ``overwrite``: ``out`` may hold another study; its spec is replaced (:func:`prepare`).

    ``only``: names of experiments (or of the RLVR stage) whose runs execute; the others stay
    as they are (pending, or finished by an earlier call), and the study directory holds the
    whole study, so later calls with other names, or none, complete it (:func:`select`).

    ``executor``: what executes the runs, one :class:`~distillscope.study.executors.ExecutorSpec`
    (kind, a pool's size or its started :class:`~distillscope.study.executors.WorkerPool` — the
    ``study`` command starts one before it plans, so worker start-up overlaps planning — Ray
    address, resources per run); None runs them one after another in this process.
    ``on_run_done(run_id, status)`` is called
    as each run finishes, ``on_step(run_id, step, row)`` after each step of the sequential
    executor. The study directory is locked for the duration
    (:class:`~distillscope.study.lock.StudyLock`): a second study on it fails at once naming
    the holder.
    """
    executor = ExecutorSpec() if executor is None else executor
    if not isinstance(executor, ExecutorSpec):
        raise TypeError(
            f"run_study: executor must be an ExecutorSpec (e.g. ExecutorSpec('pool', workers=2)), "
            f"got {executor!r}"
        )
    # A missing model or a bad task file stops the study before it writes anything.
    chosen = select(spec, planned(spec, out), only)  # a resumed study's own ids
    preflight_runs([r.config for r in _unfinished(chosen, out)])
    out.mkdir(parents=True, exist_ok=True)
    with StudyLock(out):
        return _run_locked(spec, out, executor, on_run_done, on_step, only, overwrite)


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
    return run_id, config.model_dump(mode="json"), str(run_dir(out, run_id))


def _run_locked(
    spec: StudySpec,
    out: Path,
    executor: ExecutorSpec,
    on_run_done: Callable[[str, str], None] | None,
    on_step: Callable[[str, int, dict], None] | None,
    only: Sequence[str] | None,
    overwrite: bool = False,
) -> Path:
    runs = prepare(spec, out, overwrite)
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
            run_baseline(b, run_dir(out, b.run_id), Path(cache))
        elif read_status(run_dir(out, b.run_id))["status"] != "done":
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
    return run.parent is None or read_status(run_dir(out, run.parent))["status"] == "done"


def _unfinished(runs: list[PlannedRun], out: Path) -> list[PlannedRun]:
    return [r for r in runs if read_status(run_dir(out, r.run_id))["status"] not in FINISHED]


#: The state ``study status`` shows for a run whose status.json says ``running`` while no study
#: process holds the directory: its worker died (killed, machine lost); the next study resumes it.
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class RunState:
    """One run (or baseline) of a study as ``study status`` lists it."""

    run_id: str
    state: str  #: a status of distillscope.store.STATUSES, or INTERRUPTED
    step: int | None  #: steps logged in metrics.jsonl (None: none yet)
    steps: int  #: the steps it trains (0: a baseline, which only evaluates)
    reason: str
    corrupt: bool


def study_runs(out: Path) -> list[RunState]:
    """Every run of the study in ``out``, baselines last, with its state and last logged step.

    ``running`` holds only while a study process holds the directory's lock
    (:func:`~distillscope.study.lock.is_held`); otherwise such a run is :data:`INTERRUPTED`."""
    spec_path = out / "study.yaml"
    if not spec_path.is_file():
        raise FileNotFoundError(f"{out} is not a study directory (no study.yaml)")
    runs = expand(load_spec(spec_path, stored=True))
    live = is_held(out)
    planned = [(r.run_id, r.config.rlvr.steps if r.config.rlvr else r.config.optim.steps)
               for r in runs]  # fmt: skip
    planned += [(b.run_id, 0) for b in plan_baselines(runs)]
    states = []
    for rid, steps in planned:
        status = read_status(run_dir(out, rid))
        state = status["status"]
        if state == "running" and not live:
            state = INTERRUPTED
        step = last_step(run_dir(out, rid) / METRICS_FILE)
        corrupt = bool(status.get("corrupt"))
        states.append(RunState(rid, state, step, steps, status.get("reason", ""), corrupt))
    return states


def last_step(metrics: Path, tail_bytes: int = 65536) -> int | None:
    """The ``step`` + 1 of the last whole row of a ``metrics.jsonl`` (None when it has none),
    read from the file's end: a long run's log is not read whole."""
    if not metrics.is_file():
        return None
    with metrics.open("rb") as f:
        f.seek(max(0, f.seek(0, 2) - tail_bytes))
        lines = f.read().decode(errors="replace").splitlines()
    for line in reversed(lines):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line, or the cut first one
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            return row["step"] + 1
    return None


def study_status(out: Path) -> dict[str, list[str]]:
    """Run ids (baselines included), sorted, by state (:func:`study_runs`) for the study in
    ``out``; a corrupt status.json is listed under :data:`UNREADABLE` too."""
    by: dict[str, list[str]] = {}
    for run in study_runs(out):
        by.setdefault(run.state, []).append(run.run_id)
        if run.corrupt:  # counted as pending too; listed so that the user sees it
            by.setdefault(UNREADABLE, []).append(run.run_id)
    return {status: sorted(ids) for status, ids in by.items()}
