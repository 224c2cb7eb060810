"""Building blocks of the scorecard rules: verdicts, one scoring's sub-grids, power.

Conventions every rule follows (docs/method.md §9, §10 "Scorecard statistics"):

- Only finished runs (``status == "done"``) count; numbers are cell means over seeds. Baseline
  rows (``experiment == "baseline"``, the untrained student) are never part of a cell: they are
  the reference that shows whether the students learned (``learned``).
- Rows are chosen and compared by config values (``rollout.policy == "student"``,
  ``objective.kind == "reverse_kl"``, ``optim.grad_clip`` null); reader labels such as OnPD
  only name cells in the evidence (:mod:`distillscope.report.matching`).
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
- A rule reads the table through a ``Scoring``: one scoring of one table, which computes each
  sub-grid and each matched comparison the rules ask for once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from distillscope.report.aggregate import done, with_labels
from distillscope.report.claims.common import plain as plain_rows
from distillscope.report.matching import LAMBDA, Contrast, paired
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    interval,
    num,
    pp,
    sample_pair,
    within,
)

VERDICTS = ("supported", "contradicted", "inconclusive", "not applicable")
NOT_TESTED = "not tested"
NOT_IMPLEMENTED = "not implemented"  # the study cannot measure what the claim needs
ERROR = "error"  # the rule raised: a bug, shown with its message, never a verdict

#: Students "learned" when their mean accuracy beats the untrained student by this many pp.
LEARNED_PP = 5.0
BASELINE = "baseline"  # experiment name (and run_id prefix) of the untrained-student rows
PARENT = "parent_run"  # an RLVR run's column: the run id of the distilled run it started from

# Sub-grids a rule can ask a Scoring for (see SUB_GRIDS).
FINISHED, MAIN, SPECTRUM, LR_SWEEP = "finished", "main", "spectrum", "lr_sweep"


@dataclass(frozen=True)
class Verdict:
    """A rule's judgement: ``verdict`` ∈ VERDICTS, the numbers behind it, and the rule applied."""

    verdict: str
    evidence: str
    rule: str
    #: The one number behind the verdict, in a few words ("Δ −2.8 pp [−7.2, +1.5]"), for the
    #: report's summary; empty when the rule gives none (the summary then shows the verdict).
    headline: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


@dataclass(eq=False)
class Scoring:
    """One scoring of one results table: the table and what the rules computed from it.

    The rules ask for the same sub-grids and matched pairs many times; a Scoring computes each
    once (``cached``). It lives for one ``score_claims`` call, and the table is not changed
    while it does.
    """

    df: pd.DataFrame
    #: Sub-grids given instead of computed (``on_grid``): the rules of one claim re-run on
    #: another experiment's runs (claims 14 and 15).
    given: dict[str, pd.DataFrame] = field(default_factory=dict)
    _cache: dict[tuple, Any] = field(default_factory=dict, init=False, repr=False)

    def cached(self, fn: Callable[..., Any], *args: Hashable) -> Any:
        """``fn(self, *args)``, computed once per scoring and arguments."""
        key = (fn, args)
        if key not in self._cache:
            self._cache[key] = fn(self, *args)
        return self._cache[key]

    def grid(self, name: str) -> pd.DataFrame:
        """Sub-grid ``name`` of the table (``SUB_GRIDS``)."""
        return self.cached(_grid, name)

    def pairs(self, grid: str, metric: str, contrast: Contrast) -> list[Pair]:
        """``paired(self.grid(grid), metric, contrast)``."""
        return self.cached(_grid_pairs, grid, metric, contrast)

    def learned(self, grid: str) -> tuple[bool, str]:
        """``learned(self.df, self.grid(grid))``: whether that sub-grid's students learned."""
        return self.cached(_grid_learned, grid)


def on_grid(s: Scoring, name: str, rows: pd.DataFrame) -> Scoring:
    """A scoring of the same table whose sub-grid ``name`` is ``rows`` (labelled): the rules
    that read that sub-grid then judge ``rows``; the baseline (``learned``) stays the table's."""
    return Scoring(s.df, {**s.given, name: with_labels(rows)})


def _grid(s: Scoring, name: str) -> pd.DataFrame:
    if name in s.given:
        return s.given[name]
    return SUB_GRIDS[name](s.df)


def _grid_pairs(s: Scoring, grid: str, metric: str, contrast: Contrast) -> list[Pair]:
    return paired(s.grid(grid), metric, contrast)


def _grid_learned(s: Scoring, grid: str) -> tuple[bool, str]:
    return learned(s.df, s.grid(grid))


@dataclass(frozen=True)
class ClaimRule:
    """One published claim (docs/method.md §9) and how a study is scored against it."""

    id: int
    claim: str  # one line, as in docs/method.md §9
    needs: str  # what a study must contain to test it (shown when it cannot)
    applicable: Callable[[Scoring], bool]
    #: None only while ``unmeasured`` is non-empty: there is nothing to judge yet.
    judge: Callable[[Scoring], Verdict] | None
    #: Metric keys the claim needs that no code of distillscope writes (not in the metric
    #: registry; checked by a test): while non-empty the claim is "not implemented".
    unmeasured: tuple[str, ...] = ()
    #: The measurements the claim names that this study lacks, in words ("eval/forgetting_pp
    #: of the LR sweep"): a claim is judged only on complete evidence, so while the list is
    #: non-empty the verdict is "not tested: needs …" (checked after ``applicable``).
    lacking: Callable[[Scoring], list[str]] | None = None


