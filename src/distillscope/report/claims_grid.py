"""Scorecard rules on the main grid and the LR sweep: docs/method.md §9 claims 1–5 and 9.

Rollout policy, KL direction and learning rate against accuracy, coverage, forgetting and
update sparsity. Margins are named constants in percentage points (pp) of the stored
fractions; each rule's prose is rendered from them. ``claimkit`` says what "beyond its margin"
and "within" mean (one-sided t-intervals at ALPHA, TOST).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from distillscope.report.aggregate import percent_scale
from distillscope.report.claimkit import (
    LEARNED_PP,
    LR_SWEEP,
    MAIN,
    ClaimRule,
    Scoring,
    Verdict,
    both_kls,
    both_rollouts,
    decide,
    effect_verdict,
    has,
    n_values,
    no_effect_verdict,
)
from distillscope.report.matching import (
    FORWARD_VS_REVERSE,
    ON_VS_OFF,
    Contrast,
    cell_key,
    describe_pairs,
    match_columns,
    match_keys,
    paired,
)
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    interval,
    num,
    pooled_pair,
    pooled_variance,
    pp,
    trend,
    with_variance,
    within,
)

ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY_FP32 = "eval/sparsity_fp32_tau1e-06"
SPARSITY = "eval/sparsity_bf16_tau1e-06"  # the published view (docs/method.md §10 "Sparsity")
CI = f"one-sided {1 - ALPHA:.0%} t-interval"


def lr_ends(m: pd.DataFrame) -> tuple[float, float]:
    """The smallest and the largest learning rate of ``m``."""
    lrs = sorted(m["optim.lr"].dropna().unique())
    return float(lrs[0]), float(lrs[-1])


# 1 ------------------------------------------------------------------------------------------
CLAIM_01_MARGIN_PP = 10.0  # a rollout gain smaller than this is "no gain"
CLAIM_01_RULE = (
    "Δ = best OnPD cell − best OffPD cell (highest mean accuracy over the matched KL×LR cells, "
    "as the claim compares them), its uncertainty from the seed variance pooled over all those "
    "cells. Supported: the students learned (≥ "
    f"{LEARNED_PP:g} pp over the untrained student) and Δ is within ±{CLAIM_01_MARGIN_PP:g} pp "
    f"(TOST, {CI}s). Contradicted: |Δ| > {CLAIM_01_MARGIN_PP:g} pp beyond its {CI} (α/2 per "
    "side). Else inconclusive."
)


def claim_01_applicable(s: Scoring) -> bool:
    """Claim 1 is testable: the main grid has matched OnPD and OffPD accuracy cells."""
    return both_rollouts(s.grid(MAIN)) and bool(s.pairs(MAIN, ACC, ON_VS_OFF))


def claim_01_no_rollout_gain(s: Scoring) -> Verdict:
    """Claim 1's verdict (``CLAIM_01_RULE``) on the main grid."""
    pairs = s.pairs(MAIN, ACC, ON_VS_OFF)
    on, off = max(pairs, key=lambda x: x.a), max(pairs, key=lambda x: x.b)
    p = Pair("best cells", on.a, on.a_sem, off.b, off.b_sem, on.a_dof, off.b_dof)
    shared = pooled_variance(pairs)  # the seed noise of every main-grid cell, not just two
    if shared is not None:
        p = with_variance(p, *shared, on.a_dof + 1, off.b_dof + 1)
    ev = (
        f"best OnPD cell {num(p.a)}% ({on.key}) vs best OffPD cell {num(p.b)}% ({off.key}): "
        f"Δ {pp(p.diff)} pp {interval(p)}. {describe_pairs(pairs)}"
    )
    return no_effect_verdict(s, MAIN, [p], CLAIM_01_MARGIN_PP, CLAIM_01_RULE, ev)


# 2 ------------------------------------------------------------------------------------------
CLAIM_02_MARGIN_PP = 5.0  # by which forward KL must beat reverse KL
CLAIM_02_RULE = (
    f"Δ_KL = acc(forward KL) − acc(reverse KL), pooled over matched rollout×LR cells. "
    f"Supported: Δ_KL > {CLAIM_02_MARGIN_PP:g} pp beyond its {CI}. Contradicted: Δ_KL < 0 "
    f"beyond its {CI} (reverse KL better). Else inconclusive."
)


def claim_02_applicable(s: Scoring) -> bool:
    """Claim 2 is testable: the main grid has matched forward and reverse KL accuracy cells."""
    return both_kls(s.grid(MAIN)) and bool(s.pairs(MAIN, ACC, FORWARD_VS_REVERSE))


