"""Building blocks of the scorecard rules: verdicts, sub-grids, matched comparisons, significance.

Conventions every rule follows (docs/method.md §9, §10 "Scorecard statistics"):

- Only finished runs (``status == "done"``) count; numbers are cell means over seeds. Baseline
  rows (``experiment == "baseline"``, the untrained student) are never part of a cell: they are
  the reference that shows whether the students learned (``learned``).
- Fractions (accuracy, pass@k, sparsity, style share) are compared in percentage points (pp).
- Comparisons are *matched*: OnPD is compared with OffPD only within cells that agree on every
  other axis (KL direction, LR, task …); matched differences are pooled into one contrast
  (``pooled_pair``) so that each verdict rests on one test, not on a count of per-cell tests.
- A difference is *beyond its margin* m when the one-sided (1 − α) Welch t-interval of the
  difference lies above m (``beyond``): diff − t₁₋α(ν)·SEM > m, SEM = √(SEM_a² + SEM_b²),
  ν by Welch–Satterthwaite. A cell with one seed has no SEM, so nothing involving it is ever
  beyond uncertainty, nor is a contrast with no seed variance at all (a degenerate table).
  α = ``ALPHA`` per verdict (halved when a verdict has two routes).
- A difference is *within* ±m (equivalence, TOST) when the two-sided (1 − 2α) interval lies
  inside (−m, m) (``within``). No-effect claims also need ``learned``: the study's students
  beat the untrained student by ≥ ``LEARNED_PP`` beyond uncertainty; otherwise the verdict is
  "inconclusive" with evidence starting ``no power``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps

import numpy as np
import pandas as pd

from distillscope.labels import REGULATION_NAMES, labelled_axes
from distillscope.report.aggregate import (
    aggregate,
    cell_columns,
    done,
    percent_scale,
    with_label,
    with_labels,
)
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    interval,
    num,
    pp,
    sample_pair,
)

VERDICTS = ("supported", "contradicted", "inconclusive")
NOT_TESTED = "not tested"
NOT_IMPLEMENTED = "not implemented"  # the study cannot measure what the claim needs
ERROR = "error"  # the rule raised: a bug, shown with its message, never a verdict

#: Students "learned" when their mean accuracy beats the untrained student by this many pp.
LEARNED_PP = 5.0
BASELINE = "baseline"  # experiment name (and run_id prefix) of the untrained-student rows

# Columns that encode the same axis: comparing along one of them ignores all of them when matching
# (and a labelled axis always brings its label column, see match_columns).
_FAMILIES = {
    "_rollout": ("rollout.policy", "rollout.lam", "_rollout", "_lam"),
    "_lam": ("rollout.policy", "rollout.lam", "_rollout", "_lam"),
    "_kl": ("objective.kind", "objective.regulation", "_kl"),
    "objective.kind": ("objective.kind", "_kl"),
    "optim.lr": ("optim.lr", "_lr"),
    "optim.grad_clip": ("optim.grad_clip",),
    "_clip": ("optim.grad_clip", "_clip"),
}


_MEMO: dict[tuple, tuple[tuple, object]] | None = None


def memo(fn: Callable) -> Callable:
    """Within ``scoring_pass``, compute ``fn(df, *args)`` once per table object and arguments.

    The rules ask for the same sub-grids and matched pairs many times; the table (kept alive
    in the memo, so its id cannot be reused) is read-only during a pass.
    """

    @wraps(fn)
    def wrapper(df: pd.DataFrame, *args: object) -> object:
        if _MEMO is None:
            return fn(df, *args)
        ids = tuple(id(a) if isinstance(a, pd.DataFrame) else a for a in args)
        key = (fn.__qualname__, id(df), ids)
        if key not in _MEMO:
            _MEMO[key] = ((df, args), fn(df, *args))
        return _MEMO[key][1]

    return wrapper


@contextmanager
def scoring_pass() -> Iterator[None]:
    """Scope of ``memo``: one scoring of one table."""
    global _MEMO
    _MEMO = {}
    try:
        yield
    finally:
        _MEMO = None


@dataclass(frozen=True)
class Verdict:
    """A rule's judgement: ``verdict`` ∈ VERDICTS, the numbers behind it, and the rule applied."""

    verdict: str
    evidence: str
    rule: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


