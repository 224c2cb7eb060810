"""``distillscope study``: run a controlled study; ``study plan`` checks one and prints its runs;
``study status DIR`` shows a study's progress.

distillscope study                                   # the quick preset on the shipped testbed
distillscope study --preset paper-qwen model.teacher=DIR model.student=DIR
distillscope study plan --rehearse my-study.yaml     # each distinct run, tiny model copies
distillscope study status DIR

``plan`` and ``status`` are the first argument rather than sub-commands, so that ``study
STUDY.yaml`` keeps its file as the first argument (a typer group would read it as a command).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from distillscope.cli.errors import friendly_errors
from distillscope.cli.option_groups import grouped, option, with_threads
from distillscope.cli.output import console, print_table
from distillscope.cli.progress import ProgressLog, progress_bar
from distillscope.store import PROGRESS_FILE
from distillscope.study.spec import preset_names

if TYPE_CHECKING:
    from distillscope.study.executors import ExecutorSpec


@dataclass(frozen=True)
class Execution:
    """Where a study's runs execute (``study.executors``)."""

    executor: str = option("pool", help="pool (local processes) | sequential | ray")
    workers: int = option(2, help="pool: worker processes (each gets cores/workers threads)")
    address: str | None = option(None, help="ray: cluster address (default: start a local one)")
    cpus_per_run: float = option(1.0, help="ray: CPUs requested per run")
    gpus_per_run: float = option(0.0, help="ray: GPUs requested per run")

    def spec(self) -> ExecutorSpec:
        """The executor these options ask for (its options checked; torch-free)."""
        from distillscope.study.executors import ExecutorSpec

        e = self
        return ExecutorSpec(e.executor, e.workers, e.address, e.cpus_per_run, e.gpus_per_run)


@dataclass(frozen=True)
class Planning:
    """``study plan``'s options and ``--until-decided``'s (docs/studies.md)."""

    rehearse: bool = option(
        False, help="plan: run each distinct configuration 2 steps on tiny model copies"
    )
    noise_from: Path | None = option(
        None, help="plan: the power from a finished study's noise (default: the shipped record)"
    )
    until_decided: bool = option(False, help="add seeds where claims lack power")
    max_seeds: int | None = option(None, help="--until-decided: the seed budget (≥ 2)")


@friendly_errors
@with_threads
@grouped(Execution, "execution")
@grouped(Planning, "planning")
def study(
    ctx: typer.Context,
    args: list[str] = typer.Argument(
        None,
        help="[plan|status] [STUDY.yaml] [section.field=value …] — overrides apply to every run; "
        "`status DIR` shows a study's progress; `plan …` checks a study and prints its runs "
        "(`study plan --help`)",
    ),
    preset: str = typer.Option(None, help=" | ".join(preset_names())),
    out: Path = typer.Option(None, help="study directory (default distillscope-runs/<time>)"),
    report: bool = typer.Option(True, help="write the report when the study ends"),
    calibrate: bool = typer.Option(True, help="calibrate the report's scorecard (`report --help`)"),
    overwrite: bool = typer.Option(
        False, help="replace another study's spec in --out (its unchanged runs resume)"
    ),
    only: str = typer.Option(
        None, help="comma-separated experiments (or the RLVR stage) to run; the rest wait"
    ),
    execution: Execution = Execution(),
    planning: Planning = Planning(),
) -> None:
    """Run a controlled study (default: the quick preset); the same --out resumes it.

    distillscope study --preset paper-qwen model.teacher=/models/q7b model.student=/models/q1.5b

    distillscope study --preset paper --only main,rlvr --out DIR   # a subset; DIR keeps the rest

    distillscope study plan --preset paper-qwen model.teacher=…    # what it would run; no output

    distillscope study plan --rehearse --preset paper-qwen …  # each distinct run, tiny models
    """
    from distillscope.cli.inputs import planned_runs, study_spec
    from distillscope.study.sequential import policy_of

    args = list(args or [])
    if "--help" in args or "-h" in args:
        _study_help(ctx, plan=args[:1] == ["plan"])
    if args[:1] == ["status"]:
        _status(args)
        return
    plan = args[:1] == ["plan"]
    files, overrides = _files_and_overrides(args[1:] if plan else args)
    if planning.rehearse and not plan:
        raise ValueError("--rehearse goes with plan: distillscope study plan --rehearse …")
    policy = policy_of(planning.until_decided, planning.max_seeds)
    running = execution.spec()  # checked
    # A bad study file or override: one line in a fraction of a second, before any worker
    # starts importing torch (a pool's shutdown would wait for those imports).
    spec = study_spec(files, preset, overrides, policy)
    chosen = None if only is None else [n.strip() for n in only.split(",") if n.strip()]
    if spec.until_decided is not None and chosen and not plan:
        raise ValueError("--until-decided runs the whole study: drop --only")
    runs = planned_runs(spec, chosen, None if plan else out)  # a resumed study's own ids
    if plan:
        from distillscope.cli.study_plan import plan_study  # rehearsal: torch, once checked

        if plan_study(spec, runs, planning.rehearse, planning.noise_from):
            raise typer.Exit(2)
        return
    out = out or Path("distillscope-runs") / _now()
    # Started first: a pool's workers import torch and transformers while this process plans.
    with running.started() as executor:
        _run(spec, runs, out, executor, chosen, overwrite)
    _finish(out, report, calibrate)


def _now() -> str:
    from datetime import datetime

    return datetime.now().strftime("%Y%m%d-%H%M%S")