def claim_02_kl_direction(s: Scoring) -> Verdict:
    """Claim 2's verdict (``CLAIM_02_RULE``) on the main grid."""
    pairs = s.pairs(MAIN, ACC, FORWARD_VS_REVERSE)
    p = pooled_pair(pairs, "forward vs reverse")
    ro = (
        pooled_pair(s.pairs(MAIN, ACC, ON_VS_OFF), "rollout")
        if both_rollouts(s.grid(MAIN))
        else None
    )
    ev = (
        f"pooled Δ_KL {pp(p.diff)} pp {interval(p)} over {len(pairs)} matched cells"
        + (f"; rollout Δ {pp(ro.diff)} pp for comparison" if ro is not None else "")
        + f". {describe_pairs(pairs)}"
    )
    return effect_verdict(p, CLAIM_02_MARGIN_PP, CLAIM_02_RULE, ev)


# 3 ------------------------------------------------------------------------------------------
CLAIM_03_MARGIN_PP = 5.0  # more forgetting at the high LR
CLAIM_03_LOW_LR_MARGIN_PP = 4.0  # the low LR's skill change must be within ± this (published ≤ 1.3)
CLAIM_03_RULE = (
    f"low/high LR = smallest/largest LR of the main grid; forgetting_pp = skills after − before. "
    f"Δ = forgetting_pp(low) − forgetting_pp(high), pooled over matched rollout×KL cells. "
    f"Supported: Δ > {CLAIM_03_MARGIN_PP:g} pp beyond its {CI} and the low LR's pooled change "
    f"within ±{CLAIM_03_LOW_LR_MARGIN_PP:g} pp (TOST). Contradicted: Δ < 0 beyond its {CI} (the "
    "low LR forgets more). Else inconclusive."
)


def two_lrs_applicable(metric: str) -> Callable[[Scoring], bool]:
    """Whether the main grid ran at ≥ 2 learning rates and measured ``metric``."""

    def check(s: Scoring) -> bool:
        m = s.grid(MAIN)
        return has(m, metric) and n_values(m, "optim.lr") >= 2

    return check


def low_vs_high_lr(s: Scoring, metric: str) -> list[Pair]:
    """Matched main-grid cells of ``metric`` at the smallest versus the largest LR."""
    m = s.grid(MAIN)
    low, high = lr_ends(m)
    return paired(m[m["optim.lr"].isin([low, high])], metric, Contrast("optim.lr", low, high))


def claim_03_lr_forgetting(s: Scoring) -> Verdict:
    """Claim 3's verdict (``CLAIM_03_RULE``) on the main grid."""
    pairs = low_vs_high_lr(s, FORGET)  # diff = f(low) − f(high) = extra pp lost at the high LR
    if not pairs:
        text = "no rollout×KL cell ran at both learning rates"
        return Verdict("inconclusive", text, CLAIM_03_RULE)
    p = pooled_pair(pairs, "low vs high")
    low = Pair("low LR", p.a, p.a_sem, 0.0, 0.0, p.a_dof, math.inf)
    ev = (
        f"pooled extra forgetting at the high LR {pp(p.diff)} pp {interval(p)}; low-LR change "
        f"{pp(low.diff)} pp {interval(low)}. Low vs high: {describe_pairs(pairs)}"
    )
    supported = beyond(p, CLAIM_03_MARGIN_PP) == 1 and within(low, CLAIM_03_LOW_LR_MARGIN_PP)
    return decide(CLAIM_03_RULE, ev, beyond(p, 0.0) == -1, supported)


# 4 ------------------------------------------------------------------------------------------
CLAIM_04_MARGIN_PP = 10.0  # sparser at the low LR
CLAIM_04_RULE = (
    f"Sparsity in the bf16 view (τ = 1e-6; both checkpoints cast to bf16). Δ_LR = sparsity(low "
    f"LR) − sparsity(high LR) and Δ_ro = sparsity(OffPD) − sparsity(OnPD), each pooled over "
    f"matched cells. Supported: Δ_LR > {CLAIM_04_MARGIN_PP:g} pp beyond its {CI} and Δ_ro not "
    f"< 0 beyond its {CI} (part skipped when one rollout is missing). Contradicted: Δ_LR < 0 or "
    f"Δ_ro < 0 beyond {1 - ALPHA / 2:.1%} intervals. Else inconclusive."
)


