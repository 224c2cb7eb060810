"""Scorecard rules on the [D] claims about on-policy distillation: docs/method.md §9 claims 16–18.

Length exploitation under signal regulation, prompt diversity at a fixed rollout budget, and
the teacher's informativeness. Margins are named constants; ``claimkit`` says what "beyond"
means.
"""

from __future__ import annotations

import pandas as pd

from distillscope.report.claimkit import (
    FINISHED,
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    effect_verdict,
    experiment_rows,
    has,
    plain_rows,
    where,
)
from distillscope.report.matching import (
    cell_means,
    cell_pair,
    describe_pairs,
    match_columns,
    match_keys,
)
from distillscope.report.stats import (
    ALPHA,
    Pair,
    fisher_greater,
    interval,
    num,
    pooled_pair,
    pp,
)

ACC = "eval/accuracy"


# 16 -----------------------------------------------------------------------------------------
LEN_RATIO, REWARD_DROP = "traj/len_ratio", "traj/reward_drop_pp"
CLAIM_16_LENGTH_RATIO = 1.5  # last/first-quarter length ratio (or its inverse) that is drift
CLAIM_16_REWARD_DROP_PP = 5.0  # the last quarter's reward below the best quarter's
CLAIM_16_RULE = (
    "From metrics.jsonl of each OPD run: length exploitation = mean response length of the "
    f"last quarter of steps ≥ {CLAIM_16_LENGTH_RATIO:g}× (or ≤ 1/{CLAIM_16_LENGTH_RATIO:g}×) "
    f"the first quarter AND the rollout reward of the last quarter ≥ "
    f"{CLAIM_16_REWARD_DROP_PP:g} pp below its best quarter. Flag rates compared by Fisher's "
    f"exact test (one-sided, level {ALPHA:g}). Supported: no regulated run flagged and "
    "unregulated runs flagged more often (significant). Contradicted: regulated runs flagged "
    "more often (significant). Else inconclusive."
)


def opd_runs(s: Scoring) -> pd.DataFrame:
    """The finished OPD runs with a regulation and trajectory features (none without)."""
    rows = where(s.grid(FINISHED), "objective.kind", ["opd"])
    if "objective.regulation" not in rows.columns or not has(rows, LEN_RATIO, REWARD_DROP):
        return rows.iloc[0:0]
    return rows


def claim_16_applicable(s: Scoring) -> bool:
    """Claim 16 is testable: unregulated and regulated OPD runs with trajectory features."""
    regs = set(opd_runs(s).get("objective.regulation", pd.Series(dtype=str)).dropna())
    return "none" in regs and bool(regs & {"hard_clip", "log_compress"})


def claim_16_length_exploitation(s: Scoring) -> Verdict:
    """Claim 16's verdict (``CLAIM_16_RULE``) on the OPD runs' trajectories."""
    rows = opd_runs(s)
    ratio = rows[LEN_RATIO].astype(float)
    grown = (ratio >= CLAIM_16_LENGTH_RATIO) | (ratio <= 1 / CLAIM_16_LENGTH_RATIO)
    flagged = grown & (rows[REWARD_DROP].astype(float) >= CLAIM_16_REWARD_DROP_PP)
    rate = flagged.groupby(rows["objective.regulation"] != "none").agg(["sum", "count"])
    u_hit, u_n = (int(x) for x in rate.loc[False])
    r_hit, r_n = (int(x) for x in rate.loc[True])
    ev = (
        f"unregulated: {u_hit}/{u_n} runs flagged; regulated: {r_hit}/{r_n}. Length ratio "
        f"last/first quarter {num(ratio.min(), 2)}–{num(ratio.max(), 2)}; reward drop up to "
        f"{num(rows[REWARD_DROP].astype(float).max())} pp"
    )
    contradicted = fisher_greater(r_hit, r_n, u_hit, u_n) < ALPHA
    supported = r_hit == 0 and fisher_greater(u_hit, u_n, r_hit, r_n) < ALPHA
    return decide(CLAIM_16_RULE, ev, contradicted, supported)


# 17 -----------------------------------------------------------------------------------------
P_COL, G_COL = "rollout.prompts_per_step", "rollout.rollouts_per_prompt"
CLAIM_17_MARGIN_PP = 3.0  # the most-prompts setting must gain within a budget
CLAIM_17_RULE = (
    "Budget = prompts × rollouts per step. Within each budget, accuracy of the most-prompts "
    "setting minus the fewest-prompts setting, pooled over budgets. Supported: the gain > "
    f"{CLAIM_17_MARGIN_PP:g} pp beyond its one-sided {1 - ALPHA:.0%} t-interval (needs ≥ 2 seeds "
    "per setting). Contradicted: the gain < 0 beyond that interval. Else inconclusive."
)


def budget_pairs(s: Scoring) -> list[Pair]:
    """Most-prompts vs fewest-prompts cell per budget, matched on every other axis."""
    return s.cached(_budget_pairs)


def _budget_pairs(s: Scoring) -> list[Pair]:
    rows = plain_rows(experiment_rows(s.grid(FINISHED), "diversity"))
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
            out.append(cell_pair(key, hi, lo))
    return out


def claim_17_prompt_diversity(s: Scoring) -> Verdict:
    """Claim 17's verdict (``CLAIM_17_RULE``) on the diversity runs."""
    pairs = budget_pairs(s)
    p = pooled_pair(pairs, "more prompts")
    ev = f"pooled gain {pp(p.diff)} pp {interval(p)}. {describe_pairs(pairs)}"
    return effect_verdict(p, CLAIM_17_MARGIN_PP, CLAIM_17_RULE, ev)


# 18 -----------------------------------------------------------------------------------------
INFO = "eval/informativeness"


RULES_OPD = [
    ClaimRule(
        16,
        "[D] Regulated OPD removes length exploitation; unregulated OPD can show "
        "length growth with falling accuracy.",
        "OPD runs with regulation none and "
        "hard_clip/log_compress, and their metrics.jsonl (report from a study directory)",
        claim_16_applicable,
        claim_16_length_exploitation,
    ),
    ClaimRule(
        17,
        "[D] More distinct prompts beat more rollouts per prompt at a fixed budget.",
        "runs varying rollout.prompts_per_step × rollout.rollouts_per_prompt at equal products",
        lambda s: bool(budget_pairs(s)),
        claim_17_prompt_diversity,
    ),
    ClaimRule(
        18,
        "[D] Informativeness I > 0 is needed; a stronger but mismatched teacher can have lower I.",
        "≥ 2 teachers (model.teacher) with eval/informativeness",
        lambda s: True,
        None,  # nothing to judge until informativeness is measured
        unmeasured=(INFO,),
    ),
]