@dataclass(frozen=True)
class ClaimRule:
    """One published claim (docs/method.md §9) and how a study is scored against it."""

    id: int
    claim: str  # one line, as in docs/method.md §9
    needs: str  # what a study must contain to test it (shown when it cannot)
    applicable: Callable[[pd.DataFrame], bool]
    #: None only while ``unmeasured`` is non-empty: there is nothing to judge yet.
    judge: Callable[[pd.DataFrame], Verdict] | None
    #: Metric keys the claim needs that no code of distillscope writes (not in the metric
    #: registry; checked by a test): while non-empty the claim is "not implemented".
    unmeasured: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# Sub-grids


def experiment_rows(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """Rows of sub-grid ``name`` when the table names experiments and has it; else every row."""
    if "experiment" in df.columns and (df["experiment"].map(str) == name).any():
        return df[df["experiment"].map(str) == name]
    return df


def where(df: pd.DataFrame, column: str, values: Sequence[object]) -> pd.DataFrame:
    """Rows whose ``column`` is in ``values``; all rows when the column is absent."""
    if column not in df.columns:
        return df
    return df[df[column].isin(list(values))]


def plain_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Drop ablation rows: teacher-style prompts, clipping switched off, regulated objectives."""
    out = df
    if "task.teacher_style_flag" in out.columns:
        out = out[out["task.teacher_style_flag"].fillna(False).astype(bool) == False]  # noqa: E712
    if "optim.grad_clip" in out.columns:
        out = out[out["optim.grad_clip"].notna()]
    if "objective.regulation" in out.columns:
        out = out[out["objective.regulation"].isin(["none"]) | out["objective.regulation"].isna()]
    return out


@memo
def main_grid(df: pd.DataFrame) -> pd.DataFrame:
    """The finished OnPD/OffPD × forward/reverse KL runs of the main grid, with labels."""
    rows = plain_rows(experiment_rows(finished(df), "main"))
    rows = where(
        where(rows, "rollout.policy", ["student", "teacher"]),
        "objective.kind",
        ["forward_kl", "reverse_kl"],
    )
    if "rollout.policy" not in rows.columns or "objective.kind" not in rows.columns:
        return rows.iloc[0:0]
    return with_labels(rows)


@memo
def spectrum_grid(df: pd.DataFrame) -> pd.DataFrame:
    """Finished full-vocabulary forward/reverse KL runs with a known λ (the λ-spectrum sub-grid)."""
    rows = plain_rows(experiment_rows(finished(df), "spectrum"))
    if "rollout.policy" not in rows.columns or "objective.kind" not in rows.columns:
        return rows.iloc[0:0]
    rows = with_labels(where(rows, "objective.kind", ["forward_kl", "reverse_kl"]))
    return rows[rows["_lam"].notna()]


def both_rollouts(rows: pd.DataFrame) -> bool:
    """Whether labelled ``rows`` contain both OnPD and OffPD runs."""
    return not rows.empty and "_rollout" in rows and {"OnPD", "OffPD"} <= set(rows["_rollout"])


def both_kls(rows: pd.DataFrame) -> bool:
    """Whether ``rows`` contain both full-vocabulary forward and reverse KL runs."""
    kinds = set(rows["objective.kind"]) if "objective.kind" in rows.columns else set()
    return {"forward_kl", "reverse_kl"} <= kinds


def finished(df: pd.DataFrame) -> pd.DataFrame:
    """Finished runs of the study's experiments: baseline rows (the untrained student) left out."""
    rows = done(df)
    return rows[~is_baseline(rows)]


def is_baseline(df: pd.DataFrame) -> pd.Series:
    """Which rows are the untrained-student baseline (``experiment == "baseline"``)."""
    if "experiment" not in df.columns:
        return pd.Series(False, index=df.index)
    ids = df["run_id"].map(str) if "run_id" in df.columns else pd.Series("", index=df.index)
    return (df["experiment"].map(str) == BASELINE) & ids.str.startswith(BASELINE)


@memo
def learned(df: pd.DataFrame, rows: pd.DataFrame) -> tuple[bool, str]:
    """Whether the students of ``rows`` beat the untrained student (the study's baseline rows).

    Pair = accuracy of the finished runs of ``rows`` taken as a sample (mean, SEM over runs:
    differences between cells only widen it) vs the baseline's mean; a single baseline row is
    a fixed reference. The students learned when the pair is ≥ LEARNED_PP above beyond
    uncertainty (``beyond``). Returns (learned, sentence).
    """
    acc = "eval/accuracy"
    base = done(df)
    base = base[is_baseline(base)]
    if base.empty or not has(base, acc):
        return False, "no power (no baseline): the study has no untrained-student row"
    if not has(rows, acc):
        return False, "no power: the compared runs have no eval/accuracy"
    runs = pd.to_numeric(finished(rows)[acc], errors="coerce").dropna() * 100.0
    vals = pd.to_numeric(base[acc], errors="coerce").dropna() * 100.0
    p = sample_pair(list(runs), list(vals), "runs vs untrained")
    if len(vals) == 1:
        p = Pair(p.key, p.a, p.a_sem, p.b, 0.0, p.a_dof, math.inf)
    text = (
        f"students {num(p.a)}% ({len(runs)} runs) vs untrained {num(p.b)}% (Δ {pp(p.diff)} pp, "
        f"{1 - ALPHA:.0%} bounds {interval(p)})"
    )
    if beyond(p, LEARNED_PP) == 1:
        return True, text
    return False, (
        f"no power: students did not beat the untrained student by ≥ {LEARNED_PP:g} pp beyond "
        f"uncertainty — {text}"
    )


def has(df: pd.DataFrame, *metrics: str) -> bool:
    """Whether every metric column exists and has at least one finite value."""
    return all(
        m in df.columns and pd.to_numeric(df[m], errors="coerce").notna().any() for m in metrics
    )


def n_values(df: pd.DataFrame, column: str) -> int:
    """Number of distinct non-missing values of ``column`` (0 when absent)."""
    return int(df[column].dropna().nunique()) if column in df.columns else 0


# ---------------------------------------------------------------------------------------------
# Matched comparisons


def match_columns(df: pd.DataFrame, axis: str) -> list[str]:
    """Cell columns other than ``axis`` (and its aliases) and ``experiment``: what must agree."""
    drop = {"experiment", axis, *_FAMILIES.get(axis, ())}
    labels = labelled_axes(df.columns)
    drop |= {labels[c] for c in drop if c in labels}
    return [c for c in cell_columns(df) if c not in drop]


def cell_key(row: pd.Series, columns: Sequence[str]) -> str:
    """A readable name of a cell from its varying ``columns`` (reader labels where available)."""
    shown_by = {"rollout.lam": "rollout.policy"}  # λ is part of the OnPD/OffPD/λ label
    labels = labelled_axes(row.index)
    labelled_by = {lab: axis for axis, lab in labels.items()}
    parts = []
    for c in columns:
        v = row[c]
        if shown_by.get(c) in columns or labelled_by.get(c) in columns:
            continue  # shown with the axis it belongs to
        if c == "rollout.policy" and "_rollout" in row:
            v = row["_rollout"]
        elif c == "objective.kind" and "_kl" in row:
            v = row["_kl"]
        elif c == "optim.lr" and "_lr" in row:
            v = row["_lr"]
        elif c == "objective.regulation":
            if "objective.kind" in columns and row.get("objective.kind") == "opd":
                continue  # the OPD label names its regulation
            v = REGULATION_NAMES.get(str(v), f"regulation={v}")
        elif c == "rollout.lam":
            v = f"λ={v:+g}" if isinstance(v, float) and not math.isnan(v) else f"λ={v}"
        else:
            label = row[labels[c]] if c in labels else None
            v = with_label(f"{c.split('.')[-1]}={v}", label)
        parts.append(str(v))
    return ", ".join(parts) if parts else "all"


@memo
def paired(
    df: pd.DataFrame, metric: str, axis: str, a: object, b: object, min_runs: int = 1
) -> list[Pair]:
    """Matched cell means of ``metric`` (display units) for ``axis == a`` versus ``axis == b``.

    Cells are matched on every other cell column (``match_columns``); only cells where both
    sides have ≥ ``min_runs`` measured runs are returned.
    """
    if metric not in df.columns or axis not in df.columns:
        return []
    df = df if "_rollout" in df.columns else with_labels(df)
    match = match_columns(df, axis)
    varying = [c for c in match if df[c].map(str).nunique() > 1]
    agg = aggregate(df, [metric], [*match, axis])
    agg = agg[agg[f"{metric}:n"] >= min_runs]
    scale = percent_scale(metric)
    labels = with_labels(agg)
    agg = agg.assign(_key=[cell_key(labels.loc[i], varying) for i in agg.index])
    agg["_match"] = match_keys(agg, match)
    out = []
    for _, group in agg.groupby("_match", sort=True):
        side_a = group[group[axis] == a]
        side_b = group[group[axis] == b]
        if len(side_a) == 1 and len(side_b) == 1:
            ra, rb = side_a.iloc[0], side_b.iloc[0]
            out.append(
                Pair(
                    key=str(ra["_key"]),
                    a=ra[f"{metric}:mean"] * scale,
                    a_sem=ra[f"{metric}:sem"] * scale,
                    b=rb[f"{metric}:mean"] * scale,
                    b_sem=rb[f"{metric}:sem"] * scale,
                    a_dof=_dof(ra[f"{metric}:n"]),
                    b_dof=_dof(rb[f"{metric}:n"]),
                )
            )
    return out


def _dof(n: float) -> float:
    return float(n) - 1.0 if n >= 2 else math.nan


def cell_means(df: pd.DataFrame, metric: str, by: Sequence[str]) -> pd.DataFrame:
    """Mean, SEM and n of ``metric`` per ``by`` group, in display units (pp for fractions)."""
    agg = aggregate(df, [metric], list(by))
    scale = percent_scale(metric)
    agg = agg[agg[f"{metric}:n"] > 0]
    return agg.assign(
        mean=agg[f"{metric}:mean"] * scale,
        sem=agg[f"{metric}:sem"] * scale,
        runs=agg[f"{metric}:n"],
    )[[*by, "mean", "sem", "runs"]]


def match_keys(frame: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """One string per row joining ``columns`` (NaN → "nan", so missing values match each other)."""
    if not columns or frame.empty:
        return pd.Series("", index=frame.index, dtype=object)
    return frame[list(columns)].apply(lambda col: col.map(str)).agg("|".join, axis=1)


@memo
def series_over(df: pd.DataFrame, metric: str, x: str) -> list[tuple[str, pd.DataFrame]]:
    """Cell means of ``metric`` against axis ``x``, one series per setting of the other axes.

    Returns ``[(series name, DataFrame[x, mean, sem, runs] sorted by x), …]`` in display units.
    """
    if metric not in df.columns or x not in df.columns:
        return []
    df = with_labels(df)
    match = match_columns(df, x)
    varying = [c for c in match if df[c].map(str).nunique() > 1]
    cm = cell_means(df, metric, [*match, x])
    if cm.empty:
        return []
    labels = with_labels(cm)
    names = [cell_key(labels.loc[i], varying) for i in cm.index]
    out = []
    for name in dict.fromkeys(names):
        rows = cm[[n == name for n in names]].sort_values(x)
        out.append((name, rows[[x, "mean", "sem", "runs"]].reset_index(drop=True)))
    return out


def spread(rows: pd.DataFrame) -> Pair:
    """The highest and the lowest cell of a series as a pair (a = max, b = min)."""
    hi, lo = rows.loc[rows["mean"].idxmax()], rows.loc[rows["mean"].idxmin()]
    return Pair(
        key="range",
        a=float(hi["mean"]),
        a_sem=float(hi["sem"]),
        b=float(lo["mean"]),
        b_sem=float(lo["sem"]),
        a_dof=_dof(hi["runs"]),
        b_dof=_dof(lo["runs"]),
    )


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (average ranks for ties); NaN with < 3 points or no spread."""
    xs, ys = pd.Series(list(x), dtype=float), pd.Series(list(y), dtype=float)
    ok = xs.notna() & ys.notna()
    if ok.sum() < 3:
        return math.nan
    rx, ry = xs[ok].rank().to_numpy(), ys[ok].rank().to_numpy()
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def describe_pairs(pairs: Sequence[Pair], unit: str = "pp", digits: int = 1) -> str:
    """``forward KL, 1e-05: 72.0 vs 70.1 (Δ +1.9 ± 1.1 pp); …`` for the evidence column."""
    parts = []
    for p in pairs:
        sem = "" if math.isnan(p.sem) else f" ± {p.sem:.{digits}f}"
        unit_text = f" {unit}" if unit else ""
        parts.append(
            f"{p.key}: {num(p.a, digits)} vs {num(p.b, digits)} "
            f"(Δ {pp(p.diff, digits)}{sem}{unit_text})"
        )
    return "; ".join(parts)


def mean_diff(pairs: Sequence[Pair]) -> float:
    """Mean of a − b over matched pairs (NaN for none)."""
    diffs = [p.diff for p in pairs if not math.isnan(p.diff)]
    return float(np.mean(diffs)) if diffs else math.nan