def claim_04_lr_sparsity(s: Scoring) -> Verdict:
    """Claim 4's verdict (``CLAIM_04_RULE``) on the main grid."""
    lr_pairs = low_vs_high_lr(s, SPARSITY)
    if not lr_pairs:
        text = "no rollout×KL cell ran at both learning rates"
        return Verdict("inconclusive", text, CLAIM_04_RULE)
    p = pooled_pair(lr_pairs, "low vs high")
    m = s.grid(MAIN)
    ro = s.pairs(MAIN, SPARSITY, ON_VS_OFF.reversed()) if both_rollouts(m) else []
    q = pooled_pair(ro, "OffPD vs OnPD") if ro else None
    ev = f"bf16 view: low vs high LR pooled {pp(p.diff)} pp {interval(p)} "
    ev += f"[{describe_pairs(lr_pairs)}]."
    if has(m, SPARSITY_FP32):
        fp = pooled_pair(low_vs_high_lr(s, SPARSITY_FP32), "fp32")
        ev += f" fp32 view (not judged): {pp(fp.diff)} pp."
    ev += (
        f" OffPD vs OnPD pooled {pp(q.diff)} pp {interval(q)}."
        if q is not None
        else " OffPD-vs-OnPD part not tested (needs both rollouts)."
    )
    off_less = q is not None and beyond(q, 0.0, ALPHA / 2) == -1
    contradicted = beyond(p, 0.0, ALPHA / 2) == -1 or off_less
    supported = beyond(p, CLAIM_04_MARGIN_PP) == 1 and not (q is not None and beyond(q, 0.0) == -1)
    return decide(CLAIM_04_RULE, ev, contradicted, supported)


# 5 ------------------------------------------------------------------------------------------
CLAIM_05_SPARSITY_DROP_PP = 5.0  # the fitted sparsity falls over the swept LR range
CLAIM_05_FORGETTING_DROP_PP = 3.0  # the fitted forgetting_pp falls over the swept LR range
CLAIM_05_RULE = (
    f"Per sweep series (rollout×KL), a least-squares line of the metric against log10 LR over "
    f"the runs; change = slope × log10 range, t-interval from the residuals. Sparsity is the "
    f"bf16 view. Supported: in every series sparsity falls by > {CLAIM_05_SPARSITY_DROP_PP:g} pp "
    f"and forgetting_pp falls by > {CLAIM_05_FORGETTING_DROP_PP:g} pp beyond {CI}s, and OffPD "
    f"does not forget more than OnPD beyond its {CI}. Contradicted: some series' change has the "
    f"opposite sign beyond its interval (α split over the series). Else inconclusive."
)


def claim_05_applicable(s: Scoring) -> bool:
    """Claim 5 is testable: an LR sweep over ≥ 3 learning rates with forgetting or sparsity."""
    sweep = s.grid(LR_SWEEP)
    return n_values(sweep, "optim.lr") >= 3 and (has(sweep, FORGET) or has(sweep, SPARSITY))


def lr_trends(sweep: pd.DataFrame) -> list[tuple[Pair, float]]:
    """(fitted change over the LR range, the margin it must fall by) of every sweep series with
    ≥ 3 learning rates, sparsity's series first, then forgetting's."""
    match = match_columns(sweep, "optim.lr")
    varying = [c for c in match if sweep[c].map(str).nunique() > 1]
    series = list(sweep.groupby(match_keys(sweep, match), sort=True)) if not sweep.empty else []
    out = []
    for metric, name, margin in (
        (SPARSITY, "sparsity", CLAIM_05_SPARSITY_DROP_PP),
        (FORGET, "forgetting_pp", CLAIM_05_FORGETTING_DROP_PP),
    ):
        if not has(sweep, metric):
            continue
        for _, runs in series:
            if runs["optim.lr"].nunique() < 3:
                continue
            key = cell_key(runs.iloc[0], varying)
            x = np.log10(runs["optim.lr"].astype(float).to_numpy())
            y = pd.to_numeric(runs[metric], errors="coerce").to_numpy(dtype=float)
            out.append((trend(x, y * percent_scale(metric), f"{name} [{key}]"), margin))
    return out


def claim_05_lr_sweep(s: Scoring) -> Verdict:
    """Claim 5's verdict (``CLAIM_05_RULE``) on the LR sweep."""
    sweep = s.grid(LR_SWEEP)
    trends = lr_trends(sweep)
    parts = [f"{t.key} change over the LR range {pp(t.a)} pp {interval(t)}" for t, _ in trends]
    q = None
    if both_rollouts(sweep) and has(sweep, FORGET):
        q = pooled_pair(s.pairs(LR_SWEEP, FORGET, ON_VS_OFF.reversed()), "OffPD vs OnPD")
        parts.append(f"OffPD − OnPD forgetting_pp {pp(q.diff)} pp {interval(q)}")
    ev = "; ".join(parts) if parts else "no series with ≥ 3 learning rates"
    k = max(len(trends), 1)
    contradicted = any(beyond(t, 0.0, ALPHA / k) == 1 for t, _ in trends)
    falls = bool(trends) and all(beyond(t, m) == -1 for t, m in trends)
    supported = falls and not (q is not None and beyond(q, 0.0) == -1)
    return decide(CLAIM_05_RULE, ev, contradicted, supported)


