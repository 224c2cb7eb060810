"""Scorecard rules on the [D] claims about on-policy distillation: docs/method.md §9 claims 16–18.

Length exploitation under signal regulation, prompt diversity at a fixed rollout budget, and
the teacher's informativeness. Margins are named constants; ``claimkit`` says what "beyond"
means.
"""

from __future__ import annotations

import math

import pandas as pd

from distillscope.report.claimkit import (
    ClaimRule,
    Verdict,
    cell_means,
    describe_pairs,
    experiment_rows,
    finished,
    has,
    match_columns,
    match_keys,
    plain_rows,
    where,
)
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    interval,
    num,
    pooled_pair,
    pp,
)

ACC = "eval/accuracy"


# 16 -----------------------------------------------------------------------------------------
LEN_RATIO, REWARD_DROP = "traj/len_ratio", "traj/reward_drop_pp"
C16_GROWTH = 1.5  # last/first-quarter length ratio (or its inverse) that counts as drift
C16_DROP = 5.0  # pp the last quarter's reward falls below the best quarter
R16 = (
    "From metrics.jsonl of each OPD run: length exploitation = mean response length of the "
    f"last quarter of steps ≥ {C16_GROWTH:g}× (or ≤ 1/{C16_GROWTH:g}×) the first quarter AND "
    f"the rollout reward of the last quarter ≥ {C16_DROP:g} pp below its best quarter. Flag "
    f"rates compared by Fisher's exact test (one-sided, level {ALPHA:g}). Supported: no "
    "regulated run flagged and unregulated runs flagged more often (significant). "
    "Contradicted: regulated runs flagged more often (significant). Else inconclusive."
)


def fisher_greater(hit_a: int, n_a: int, hit_b: int, n_b: int) -> float:
    """One-sided Fisher exact p-value that group a's hit rate exceeds group b's."""
    hits, n = hit_a + hit_b, n_a + n_b
    total = math.comb(n, hits)
    return (
        sum(math.comb(n_a, k) * math.comb(n_b, hits - k) for k in range(hit_a, min(n_a, hits) + 1))
        / total
    )


def _opd_runs(df: pd.DataFrame) -> pd.DataFrame:
    rows = where(finished(df), "objective.kind", ["opd"])
    if "objective.regulation" not in rows.columns or not has(rows, LEN_RATIO, REWARD_DROP):
        return rows.iloc[0:0]
    return rows


def _c16_applicable(df: pd.DataFrame) -> bool:
    regs = set(_opd_runs(df).get("objective.regulation", pd.Series(dtype=str)).dropna())
    return "none" in regs and bool(regs & {"hard_clip", "log_compress"})


def _c16(df: pd.DataFrame) -> Verdict:
    rows = _opd_runs(df)
    ratio = rows[LEN_RATIO].astype(float)
    grown = (ratio >= C16_GROWTH) | (ratio <= 1 / C16_GROWTH)
    flagged = grown & (rows[REWARD_DROP].astype(float) >= C16_DROP)
    rate = flagged.groupby(rows["objective.regulation"] != "none").agg(["sum", "count"])
    u_hit, u_n = (int(x) for x in rate.loc[False])
    r_hit, r_n = (int(x) for x in rate.loc[True])
    ev = (
        f"unregulated: {u_hit}/{u_n} runs flagged; regulated: {r_hit}/{r_n}. Length ratio "
        f"last/first quarter {num(ratio.min(), 2)}–{num(ratio.max(), 2)}; reward drop up to "
        f"{num(rows[REWARD_DROP].astype(float).max())} pp"
    )
    if fisher_greater(r_hit, r_n, u_hit, u_n) < ALPHA:
        return Verdict("contradicted", ev, R16)
    if r_hit == 0 and fisher_greater(u_hit, u_n, r_hit, r_n) < ALPHA:
        return Verdict("supported", ev, R16)
    return Verdict("inconclusive", ev, R16)


# 17 -----------------------------------------------------------------------------------------
P_COL, G_COL = "rollout.prompts_per_step", "rollout.rollouts_per_prompt"
C17_MARGIN = 3.0  # pp the most-prompts setting must gain within a budget
R17 = (
    "Budget = prompts × rollouts per step. Within each budget, accuracy of the most-prompts "
    "setting minus the fewest-prompts setting, pooled over budgets. Supported: the gain > "
    f"{C17_MARGIN:g} pp beyond its one-sided {1 - ALPHA:.0%} t-interval (needs ≥ 2 seeds per "
    "setting). Contradicted: the gain < 0 beyond that interval. Else inconclusive."
)


def _budget_pairs(df: pd.DataFrame) -> list[Pair]:
    """Most-prompts vs fewest-prompts cell per budget, matched on every other axis."""
    rows = plain_rows(experiment_rows(finished(df), "diversity"))
    if P_COL not in rows.columns or G_COL not in rows.columns or not has(rows, ACC):
        return []
    rows = rows.assign(_budget=rows[P_COL] * rows[G_COL])
    other = [c for c in match_columns(rows, P_COL) if c != G_COL]
    cells = cell_means(rows, ACC, [*other, "_budget", P_COL, G_COL])
    out = []
    for _, g in cells.groupby(match_keys(cells, [*other, "_budget"]), sort=True):
        if len(g) >= 2:
            hi, lo = g.loc[g[P_COL].idxmax()], g.loc[g[P_COL].idxmin()]
            key = (
                f"budget {hi['_budget']:g}: {hi[P_COL]:g}×{hi[G_COL]:g} vs "
                f"{lo[P_COL]:g}×{lo[G_COL]:g}"
            )
            dof = [r["runs"] - 1 if r["runs"] > 1 else math.nan for r in (hi, lo)]
            out.append(Pair(key, hi["mean"], hi["sem"], lo["mean"], lo["sem"], *dof))
    return out


def _c17(df: pd.DataFrame) -> Verdict:
    pairs = _budget_pairs(df)
    p = pooled_pair(pairs, "more prompts")
    ev = f"pooled gain {pp(p.diff)} pp {interval(p)}. {describe_pairs(pairs)}"
    if beyond(p, 0.0) == -1:
        return Verdict("contradicted", ev, R17)
    if beyond(p, C17_MARGIN) == 1:
        return Verdict("supported", ev, R17)
    return Verdict("inconclusive", ev, R17)


# 18 -----------------------------------------------------------------------------------------
INFO = "eval/informativeness"
R18 = "Needs eval/informativeness of each teacher; distillscope does not measure it yet."


RULES_OPD = [
    ClaimRule(
        16,
        "[D] Regulated OPD removes length exploitation; unregulated OPD can show "
        "length growth with falling accuracy.",
        "OPD runs with regulation none and "
        "hard_clip/log_compress, and their metrics.jsonl (report from a study directory)",
        _c16_applicable,
        _c16,
    ),
    ClaimRule(
        17,
        "[D] More distinct prompts beat more rollouts per prompt at a fixed budget.",
        "runs varying rollout.prompts_per_step × rollout.rollouts_per_prompt at equal products",
        lambda df: bool(_budget_pairs(df)),
        _c17,
    ),
    ClaimRule(
        18,
        "[D] Informativeness I > 0 is needed; a stronger but mismatched teacher can have lower I.",
        "≥ 2 teachers (model.teacher) with eval/informativeness",
        lambda df: True,
        None,  # nothing to judge until informativeness is measured
        unmeasured=(INFO,),
    ),
]
