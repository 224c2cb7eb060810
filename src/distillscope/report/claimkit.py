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
from functools import lru_cache, wraps
from statistics import NormalDist

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
NOT_IMPLEMENTED = "not implemented"  # the study cannot measure what the claim needs
ERROR = "error"  # the rule raised: a bug, shown with its message, never a verdict

#: Level of each one-sided test (a one-sided 97.5% bound = one end of a two-sided 95% CI): the
#: false rate each verdict of a rule is built to keep, with room under the 5% target.
ALPHA = 0.025
#: Students "learned" when their mean accuracy beats the untrained student by this many pp.
LEARNED_PP = 5.0
BASELINE = "baseline"  # experiment name (and run_id prefix) of the untrained-student rows

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
    judge: Callable[[pd.DataFrame], Verdict]
    #: Metric keys the claim needs that no code of distillscope writes (not in the metric
    #: registry; checked by a test): while non-empty the claim is "not implemented".
    unmeasured: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pair:
    """Cell means of one metric on the two sides of a matched comparison (display units)."""

    key: str  # the matched cell, e.g. "forward KL, 5e-05 (high)"
    a: float
    a_sem: float
    b: float
    b_sem: float
    a_dof: float = math.nan  # degrees of freedom of a_sem (seeds − 1); NaN when unknown
    b_dof: float = math.nan

    @property
    def diff(self) -> float:
        """a − b."""
        return self.a - self.b

    @property
    def sem(self) -> float:
        """Combined SEM √(SEM_a² + SEM_b²); NaN when either side has no SEM (one seed)."""
        return math.sqrt(self.a_sem**2 + self.b_sem**2)

    @property
    def dof(self) -> float:
        """Welch–Satterthwaite degrees of freedom of ``sem`` (NaN when unknown)."""
        return welch_dof([self.a_sem**2, self.b_sem**2], [self.a_dof, self.b_dof])


def welch_dof(variances: Sequence[float], dofs: Sequence[float]) -> float:
    """ν = (Σ vᵢ)² / Σ (vᵢ² / νᵢ) (Welch–Satterthwaite); parts with vᵢ = 0 carry no weight."""
    parts = [(v, d) for v, d in zip(variances, dofs, strict=True) if not v == 0.0]
    if not parts:
        return math.inf  # no variance at all: the interval has zero width
    if any(math.isnan(v) or math.isnan(d) or d <= 0 for v, d in parts):
        return math.nan
    return sum(v for v, _ in parts) ** 2 / sum(v * v / d for v, d in parts)


@lru_cache(maxsize=4096)
def _t_quantile(p: float, dof: float) -> float:
    if math.isinf(dof):
        return NormalDist().inv_cdf(p)
    # CDF of Student's t by Simpson's rule on [0, x], then bisection on x.
    c = math.exp(math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2)) / math.sqrt(dof * math.pi)

    def cdf(x: float) -> float:
        grid = np.linspace(0.0, x, 801)
        f = c * (1.0 + grid * grid / dof) ** (-(dof + 1) / 2)
        h = x / 800
        return 0.5 + h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def t_quantile(p: float, dof: float) -> float:
    """The p-quantile (p ≥ 0.5) of Student's t with ``dof`` degrees of freedom (∞: normal)."""
    return _t_quantile(float(p), round(float(dof), 3))


def bounds(pair: Pair, alpha: float) -> tuple[float, float]:
    """One-sided (1 − alpha) lower and upper confidence bounds of a − b (NaN when unknown)."""
    sem, dof = pair.sem, pair.dof
    if math.isnan(pair.diff) or math.isnan(sem) or math.isnan(dof) or sem == 0.0:
        return math.nan, math.nan  # no seed variance at all (degenerate table): no evidence
    half = t_quantile(1.0 - alpha, dof) * sem
    return pair.diff - half, pair.diff + half


def beyond(pair: Pair, margin: float, alpha: float = ALPHA) -> int:
    """+1 when a − b > margin beyond uncertainty (lower bound > margin), −1 when a − b < −margin
    (upper bound < −margin), 0 otherwise or when the SEM is undefined (a one-seed cell)."""
    lo, hi = bounds(pair, alpha)
    if lo > margin:
        return 1
    if hi < -margin:
        return -1
    return 0