# 9 ------------------------------------------------------------------------------------------
CLAIM_09_MARGIN_PP = 3.0  # more coverage gain under forward KL
CLAIM_09_RULE = (
    f"Per run, coverage gain g = pass@K − pass@1 (K = 10, else the largest k measured). Δg = "
    f"g(forward) − g(reverse), pooled over matched rollout×LR cells. Supported: Δg > "
    f"{CLAIM_09_MARGIN_PP:g} pp beyond its {CI}. Contradicted: Δg < 0 beyond its {CI}. Else "
    "inconclusive."
)


def coverage_k(df: pd.DataFrame) -> int | None:
    """K of the coverage gain: 10 when pass@10 was measured, else the largest k > 1 (None
    without pass@1 or any k > 1)."""
    ks = sorted(
        int(c.split("@")[1])
        for c in df.columns
        if c.startswith("eval/pass@") and c.split("@")[1].isdigit() and has(df, c)
    )
    big = [k for k in ks if k > 1]
    return (10 if 10 in big else big[-1]) if big and 1 in ks else None


def claim_09_applicable(s: Scoring) -> bool:
    """Claim 9 is testable: both KL directions in the main grid with pass@1 and a pass@K."""
    m = s.grid(MAIN)
    return both_kls(m) and coverage_k(m) is not None


def claim_09_coverage(s: Scoring) -> Verdict:
    """Claim 9's verdict (``CLAIM_09_RULE``) on the main grid."""
    m = s.grid(MAIN)
    k = coverage_k(m)
    gain = f"eval/pass@{k}_gain"  # a fraction: shown in pp
    m = m.assign(**{gain: m[f"eval/pass@{k}"] - m["eval/pass@1"]})
    pairs = paired(m, gain, FORWARD_VS_REVERSE)
    one = s.pairs(MAIN, "eval/pass@1", FORWARD_VS_REVERSE)
    p = pooled_pair(pairs, "Δg")
    ev = (
        f"pooled Δg {pp(p.diff)} pp {interval(p)} over {len(pairs)} cells. pass@1 forward vs "
        f"reverse: {describe_pairs(one)}"
    )
    return effect_verdict(p, CLAIM_09_MARGIN_PP, CLAIM_09_RULE, ev)


_MAIN = "main grid: OnPD and OffPD rollouts"
RULES_GRID = [
    ClaimRule(
        1,
        "Rollout policy gives no consistent in-distribution gain (best mean 72% OnPD vs "
        "73% OffPD).",
        f"{_MAIN}, eval/accuracy",
        claim_01_applicable,
        claim_01_no_rollout_gain,
    ),
    ClaimRule(
        2,
        "KL direction matters more: forward KL 71–73% in every rollout × LR cell; "
        "reverse KL 35–72%.",
        "main grid: forward and reverse KL, eval/accuracy",
        claim_02_applicable,
        claim_02_kl_direction,
    ),
    ClaimRule(
        3,
        "LR governs forgetting: ≤ 1.3 pp change at the low LR, 11.2–14.0 pp drop at the high LR.",
        "main grid at two learning rates, eval/forgetting_pp",
        two_lrs_applicable(FORGET),
        claim_03_lr_forgetting,
    ),
    ClaimRule(
        4,
        "LR governs sparsity: 85–90% (low LR) vs 52–60% (high LR); OffPD at least as "
        "sparse as OnPD in every matched pair.",
        f"main grid at two learning rates, {SPARSITY}",
        two_lrs_applicable(SPARSITY),
        claim_04_lr_sparsity,
    ),
    ClaimRule(
        5,
        "Sparsity falls and forgetting rises monotonically with LR; OffPD forgets a little less.",
        "an LR sweep with ≥ 3 learning rates and forgetting or sparsity",
        claim_05_applicable,
        claim_05_lr_sweep,
    ),
    ClaimRule(
        9,
        "Forward KL gives more coverage (higher pass@10 at similar pass@1).",
        "main grid with forward and reverse KL, eval/pass@1 and eval/pass@10",
        claim_09_applicable,
        claim_09_coverage,
    ),
]