# ---------------------------------------------------------------------------------------------
# Verdicts


def decide(
    rule: str, evidence: str, contradicted: bool, supported: bool, headline: str = ""
) -> Verdict:
    """A rule's verdict from its two tests: "contradicted" when the evidence goes against the
    claim beyond uncertainty (checked first), else "supported" when it meets every margin of
    the claim, else "inconclusive"."""
    if contradicted:
        return Verdict("contradicted", evidence, rule, headline)
    return Verdict("supported" if supported else "inconclusive", evidence, rule, headline)


def effect_verdict(
    pair: Pair, margin: float, rule: str, evidence: str, headline: str | None = None
) -> Verdict:
    """An effect claim on one contrast d = a − b: contradicted when d < 0 beyond uncertainty,
    supported when d > ``margin`` beyond it (``beyond`` at ALPHA), else inconclusive. The
    headline defaults to "Δ d pp [bounds]"."""
    head = headline if headline is not None else f"Δ {pp(pair.diff)} pp {interval(pair)}"
    return decide(rule, evidence, beyond(pair, 0.0) == -1, beyond(pair, margin) == 1, head)


def no_effect_verdict(
    s: Scoring,
    grid: str,
    contrasts: Sequence[Pair],
    margin: float,
    rule: str,
    evidence: str,
    headline: str = "",
) -> Verdict:
    """A no-effect claim on ``contrasts``: contradicted when some |d| > ``margin`` beyond
    uncertainty (α = ALPHA / 2 split over the contrasts); else, when the students of sub-grid
    ``grid`` did not learn, inconclusive ("no power …" first); else supported when every d is
    within ±``margin`` (TOST), else inconclusive. The power sentence joins the evidence."""
    if any(beyond(c, margin, ALPHA / (2 * len(contrasts))) != 0 for c in contrasts):
        return Verdict("contradicted", evidence, rule, headline)
    power, text = s.learned(grid)
    if not power:
        return Verdict("inconclusive", f"{text}. {evidence}", rule, headline or "no power")
    found = all(within(c, margin) for c in contrasts)
    verdict = "supported" if found else "inconclusive"
    return Verdict(verdict, f"{evidence}; {text}", rule, headline)


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


def spectrum_grid(df: pd.DataFrame) -> pd.DataFrame:
    """Finished full-vocabulary forward/reverse KL runs with a known λ (the λ-spectrum sub-grid)."""
    rows = plain_rows(experiment_rows(finished(df), "spectrum"))
    if "rollout.policy" not in rows.columns or "objective.kind" not in rows.columns:
        return rows.iloc[0:0]
    rows = with_labels(where(rows, "objective.kind", ["forward_kl", "reverse_kl"]))
    return rows[rows[LAMBDA].notna()]


def lr_sweep_grid(df: pd.DataFrame) -> pd.DataFrame:
    """The finished plain runs of the LR sweep, with labels (none without an ``optim.lr``)."""
    rows = plain_rows(experiment_rows(finished(df), "lr_sweep"))
    return with_labels(rows) if "optim.lr" in rows.columns else rows.iloc[0:0]


def both_rollouts(rows: pd.DataFrame) -> bool:
    """Whether ``rows`` contain both OnPD (student) and OffPD (teacher) runs."""
    policies = set(rows["rollout.policy"]) if "rollout.policy" in rows.columns else set()
    return {"student", "teacher"} <= policies


def both_kls(rows: pd.DataFrame) -> bool:
    """Whether ``rows`` contain both full-vocabulary forward and reverse KL runs."""
    kinds = set(rows["objective.kind"]) if "objective.kind" in rows.columns else set()
    return {"forward_kl", "reverse_kl"} <= kinds


def finished(df: pd.DataFrame) -> pd.DataFrame:
    """Finished runs of the study's experiments: baseline rows (the untrained student) and the
    RLVR stage's runs (their own claims, 11 and 20, read them) left out."""
    rows = done(df)
    return rows[~is_baseline(rows) & ~is_rlvr(rows)]


def is_rlvr(df: pd.DataFrame) -> pd.Series:
    """Which rows are RLVR runs (``parent_run`` set: the distilled run each started from)."""
    if PARENT not in df.columns:
        return pd.Series(False, index=df.index)
    return df[PARENT].notna() & (df[PARENT].map(str) != "")


#: The sub-grids a Scoring computes once: every finished run, and the finished plain runs of
#: the main grid, the λ-spectrum and the LR sweep.
SUB_GRIDS: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    FINISHED: finished,
    MAIN: main_grid,
    SPECTRUM: spectrum_grid,
    LR_SWEEP: lr_sweep_grid,
}


def is_baseline(df: pd.DataFrame) -> pd.Series:
    """Which rows are the untrained-student baseline (``experiment == "baseline"``)."""
    if "experiment" not in df.columns:
        return pd.Series(False, index=df.index)
    ids = df["run_id"].map(str) if "run_id" in df.columns else pd.Series("", index=df.index)
    return (df["experiment"].map(str) == BASELINE) & ids.str.startswith(BASELINE)


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
        f"one-sided {1 - ALPHA:.1%} bounds {interval(p)})"
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
