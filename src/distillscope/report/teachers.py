"""The report's section per teacher: accuracy, informativeness and teacher compute of each
teacher a study used — one row per ``model.teacher`` of its one-teacher runs (teachers as a study
axis) and one per routed teacher of its runs with ``model.teachers`` (docs/teachers.md).

Shown when a study used two teachers or more. A row averages the finished runs that used the
teacher, whatever else they vary (the cells of the grid stay apart in the tables above it):

- one-teacher runs: ``eval/accuracy``, the run's I (``eval/informativeness``), the seconds of
  the teacher's scoring (``time/teacher_forward_s``) and its size (``model/teacher_params``);
- a routed teacher: the accuracy on the held-out items routed to it
  (``eval/teacher/<name>/accuracy``, routes by column or task), the I of its rows
  (``teacher/<name>/informativeness_run``) and its seconds (``teacher/<name>/seconds_s``:
  sampling and scoring).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pandas as pd

from distillscope.report.scope import is_routed, shown
from distillscope.report.tables import Table
from distillscope.results.aggregate import fmt_mean_sem

TITLE = "Teachers"
LEAD = (
    "One row per teacher: the mean ± SEM over the finished runs that used it, whatever else "
    "they vary. Routed teachers (model.teachers): accuracy on the held-out items routed to "
    "each, the informativeness I of its rows and its seconds of sampling and scoring; "
    "one-teacher runs: the run's accuracy, I and the seconds of the teacher's scoring."
)
COLUMNS = ["Teacher", "Runs", "Accuracy (%)", "Informativeness I", "Teacher s / run", "Params"]
_ROUTED = re.compile(r"teacher/([^/]+)/seconds_s")


def teacher_table(finished: pd.DataFrame, spec: dict | None = None) -> Table | None:
    """The section's table of the ``finished`` runs (``Study.finished``); None when they used
    fewer than two teachers. A teacher's path is shown as the study file (``spec``, study.yaml)
    typed it."""
    df = finished
    names = sorted({m.group(1) for c in df.columns if (m := _ROUTED.fullmatch(c))})
    routed = [f"teacher/{name}/seconds_s" for name in names]
    rows = []
    if "model.teacher" in df.columns:  # runs of one teacher (baselines name none)
        # a routed run's model.teacher is an unused default: not one of its teachers
        single = df[df["model.teacher"].notna() & ~is_routed(df) & df[routed].isna().all(axis=1)]
        for teacher, runs in single.groupby(single["model.teacher"].map(str), sort=True):
            measures = ("eval/accuracy", "eval/informativeness", "time/teacher_forward_s")
            rows.append(_row(shown(spec or {}, teacher), runs, *measures, "model/teacher_params"))
    for name, seconds in zip(names, routed, strict=True):
        key = f"teacher/{name}/"
        measures = (f"eval/{key}accuracy", key + "informativeness_run", seconds)
        rows.append(_row(f"{name} (routed)", df[df[seconds].notna()], *measures, key + "params"))
    if len(rows) < 2:
        return None
    return Table(COLUMNS, rows, numeric={1, 2, 3, 4, 5})


def _row(
    label: str, runs: pd.DataFrame, accuracy: str, info: str, seconds: str, params: str
) -> list[str]:
    """One teacher's cells from its runs' columns (— where a column is absent or all NaN)."""
    return [
        label,
        str(len(runs)),
        _mean_sem(runs, accuracy, 100.0),
        _mean_sem(runs, info, 1.0, digits=3),
        _mean_sem(runs, seconds, 1.0, digits=2),
        _mean_sem(runs, params, 1.0, digits=0),
    ]


def _mean_sem(runs: pd.DataFrame, column: str, scale: float, digits: int = 1) -> str:
    if column not in runs.columns:
        return "—"
    values = pd.to_numeric(runs[column], errors="coerce").dropna()
    if values.empty:
        return "—"
    sem = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else None
    return fmt_mean_sem(float(values.mean()), sem, scale, digits)


def html(table: Table | None, esc: Callable, html_table: Callable) -> list[str]:
    """The section as HTML parts around ``teacher_table``'s table ([] when it is not shown)."""
    if table is None:
        return []
    return [f"<h2>{esc(TITLE)}</h2>", f'<p class="muted">{esc(LEAD)}</p>', html_table(table)]


def markdown(table: Table | None, md_escape: Callable, md_table: Callable) -> list[str]:
    """The section as Markdown lines around ``teacher_table``'s table ([] when it is not
    shown)."""
    if table is None:
        return []
    return [f"## {TITLE}", "", md_escape(LEAD), "", md_table(table), ""]
