"""Scorecard rules on the [D] claims about on-policy distillation: docs/method.md §9 claims 16–18.

Length exploitation under signal regulation, prompt diversity at a fixed rollout budget, and
the teacher's informativeness. ``claimkit`` says what makes a difference count.
"""

from __future__ import annotations

import pandas as pd

from distillscope.report.aggregate import done
from distillscope.report.claimkit import (
    ClaimRule,
    Pair,
    Verdict,
    cell_means,
    describe_pairs,
    experiment_rows,
    has,
    match_columns,
    match_keys,
    mean_diff,
    num,
    plain_rows,
    pp,
    sign,
    spearman,
    where,
)

ACC = "eval/accuracy"


# 16 -----------------------------------------------------------------------------------------
LEN_RATIO, REWARD_DROP = "traj/len_ratio", "traj/reward_drop_pp"
R16 = (
    "From metrics.jsonl of each OPD run: length exploitation = mean response length of the "
    "last quarter of steps ≥ 1.5× (or ≤ 1/1.5×) the first quarter AND the rollout reward of the "
    "last quarter ≥ 5 pp below its best quarter. Supported: no regulated run flagged and ≥ 1 "
    "unregulated run flagged. Contradicted: regulated runs flagged at least as often as "
    "unregulated ones (and some are). Else inconclusive."
)


def _opd_runs(df: pd.DataFrame) -> pd.DataFrame:
    rows = where(done(df), "objective.kind", ["opd"])
    if "objective.regulation" not in rows.columns or not has(rows, LEN_RATIO, REWARD_DROP):
        return rows.iloc[0:0]
    return rows


def _c16_applicable(df: pd.DataFrame) -> bool:
    regs = set(_opd_runs(df).get("objective.regulation", pd.Series(dtype=str)).dropna())
    return "none" in regs and bool(regs & {"hard_clip", "log_compress"})


def _c16(df: pd.DataFrame) -> Verdict:
    rows = _opd_runs(df)
    ratio = rows[LEN_RATIO].astype(float)
    flagged = ((ratio >= 1.5) | (ratio <= 1 / 1.5)) & (rows[REWARD_DROP].astype(float) >= 5.0)
    rate = flagged.groupby(rows["objective.regulation"] != "none").agg(["sum", "count"])
    u_hit, u_n = (int(x) for x in rate.loc[False])
    r_hit, r_n = (int(x) for x in rate.loc[True])
    ev = (
        f"unregulated: {u_hit}/{u_n} runs flagged; regulated: {r_hit}/{r_n}. Length ratio "
        f"last/first quarter {num(ratio.min(), 2)}–{num(ratio.max(), 2)}; reward drop up to "
        f"{num(rows[REWARD_DROP].astype(float).max())} pp"
    )
    if r_hit > 0 and r_hit / r_n >= u_hit / u_n:
        return Verdict("contradicted", ev, R16)
    if r_hit == 0 and u_hit > 0:
        return Verdict("supported", ev, R16)
    return Verdict("inconclusive", ev, R16)


# 17 -----------------------------------------------------------------------------------------
P_COL, G_COL = "rollout.prompts_per_step", "rollout.rollouts_per_prompt"
R17 = (
    "Budget = prompts × rollouts per step. Within each budget, accuracy of the most-prompts "
    "setting minus the fewest-prompts setting. Supported: mean gain ≥ 3 pp, ≥ 1 budget where it "
    "counts (≥ 3 pp beyond 2×SEM) and none where it counts negative. Contradicted: mean gain ≤ "
    "−3 pp with ≥ 1 counting negative budget. Else inconclusive."
)


def _budget_pairs(df: pd.DataFrame) -> list[Pair]:
    """Most-prompts vs fewest-prompts cell per budget, matched on every other axis."""
    rows = plain_rows(experiment_rows(done(df), "diversity"))
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
            out.append(Pair(key, hi["mean"], hi["sem"], lo["mean"], lo["sem"]))
    return out


def _c17(df: pd.DataFrame) -> Verdict:
    pairs = _budget_pairs(df)
    d = mean_diff(pairs)
    signs = [sign(p, 3.0) for p in pairs]
    ev = f"mean gain {pp(d)} pp. {describe_pairs(pairs)}"
    if d <= -3.0 and -1 in signs:
        return Verdict("contradicted", ev, R17)
    if d >= 3.0 and 1 in signs and -1 not in signs:
        return Verdict("supported", ev, R17)
    return Verdict("inconclusive", ev, R17)


# 18 -----------------------------------------------------------------------------------------
INFO = "eval/informativeness"
R18 = (
    "Per teacher (model.teacher), mean informativeness I and the student's mean accuracy. "
    "Supported: teachers exist on both sides of I = 0 and every teacher with I > 0 yields "
    "higher accuracy than every teacher with I ≤ 0. Contradicted: a teacher with I ≤ 0 yields "
    "≥ 3 pp more accuracy than the best teacher with I > 0. Else inconclusive."
)


def _teachers(df: pd.DataFrame) -> pd.DataFrame:
    rows = done(df)
    if "model.teacher" not in rows.columns or not has(rows, INFO, ACC):
        return pd.DataFrame()
    info = cell_means(rows, INFO, ["model.teacher"]).rename(columns={"mean": "I"})
    acc = cell_means(rows, ACC, ["model.teacher"]).rename(columns={"mean": "acc"})
    return info[["model.teacher", "I"]].merge(acc[["model.teacher", "acc"]], on="model.teacher")


def _c18(df: pd.DataFrame) -> Verdict:
    t = _teachers(df)
    rho = spearman(t["I"], t["acc"])
    ev = (
        "; ".join(
            f"{r['model.teacher']}: I = {r['I']:.3f}, accuracy {num(r['acc'])}%"
            for _, r in t.iterrows()
        )
        + f"; Spearman ρ(I, accuracy) = {num(rho, 2)}"
    )
    pos, neg = t[t["I"] > 0], t[t["I"] <= 0]
    if not neg.empty and not pos.empty and neg["acc"].max() >= pos["acc"].max() + 3.0:
        return Verdict("contradicted", ev, R18)
    if not neg.empty and not pos.empty and pos["acc"].min() > neg["acc"].max():
        return Verdict("supported", ev, R18)
    return Verdict("inconclusive", ev, R18)


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
        lambda df: len(_teachers(df)) >= 2,
        _c18,
    ),
]
