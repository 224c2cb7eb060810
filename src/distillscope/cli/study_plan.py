"""``study plan --rehearse`` / ``train --rehearse`` and ``study --overwrite``'s list of changes.

``--rehearse``: every distinct configuration of a plan, end to end on tiny model copies.

    distillscope study plan --rehearse --preset paper-qwen model.teacher=… model.student=…
    distillscope train my-run.yaml --rehearse

Each distinct configuration (:func:`~distillscope.study.rehearse.distinct`) is checked by the
static preflight and then trained for 2 steps and evaluated on 2 items — the forgetting harness,
the style detector, a served teacher and vLLM included — on random-weight copies of the
configured models with their tokenizers (:func:`~distillscope.testbed.like.tiny_copies`), in a
temporary directory that is removed afterwards. The table lists each configuration with ``ok``
or its one-line error; any error exits 2.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from distillscope.cli.errors import describe_error
from distillscope.cli.output import console, print_table
from distillscope.config import RunConfig
from distillscope.study.rehearse import Rehearsal, distinct, rehearse
from distillscope.study.spec import PlannedRun, StudySpec
from distillscope.study.spec_diff import stored_change
from distillscope.testbed.like import tiny_copies

#: ``distillscope study plan --help``: the plan's own options (``study --help`` is the study's).
PLAN_HELP = """\
Usage: distillscope study plan [STUDY.yaml | --preset NAME] [section.field=value ...] [OPTIONS]

Check a study as `distillscope study` would before it starts (every run's config, models, task
files, devices) and print, per experiment, its runs, tasks, steps and teachers, then each claim
part's power at the published values. Nothing is written.

Options:
  --preset NAME        a shipped study preset instead of a file (distillscope presets)
  --only A,B           plan only these experiments (or the RLVR stage)
  --rehearse           instead: train each distinct configuration 2 steps and evaluate it on 2
                       items, on tiny random copies of its models (seconds each); exit 2 when
                       one fails, with its one-line error
  --noise-from DIR     the power from a finished study's noise (default: the shipped record)
  --until-decided      plan the sequential design (--max-seeds N: its seed budget)
  --threads N          torch CPU threads (a rehearsal's)
  --help               this text

Examples:
  distillscope study plan my-study.yaml
  distillscope study plan --rehearse --preset paper-qwen model.teacher=DIR model.student=DIR
"""


def train_plan(cfg: RunConfig) -> list[PlannedRun]:
    """A ``train`` command's one run, as a plan of one."""
    return [PlannedRun(cfg.name, "train", {}, {}, cfg)]


def rehearse_plan(runs: list[PlannedRun]) -> int:
    """Rehearse ``runs``, print the table; returns how many configurations failed."""
    total = len(distinct(runs))
    console.print(
        f"rehearsing {total} distinct configurations of {len(runs)} runs", highlight=False
    )

    def said(r: Rehearsal) -> None:
        mark = "ok" if r.error is None else "[red]failed[/red]"
        console.print(f"  {escape(r.run.run_id)}: {mark}", highlight=False)

    with tempfile.TemporaryDirectory(prefix="distillscope-rehearsal-") as tmp:
        root = Path(tmp)
        results = rehearse(runs, tiny_copies(root / "models"), root, on_result=said)
    table = Table(title=f"rehearsal: {total} configurations, 2 steps each on tiny copies")
    table.add_column("configuration")
    table.add_column("runs", justify="right")
    table.add_column("result", overflow="fold")
    for r in results:
        result = "ok" if r.error is None else f"[red]{escape(describe_error(r.error))}[/red]"
        table.add_row(escape(r.run.run_id), str(r.runs), result)
    console.print(table)
    failed = sum(r.error is not None for r in results)
    if failed:
        console.print(f"[red]{failed} of {total} configurations failed[/red]; fix them first")
    return failed


def print_change(out: Path, study: StudySpec) -> None:
    """``study --overwrite`` on another study's directory: every changed field and run."""
    change = stored_change(out, study)
    if change is None:
        return
    console.print(
        f"replacing the study in {out}: {len(change.fields)} fields changed", highlight=False
    )
    for line in change.fields:
        console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
    for what, ids in (("unchanged (resume)", change.unchanged), ("new", change.new)):
        console.print(f"  runs {what}: {len(ids)}", highlight=False)
    for run_id in change.dropped:
        console.print(f"  no longer planned (kept on disk): {run_id}", highlight=False)


def rehearse_or_exit(runs: list[PlannedRun]) -> None:
    """Rehearse ``runs`` (``train --rehearse``, ``study plan --rehearse``); exit 2 when a
    configuration failed."""
    if rehearse_plan(runs):
        raise typer.Exit(2)


def plan_study(
    study: StudySpec, runs: list[PlannedRun], rehearse: bool, noise_from: Path | None = None
) -> int:
    """``study plan``: the ``runs`` of ``study`` per experiment, after the same checks as a
    study (the one preflight: models, tasks, devices), then each claim part's power
    (:func:`print_power`); nothing is written. ``rehearse``: each distinct configuration
    trained and evaluated on tiny model copies instead. Returns the number of rehearsed
    configurations that failed (0 without ``rehearse``)."""
    from collections import Counter

    from distillscope.cli.inputs import preflight

    if rehearse:
        from distillscope.config import check_machine

        for r in runs:
            check_machine(r.config)
        return rehearse_plan(runs)
    preflight([r.config for r in runs])
    rows = []
    for name, count in Counter(r.experiment for r in runs).items():
        mine = [r.config for r in runs if r.experiment == name]
        steps = {c.rlvr.steps if c.rlvr else c.optim.steps for c in mine}
        tasks = {c.rlvr.task if c.rlvr else c.task.identity() for c in mine}  # datasets
        teachers = {c.model.teachers_text() for c in mine}
        # paths as the study file typed them (its runs hold them resolved)
        cells = [
            ", ".join(sorted(study.shown(str(x)) for x in v)) for v in (tasks, steps, teachers)
        ]
        rows.append([name, count, *cells])
    columns = ("experiment", "runs", "tasks", "steps", "teachers")
    print_table(console, f"study {study.name}: {len(runs)} runs", columns, rows, numeric=[1])
    print_power(study, noise_from)
    return 0


def print_power(study: StudySpec, noise_from: Path | None) -> None:
    """Per part of each claim the design tests: its power at the published value and the
    smallest effect it decides at 80% power (``scorecard.power``), with the noise components of
    ``noise_from`` (a finished study), else of the shipped record ``scorecard.decide.RECORD``."""
    from distillscope.results.stats import ALPHA
    from distillscope.scorecard.decide import RECORD, plan_rows
    from distillscope.study.planner import designs

    source = noise_from or RECORD
    if not (source / "results.parquet").is_file():
        raise FileNotFoundError(
            f"{source} has no results.parquet; pass --noise-from DIR, a finished study's directory"
        )
    rows = plan_rows(designs(study), source)
    columns = ("claim", "part", "kind", "metric", "seeds", "samples", "SE", "power", "decides")
    title = f"power at the published values (noise of {source}; α = {ALPHA:g} one-sided)"
    print_table(console, title, columns, rows, numeric=[0, 4, 5, 6, 7])
