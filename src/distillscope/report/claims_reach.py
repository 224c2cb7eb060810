"""Scorecard rules on how far distillation carries: docs/method.md §9 claims 23 and 25.

OPD as a catalyst rather than a ceiling breaker (23, [D]: pass@k at large k against the untrained
student) and the long-chain robustness check on real models (25, [P]: an observation, never
"supported"). Margins are named constants; ``claimkit`` says what "beyond" and "within" mean.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from distillscope.report.aggregate import cell_columns, done, with_labels
from distillscope.report.claimkit import (
    FINISHED,
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    has,
    is_baseline,
)
from distillscope.report.claims_opd import opd_runs
from distillscope.report.matching import cell_key, cell_means
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    detectable_margin,
    interval,
    num,
    pp,
    within,
)

ACC = "eval/accuracy"

# 23 -----------------------------------------------------------------------------------------
PASS1 = "eval/pass@1"
CLAIM_23_MIN_K = 32  # "pass@k at large k": docs/method.md §9
CLAIM_23_GAIN_PP = 5.0  # OPD's pass@1 gain over the untrained student
CLAIM_23_MARGIN_PP = 3.0  # pass@K gap at the largest K, equivalence
CLAIM_23_RULE = (
    "The `opd` experiment's OPD runs against the untrained student (baseline rows of the same "
    "task), at pass@1 and at pass@K, K the largest k measured on both (≥ "
    f"{CLAIM_23_MIN_K}). Each side's mean: OPD = mean of its cells, SEM from the seed variance "
    "pooled within cells; untrained = mean of the baseline rows, SEM from their spread (one "
    "row: the runs' seed variance). Supported: the pass@1 gain > "
    f"{CLAIM_23_GAIN_PP:g} pp beyond its one-sided {1 - ALPHA:.1%} t-interval while the pass@K "
    f"gap lies within ±{CLAIM_23_MARGIN_PP:g} pp (both one-sided {1 - ALPHA:.1%} bounds inside, "
    "TOST). Contradicted: pass@1 below the untrained student's, or the pass@K gap beyond "
    f"±{CLAIM_23_MARGIN_PP:g} pp, beyond uncertainty (level {ALPHA:g} split over the three). "
    "Else inconclusive."
)
_PASS = re.compile(r"eval/pass@(\d+)")


def baseline_rows(s: Scoring, rows: pd.DataFrame) -> pd.DataFrame:
    """The finished untrained-student rows of the tasks of ``rows`` (and those with no task)."""
    base = done(s.df)
    base = base[is_baseline(base)]
    if "task.name" in base.columns and "task.name" in rows.columns:
        task = base["task.name"]
        base = base[task.isna() | task.isin(set(rows["task.name"].dropna()))]
    return base


def pass_ks(rows: pd.DataFrame) -> set[int]:
    """The k of every ``eval/pass@k`` measured in ``rows``."""
    return {int(m.group(1)) for c in rows.columns if (m := _PASS.fullmatch(c)) and has(rows, c)}


def largest_k(s: Scoring) -> int:
    """The largest k with pass@k on both the `opd` runs and the untrained student (0: none)."""
    rows = opd_runs(s)
    ks = pass_ks(rows) & pass_ks(baseline_rows(s, rows))
    return max(ks, default=0)


def claim_23_lacking(s: Scoring) -> list[str]:
    """What claim 23 lacks: pass@1 and pass@K (K ≥ 32) on the baseline and on the OPD runs."""
    rows = opd_runs(s)
    base = baseline_rows(s, rows)
    out = []
    for name, side in (("the `opd` runs", rows), ("the untrained student", base)):
        ks = pass_ks(side)
        if side.empty:
            out.append(f"{name} (baseline rows)" if side is base else name)
            continue
        if 1 not in ks:
            out.append(f"pass@1 on {name}")
        if max(ks, default=0) < CLAIM_23_MIN_K:
            top = f" (measured up to pass@{max(ks)})" if ks else ""
            out.append(f"pass@{CLAIM_23_MIN_K} on {name}{top}")
    if not out and largest_k(s) < CLAIM_23_MIN_K:
        out.append(f"pass@k with k ≥ {CLAIM_23_MIN_K} measured on both the OPD runs and baseline")
    return out


def versus_untrained(s: Scoring, metric: str) -> Pair:
    """``metric`` of the `opd` runs (mean of cell means) − the untrained student's (display
    units), with the SEMs of ``CLAIM_23_RULE``."""
    return s.cached(_versus_untrained, metric)


def _versus_untrained(s: Scoring, metric: str) -> Pair:
    rows = opd_runs(s)
    cols = [c for c in cell_columns(rows) if c != "experiment" and not rows[c].isna().all()]
    rows = rows.assign(_all="")
    cells = cell_means(rows, metric, cols or ["_all"])
    var, dof = _within_cell_variance(rows, metric, cols or ["_all"])
    k = len(cells)
    a = float(cells["mean"].mean()) if k else math.nan
    a_sem = math.sqrt(var * float((1.0 / cells["runs"]).sum())) / k if k else math.nan
    base = pd.to_numeric(baseline_rows(s, rows)[metric], errors="coerce").dropna() * 100.0
    if len(base) >= 2:
        b_sem, b_dof = float(base.std(ddof=1)) / math.sqrt(len(base)), float(len(base) - 1)
    else:  # one evaluation of the untrained student: its noise is taken to be a run's
        b_sem, b_dof = math.sqrt(var), dof
    b = float(base.mean()) if len(base) else math.nan
    return Pair(f"OPD − untrained, {metric}", a, a_sem, b, b_sem, dof, b_dof)


def _within_cell_variance(rows: pd.DataFrame, metric: str, by: list[str]) -> tuple[float, float]:
    """Seed variance (display units²) pooled within the cells ``by``, and its dof (NaN: none)."""
    vals = pd.to_numeric(rows[metric], errors="coerce") * 100.0
    groups = vals.groupby([rows[c].map(str) for c in by])
    var, n = groups.var(ddof=1), groups.count()
    ok = (n >= 2) & var.notna()
    dof = float((n[ok] - 1).sum())
    if dof == 0:
        return math.nan, math.nan
    return float((var[ok] * (n[ok] - 1)).sum()) / dof, dof


def claim_23_catalyst(s: Scoring) -> Verdict:
    """Claim 23's verdict (``CLAIM_23_RULE``)."""
    k = largest_k(s)
    gain, gap = versus_untrained(s, PASS1), versus_untrained(s, f"eval/pass@{k}")
    split = ALPHA / 3
    contradicted = beyond(gain, 0.0, split) == -1 or beyond(gap, CLAIM_23_MARGIN_PP, split) != 0
    supported = beyond(gain, CLAIM_23_GAIN_PP) == 1 and within(gap, CLAIM_23_MARGIN_PP)
    ev = (
        f"pass@1: OPD {num(gain.a)}% vs untrained {num(gain.b)}% (gain {pp(gain.diff)} pp "
        f"{interval(gain)}); pass@{k}: OPD {num(gap.a)}% vs untrained {num(gap.b)}% (gap "
        f"{pp(gap.diff)} pp {interval(gap)})"
    )
    reach = detectable_margin(gap)
    if reach > CLAIM_23_MARGIN_PP:
        ev += (
            f"; this design passes the ±{CLAIM_23_MARGIN_PP:g} pp equivalence at 80% power only "
            f"for a margin ≥ {num(reach)} pp"
        )
    head = f"pass@1 {pp(gain.diff)} pp, pass@{k} gap {pp(gap.diff)} pp {interval(gap)}"
    return decide(CLAIM_23_RULE, ev, contradicted, supported, head)