def within(pair: Pair, margin: float, alpha: float = ALPHA) -> bool:
    """Equivalence by two one-sided tests (TOST): both (1 − alpha) bounds inside (−m, m)."""
    lo, hi = bounds(pair, alpha)
    return -margin < lo and hi < margin


def interval(pair: Pair, alpha: float = ALPHA) -> str:
    """``[+1.2, +4.5]``: the two one-sided (1 − alpha) bounds of a − b, for the evidence."""
    lo, hi = bounds(pair, alpha)
    return "[no SEM: one seed]" if math.isnan(lo) else f"[{pp(lo)}, {pp(hi)}]"


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


def pooled_pair(pairs: Sequence[Pair], key: str) -> Pair:
    """Matched pairs averaged into one contrast: a = mean of a, b = mean of b.

    The seed variance is pooled over all cells of the contrast (SEM_a = s √(Σ 1/n_aᵢ) / k, on
    Σ (nᵢ − 1) degrees of freedom); when some cell's seed count is unknown, SEM_a = √(Σ
    SEM_aᵢ²) / k with Welch–Satterthwaite degrees of freedom.

    Pairs without a SEM (a one-seed side) are left out when any pair has one; with none the
    contrast's SEM is undefined, so it is never beyond uncertainty.
    """
    measured = [p for p in pairs if not math.isnan(p.sem)]
    pairs = measured or pairs  # one-seed cells carry no uncertainty: left out when others have
    k = len(pairs)
    if k == 0:
        return Pair(key, math.nan, math.nan, math.nan, math.nan)
    a, a_sem = pooled([p.a for p in pairs], [p.a_sem for p in pairs])
    b, b_sem = pooled([p.b for p in pairs], [p.b_sem for p in pairs])
    sides = [(p.a_sem, p.a_dof) for p in pairs] + [(p.b_sem, p.b_dof) for p in pairs]
    if all(1 <= d < math.inf and not math.isnan(s) for s, d in sides):
        # Pooled within-cell variance s² = Σ νᵢ sᵢ² / Σ νᵢ (sᵢ² = SEMᵢ² nᵢ): exact for a
        # balanced design with equal seed noise, on Σ νᵢ degrees of freedom.
        dof = sum(d for _, d in sides)
        var = sum(d * s * s * (d + 1) for s, d in sides) / dof
        a_sem = math.sqrt(var * sum(1 / (p.a_dof + 1) for p in pairs)) / k
        b_sem = math.sqrt(var * sum(1 / (p.b_dof + 1) for p in pairs)) / k
        half = dof / 2  # the two sides share one variance estimate: split its ν between them
        return Pair(key, a, a_sem, b, b_sem, half, half)
    a_dof = welch_dof([p.a_sem**2 for p in pairs], [p.a_dof for p in pairs])
    b_dof = welch_dof([p.b_sem**2 for p in pairs], [p.b_dof for p in pairs])
    return Pair(key, a, a_sem, b, b_sem, a_dof, b_dof)


def sample_pair(a: Sequence[float], b: Sequence[float], key: str) -> Pair:
    """Two groups of cell means compared as samples (cells as replicates; Welch's t).

    For sub-grids with one seed per cell: the spread of the cells within a group is the noise
    (it also holds any real variation inside a group, so the test is conservative).
    """
    xa = np.array([v for v in a if not math.isnan(v)], dtype=float)
    xb = np.array([v for v in b if not math.isnan(v)], dtype=float)

    def side(x: np.ndarray) -> tuple[float, float, float]:
        if len(x) == 0:
            return math.nan, math.nan, math.nan
        if len(x) < 2:
            return float(x.mean()), math.nan, math.nan
        return float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x))), float(len(x) - 1)

    (ma, sa, da), (mb, sb, db) = side(xa), side(xb)
    return Pair(key, ma, sa, mb, sb, da, db)


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