def _files_and_overrides(args: list[str]) -> tuple[list[str], list[str]]:
    """The study files and ``key=value`` overrides among ``args``; an unknown ``--flag`` is
    refused (``ignore_unknown_options`` leaves it among the arguments)."""
    unknown = [a for a in args if a.startswith("-") and "=" not in a]
    if unknown:
        raise ValueError(f"no such option: {unknown[0]} (see distillscope study --help)")
    return [a for a in args if "=" not in a], [a for a in args if "=" in a]


def _study_help(ctx: typer.Context, plan: bool) -> None:
    """Print ``study --help`` (or ``study plan --help``: the plan's own) and exit 0."""
    if plan:
        from distillscope.cli.study_plan import PLAN_HELP

        print(PLAN_HELP, end="")
        raise typer.Exit()
    command = ctx.command
    with command.make_context("distillscope study", []) as own:
        text = command.get_help(own)  # typer's rich help prints itself and returns ""
    if text:
        print(text)
    raise typer.Exit()


def _run(study, runs: list, out: Path, executor, only: list[str] | None, overwrite: bool) -> None:
    """Check ``runs`` of ``study`` (the one preflight), then run them into ``out`` with a bar
    per run and one for the steps (a log off a terminal); ``--until-decided`` looks between."""
    from distillscope.cli.inputs import preflight
    from distillscope.study.run_study import run_study, study_status
    from distillscope.study.sequential import run_until_decided

    preflight([r.config for r in runs])  # one line naming a bad input, before any output
    if overwrite:
        from distillscope.cli.study_plan import print_change

        print_change(out, study)
    console.print(f"study [bold]{study.name}[/bold]: {len(runs)} runs into {out} ({executor.kind})")
    with progress_bar() as bar:
        runs_bar = bar.add_task("runs", total=len(runs))
        step_bar = bar.add_task("steps", total=None, visible=executor.kind == "sequential")
        steps_of = {r.run_id: r.config.optim.steps for r in runs}
        log = ProgressLog(
            f"study {study.name}", len(runs), "run", console, out / PROGRESS_FILE,
            echo=not console.is_terminal,
        )  # fmt: skip

        def on_run_done(run_id: str, status: str) -> None:
            bar.advance(runs_bar)
            log.update(int(bar.tasks[runs_bar].completed), f"({run_id}: {status})")
            if status != "done":
                console.print(f"  {escape(run_id)}: [red]{status}[/red]")

        def on_step(run_id: str, step: int, row: dict) -> None:
            bar.update(
                step_bar,
                completed=step + 1,
                total=steps_of.get(run_id),  # a seed an --until-decided look added: unknown
                description=f"  {run_id[:40]}",
            )

        finished = study_status(out) if (out / "study.yaml").is_file() else {}
        ids = {r.run_id for r in runs}
        done = [i for s in ("done", "diverged") for i in finished.get(s, []) if i in ids]
        bar.update(runs_bar, completed=len(done))
        run = functools.partial(
            run_study, out=out, executor=executor, on_run_done=on_run_done, on_step=on_step,
            only=only, overwrite=overwrite,
        )  # fmt: skip
        if study.until_decided is None:
            run(study)
        else:  # look, add seeds where claims lack power, look again (study.sequential)
            from distillscope.results.stats import ALPHA
            from distillscope.scorecard.decide import claim_states

            def on_look(line: str, total: int) -> None:
                console.print(line, highlight=False)
                bar.update(runs_bar, total=total)

            run_until_decided(study, out, run, claim_states, ALPHA, on_look)


def _finish(out: Path, report: bool, calibrate: bool) -> None:
    """After the runs: the results table, the failed runs' count (exit 1 when all failed) and,
    with ``report``, the report."""
    from distillscope.study.baseline import BASELINE
    from distillscope.study.run_study import study_status

    console.print(f"results table: {out / 'results.parquet'}")
    # the grid's runs only: the untrained-student baselines are not runs of the grid
    by = {s: [r for r in ids if not r.startswith(BASELINE)] for s, ids in study_status(out).items()}
    failed, total = len(by.get("failed", [])), sum(len(v) for v in by.values())
    if failed:
        console.print(f"[red]{failed} of {total} runs failed[/red] (reasons: runs/*/status.json)")
    if total and failed == total:
        raise typer.Exit(1)  # nothing to report on
    if report:
        from distillscope.cli.report_cmd import write_report

        write_report(out, calibrate)


def _status(args: list[str]) -> None:
    """``study status DIR``: every run of the study with its state and last step, then the count
    of each state and the looks made so far."""
    from collections import Counter

    from distillscope.safeyaml import clip
    from distillscope.study.run_study import INTERRUPTED, study_runs
    from distillscope.study.sequential import look_lines

    if len(args) != 2:
        raise ValueError("usage: distillscope study status DIR")
    out = Path(args[1])
    runs = study_runs(out)
    rows = []
    for r in runs:
        step = "eval" if not r.steps else f"{r.step or 0}/{r.steps}"
        reason = "status.json unreadable" if r.corrupt else clip(r.reason, 80)
        rows.append([r.run_id, r.state, step, reason])
    columns = ("run", "state", "step", "reason")
    print_table(console, f"study {out}: {len(runs)} runs", columns, rows, numeric=[2])
    counts = Counter(r.state for r in runs)
    console.print(", ".join(f"{n} {state}" for state, n in sorted(counts.items())), markup=False)
    for line in look_lines(out):  # study --until-decided: the looks made so far
        console.print(line, markup=False)
    if counts[INTERRUPTED]:
        console.print(
            f"{INTERRUPTED}: no study process holds {out}; rerun the study with --out {out} "
            "to resume them from their last checkpoint",
            markup=False,
        )