# 25 -----------------------------------------------------------------------------------------
#: Long-chain tasks: Numina-MATH from its hub, and the file-backed boxed-math task (MATH-500 …).
LONG_CHAIN_TASKS = ("numina-math", "math")
CLAIM_25_RULE = (
    "An observation, never a test: the cell means of the long-chain runs (task "
    f"{', '.join(LONG_CHAIN_TASKS)}, real models: model.teacher not testbed:) per rollout × KL × "
    "LR, with the best cell named. [P] ran one seed per condition and called its result "
    "suggestive (OnPD + reverse KL best on MATH-500 at the low LR), so the verdict is always "
    "inconclusive; the evidence says whether this study's best cell agrees."
)


def long_chain_runs(s: Scoring) -> pd.DataFrame:
    """Finished runs on a long-chain task with real models."""
    rows = s.grid(FINISHED)
    if "task.name" not in rows.columns:
        return rows.iloc[0:0]
    rows = rows[rows["task.name"].isin(LONG_CHAIN_TASKS)]
    if "model.teacher" in rows.columns:
        rows = rows[~rows["model.teacher"].map(str).str.startswith("testbed:")]
    return rows


def claim_25_long_chains(s: Scoring) -> Verdict:
    """Claim 25's observation (``CLAIM_25_RULE``): always inconclusive, with the numbers."""
    rows = with_labels(long_chain_runs(s))
    by = [c for c in ("rollout.policy", "objective.kind", "optim.lr") if c in rows.columns]
    cells = cell_means(rows, ACC, by or ["task.name"])
    labels = with_labels(cells)
    names = [cell_key(labels.loc[i], by) for i in cells.index]
    best = int(np.argmax(cells["mean"].to_numpy()))
    parts = [
        f"{n}: {num(m)}% ({int(r)} run{'s' if r != 1 else ''})"
        for n, m, r in zip(names, cells["mean"], cells["runs"], strict=True)
    ]
    length = ""
    if has(rows, "eval/len_mean"):
        length = f"; mean answer {num(float(rows['eval/len_mean'].astype(float).mean()), 0)} tokens"
    ev = f"observation (not a test): best {names[best]}{length}. {'; '.join(parts)}"
    head = f"best: {names[best]} {num(float(cells['mean'].iloc[best]))}%"
    return decide(CLAIM_25_RULE, ev, False, False, head)


RULES_REACH = [
    ClaimRule(
        23,
        "[D] OPD is a catalyst, not a ceiling breaker: pass@k at large k converges to the "
        "base student's.",
        f"pass@k up to k ≥ {CLAIM_23_MIN_K} (eval.coverage_samples ≥ {CLAIM_23_MIN_K}) on the "
        "untrained student (baseline rows) and the `opd` experiment's OPD runs",
        lambda s: not opd_runs(s).empty,
        claim_23_catalyst,
        lacking=claim_23_lacking,
    ),
    ClaimRule(
        25,
        "[P] The conclusions hold for long reasoning chains (Numina-MATH, real models).",
        "a long-chain task (real models): runs on task numina-math or math with real teacher and "
        "student checkpoints",
        lambda s: has(long_chain_runs(s), ACC),
        claim_25_long_chains,
    ),
]
