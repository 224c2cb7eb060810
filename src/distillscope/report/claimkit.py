"""Building blocks of the scorecard rules: verdicts, sub-grids, matched comparisons, significance.

Conventions every rule follows (docs/method.md §9):

- Only finished runs (``status == "done"``) count; numbers are cell means over seeds.
- Fractions (accuracy, pass@k, sparsity, style share) are compared in percentage points (pp).
- A difference between two cells *counts* when it is at least the rule's minimum effect **and**,
  where both cells have ≥ 2 seeds, larger than 2 × the combined SEM √(SEM_a² + SEM_b²).
  With single-seed cells only the minimum effect applies.
- Comparisons are *matched*: OnPD is compared with OffPD only within cells that agree on every
  other axis (KL direction, LR, task …), and so on for each axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from distillscope.report.aggregate import (
    REGULATION_NAMES,
    aggregate,
    cell_columns,
    done,
    percent_scale,
    with_labels,
)

VERDICTS = ("supported", "contradicted", "inconclusive")
NOT_TESTED = "not tested"

# Columns that encode the same axis: comparing along one of them ignores all of them when matching.
_FAMILIES = {
    "_rollout": ("rollout.policy", "rollout.lam", "_rollout", "_lam"),
    "_lam": ("rollout.policy", "rollout.lam", "_rollout", "_lam"),
    "_kl": ("objective.kind", "objective.regulation", "_kl"),
    "objective.kind": ("objective.kind", "_kl"),
    "optim.lr": ("optim.lr", "lr_label", "_lr"),
    "optim.grad_clip": ("optim.grad_clip",),
    "_clip": ("optim.grad_clip", "_clip"),
}


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
    judge: Callable[[pd.DataFrame], Verdict]


@dataclass(frozen=True)
class Pair:
    """Cell means of one metric on the two sides of a matched comparison (display units)."""

    key: str  # the matched cell, e.g. "forward KL, 5e-05 (high)"
    a: float
    a_sem: float
    b: float
    b_sem: float

    @property
    def diff(self) -> float:
        """a − b."""
        return self.a - self.b

    @property
    def sem(self) -> float:
        """Combined SEM √(SEM_a² + SEM_b²); NaN when neither side has ≥ 2 seeds."""
        parts = [s for s in (self.a_sem, self.b_sem) if not math.isnan(s)]
        return math.sqrt(sum(s * s for s in parts)) if parts else math.nan


def counts(diff: float, sem: float, min_effect: float) -> bool:
    """Whether a difference counts: |diff| ≥ min_effect and |diff| > 2 × SEM (when known)."""
    if math.isnan(diff) or abs(diff) < min_effect:
        return False
    return math.isnan(sem) or abs(diff) > 2.0 * sem


def sign(pair: Pair, min_effect: float) -> int:
    """+1 when a beats b by a difference that counts, −1 for the reverse, 0 otherwise."""
    if not counts(pair.diff, pair.sem, min_effect):
        return 0
    return 1 if pair.diff > 0 else -1


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


def main_grid(df: pd.DataFrame) -> pd.DataFrame:
    """The finished OnPD/OffPD × forward/reverse KL runs of the main grid, with labels."""
    rows = plain_rows(experiment_rows(done(df), "main"))
    rows = where(
        where(rows, "rollout.policy", ["student", "teacher"]),
        "objective.kind",
        ["forward_kl", "reverse_kl"],
    )
    if "rollout.policy" not in rows.columns or "objective.kind" not in rows.columns:
        return rows.iloc[0:0]
    return with_labels(rows)


def spectrum_grid(df: pd.DataFrame) -> pd.DataFrame:
    """Finished full-vocabulary forward/reverse KL runs with a known λ (the λ-spectrum sub-grid)."""
    rows = plain_rows(experiment_rows(done(df), "spectrum"))
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


def pooled_pair(pairs: Sequence[Pair], key: str) -> Pair:
    """Matched pairs averaged into one (a = mean of a, b = mean of b, SEMs pooled)."""
    a, a_sem = pooled([p.a for p in pairs], [p.a_sem for p in pairs])
    b, b_sem = pooled([p.b for p in pairs], [p.b_sem for p in pairs])
    return Pair(key, a, a_sem, b, b_sem)


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
    return [c for c in cell_columns(df) if c not in drop]


def cell_key(row: pd.Series, columns: Sequence[str]) -> str:
    """A readable name of a cell from its varying ``columns`` (reader labels where available)."""
    shown_by = {"rollout.lam": "rollout.policy", "lr_label": "optim.lr"}
    parts = []
    for c in columns:
        v = row[c]
        if c in shown_by and shown_by[c] in columns:
            continue  # already part of the OnPD/λ or LR label
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
            v = f"{c.split('.')[-1]}={v}"
        parts.append(str(v))
    return ", ".join(parts) if parts else "all"


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
                )
            )
    return out


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


def pooled(means: Sequence[float], sems: Sequence[float]) -> tuple[float, float]:
    """Mean of cell means and its SEM √(Σ SEM²) / k (NaN when some cell has no SEM)."""
    ms = [m for m in means if not math.isnan(m)]
    if not ms:
        return math.nan, math.nan
    ss = list(sems)
    if any(math.isnan(s) for s in ss) or len(ss) != len(ms):
        return float(np.mean(ms)), math.nan
    return float(np.mean(ms)), math.sqrt(sum(s * s for s in ss)) / len(ss)


def spread(rows: pd.DataFrame) -> Pair:
    """The highest and the lowest cell of a series as a pair (a = max, b = min)."""
    hi, lo = rows.loc[rows["mean"].idxmax()], rows.loc[rows["mean"].idxmin()]
    return Pair(
        key="range",
        a=float(hi["mean"]),
        a_sem=float(hi["sem"]),
        b=float(lo["mean"]),
        b_sem=float(lo["sem"]),
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


def pp(value: float, digits: int = 1) -> str:
    """``+3.2`` with sign; ``n/a`` for NaN."""
    return "n/a" if math.isnan(value) else f"{value:+.{digits}f}"


def num(value: float, digits: int = 1) -> str:
    """``72.3``; ``n/a`` for NaN."""
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"


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
