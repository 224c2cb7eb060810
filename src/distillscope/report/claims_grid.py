"""Scorecard rules on the main grid and the LR sweep: docs/method.md §9 claims 1–5 and 9.

Rollout policy, KL direction and learning rate against accuracy, coverage, forgetting and
update sparsity. Margins are named constants in percentage points (pp) of the stored
fractions; each rule's prose is rendered from them. ``claimkit`` says what "beyond its margin"
and "within" mean (one-sided t-intervals at ALPHA, TOST).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from distillscope.report.aggregate import percent_scale, with_labels
from distillscope.report.claimkit import (
    LEARNED_PP,
    ClaimRule,
    Verdict,
    both_kls,
    both_rollouts,
    cell_key,
    describe_pairs,
    experiment_rows,
    finished,
    has,
    learned,
    main_grid,
    match_columns,
    match_keys,
    memo,
    n_values,
    paired,
    plain_rows,
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
    with_variance,
    within,
)

ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY_FP32 = "eval/sparsity_fp32_tau1e-06"
SPARSITY = "eval/sparsity_bf16_tau1e-06"  # the published view (docs/method.md §10 "Sparsity")
CI = f"one-sided {1 - ALPHA:.0%} t-interval"


def _lr_ends(m: pd.DataFrame) -> tuple[float, float]:
    lrs = sorted(m["optim.lr"].dropna().unique())
    return float(lrs[0]), float(lrs[-1])


# 1 ------------------------------------------------------------------------------------------
C1_MARGIN = 10.0  # pp: a rollout gain smaller than this is "no gain"
R1 = (
    "Δ = best OnPD cell − best OffPD cell (highest mean accuracy over the matched KL×LR cells, "
    "as the claim compares them), its uncertainty from the seed variance pooled over all those "
    "cells. Supported: the students learned (≥ "
    f"{LEARNED_PP:g} pp over the untrained student) and Δ is within ±{C1_MARGIN:g} pp (TOST, "
    f"{CI}s). Contradicted: |Δ| > {C1_MARGIN:g} pp beyond its {CI} (α/2 per side). Else "
    "inconclusive."
)


def _c1_applicable(df: pd.DataFrame) -> bool:
    m = main_grid(df)
    return both_rollouts(m) and bool(paired(m, ACC, "_rollout", "OnPD", "OffPD"))


def no_effect(
    df: pd.DataFrame, rows: pd.DataFrame, pair: Pair, margin: float, rule: str, ev: str
) -> Verdict:
    """The verdict of a no-effect claim on one pooled contrast (equivalence + power)."""
    if beyond(pair, margin, ALPHA / 2) != 0:
        return Verdict("contradicted", ev, rule)
    power, text = learned(df, rows)
    if not power:
        return Verdict("inconclusive", f"{text}. {ev}", rule)
    if within(pair, margin):
        return Verdict("supported", f"{ev}; {text}", rule)
    return Verdict("inconclusive", f"{ev}; {text}", rule)


def _c1(df: pd.DataFrame) -> Verdict:
    m = main_grid(df)
    pairs = paired(m, ACC, "_rollout", "OnPD", "OffPD")
    on, off = max(pairs, key=lambda x: x.a), max(pairs, key=lambda x: x.b)
    p = Pair("best cells", on.a, on.a_sem, off.b, off.b_sem, on.a_dof, off.b_dof)
    shared = pooled_variance(pairs)  # the seed noise of every main-grid cell, not just two
    if shared is not None:
        p = with_variance(p, *shared, on.a_dof + 1, off.b_dof + 1)
    ev = (
        f"best OnPD cell {num(p.a)}% ({on.key}) vs best OffPD cell {num(p.b)}% ({off.key}): "
        f"Δ {pp(p.diff)} pp {interval(p)}. {describe_pairs(pairs)}"
    )
    return no_effect(df, m, p, C1_MARGIN, R1, ev)


# 2 ------------------------------------------------------------------------------------------
C2_MARGIN = 5.0  # pp by which forward KL must beat reverse KL
R2 = (
    f"Δ_KL = acc(forward KL) − acc(reverse KL), pooled over matched rollout×LR cells. "
    f"Supported: Δ_KL > {C2_MARGIN:g} pp beyond its {CI}. Contradicted: Δ_KL < 0 beyond its "
    f"{CI} (reverse KL better). Else inconclusive."
)


def _c2_applicable(df: pd.DataFrame) -> bool:
    m = main_grid(df)
    return both_kls(m) and bool(paired(m, ACC, "objective.kind", "forward_kl", "reverse_kl"))


def _c2(df: pd.DataFrame) -> Verdict:
    m = main_grid(df)
    pairs = paired(m, ACC, "objective.kind", "forward_kl", "reverse_kl")
    p = pooled_pair(pairs, "forward vs reverse")
    ro = (
        pooled_pair(paired(m, ACC, "_rollout", "OnPD", "OffPD"), "rollout")
        if both_rollouts(m)
        else None
    )
    ev = (
        f"pooled Δ_KL {pp(p.diff)} pp {interval(p)} over {len(pairs)} matched cells"
        + (f"; rollout Δ {pp(ro.diff)} pp for comparison" if ro is not None else "")
        + f". {describe_pairs(pairs)}"
    )
    if beyond(p, 0.0) == -1:
        return Verdict("contradicted", ev, R2)
    if beyond(p, C2_MARGIN) == 1:
        return Verdict("supported", ev, R2)
    return Verdict("inconclusive", ev, R2)


# 3 ------------------------------------------------------------------------------------------
C3_MARGIN = 5.0  # pp more forgetting at the high LR
C3_LOW = 4.0  # pp: the low LR's skill change must be within ± this (published ≤ 1.3 pp)
R3 = (
    f"low/high LR = smallest/largest LR of the main grid; forgetting_pp = skills after − before. "
    f"Δ = forgetting_pp(low) − forgetting_pp(high), pooled over matched rollout×KL cells. "
    f"Supported: Δ > {C3_MARGIN:g} pp beyond its {CI} and the low LR's pooled change within "
    f"±{C3_LOW:g} pp (TOST). Contradicted: Δ < 0 beyond its {CI} (the low LR forgets more). "
    "Else inconclusive."
)


def _two_lrs(df: pd.DataFrame, metric: str) -> bool:
    m = main_grid(df)
    return has(m, metric) and n_values(m, "optim.lr") >= 2


def _lr_pairs(m: pd.DataFrame, metric: str) -> list[Pair]:
    low, high = _lr_ends(m)
    return paired(m[m["optim.lr"].isin([low, high])], metric, "optim.lr", low, high)


def _c3(df: pd.DataFrame) -> Verdict:
    m = main_grid(df)
    pairs = _lr_pairs(m, FORGET)  # diff = f(low) − f(high) = extra pp lost at the high LR
    if not pairs:
        return Verdict("inconclusive", "no rollout×KL cell ran at both learning rates", R3)
    p = pooled_pair(pairs, "low vs high")
    low = Pair("low LR", p.a, p.a_sem, 0.0, 0.0, p.a_dof, math.inf)
    ev = (
        f"pooled extra forgetting at the high LR {pp(p.diff)} pp {interval(p)}; low-LR change "
        f"{pp(low.diff)} pp {interval(low)}. Low vs high: {describe_pairs(pairs)}"
    )
    if beyond(p, 0.0) == -1:
        return Verdict("contradicted", ev, R3)
    if beyond(p, C3_MARGIN) == 1 and within(low, C3_LOW):
        return Verdict("supported", ev, R3)
    return Verdict("inconclusive", ev, R3)


# 4 ------------------------------------------------------------------------------------------
C4_MARGIN = 10.0  # pp sparser at the low LR
R4 = (
    f"Sparsity in the bf16 view (τ = 1e-6; both checkpoints cast to bf16). Δ_LR = sparsity(low "
    f"LR) − sparsity(high LR) and Δ_ro = sparsity(OffPD) − sparsity(OnPD), each pooled over "
    f"matched cells. Supported: Δ_LR > {C4_MARGIN:g} pp beyond its {CI} and Δ_ro not < 0 beyond "
    f"its {CI} (part skipped when one rollout is missing). Contradicted: Δ_LR < 0 or Δ_ro < 0 "
    f"beyond {1 - ALPHA / 2:.1%} intervals. Else inconclusive."
)


def _c4(df: pd.DataFrame) -> Verdict:
    m = main_grid(df)
    lr_pairs = _lr_pairs(m, SPARSITY)
    if not lr_pairs:
        return Verdict("inconclusive", "no rollout×KL cell ran at both learning rates", R4)
    p = pooled_pair(lr_pairs, "low vs high")
    ro = paired(m, SPARSITY, "_rollout", "OffPD", "OnPD") if both_rollouts(m) else []
    q = pooled_pair(ro, "OffPD vs OnPD") if ro else None
    ev = f"bf16 view: low vs high LR pooled {pp(p.diff)} pp {interval(p)} "
    ev += f"[{describe_pairs(lr_pairs)}]."
    if has(m, SPARSITY_FP32):
        fp = pooled_pair(_lr_pairs(m, SPARSITY_FP32), "fp32")
        ev += f" fp32 view (not judged): {pp(fp.diff)} pp."
    ev += (
        f" OffPD vs OnPD pooled {pp(q.diff)} pp {interval(q)}."
        if q is not None
        else " OffPD-vs-OnPD part not tested (needs both rollouts)."
    )
    off_less = q is not None and beyond(q, 0.0, ALPHA / 2) == -1
    if beyond(p, 0.0, ALPHA / 2) == -1 or off_less:
        return Verdict("contradicted", ev, R4)
    if beyond(p, C4_MARGIN) == 1 and not (q is not None and beyond(q, 0.0) == -1):
        return Verdict("supported", ev, R4)
    return Verdict("inconclusive", ev, R4)


# 5 ------------------------------------------------------------------------------------------
C5_SPARSITY = 5.0  # pp the fitted sparsity falls over the swept LR range
C5_FORGET = 3.0  # pp the fitted forgetting_pp falls over the swept LR range
R5 = (
    f"Per sweep series (rollout×KL), a least-squares line of the metric against log10 LR over "
    f"the runs; change = slope × log10 range, t-interval from the residuals. Sparsity is the "
    f"bf16 view. Supported: in every series sparsity falls by > {C5_SPARSITY:g} pp and "
    f"forgetting_pp falls by > {C5_FORGET:g} pp beyond {CI}s, and OffPD does not forget more "
    f"than OnPD beyond its {CI}. Contradicted: some series' change has the opposite sign beyond "
    f"its interval (α split over the series). Else inconclusive."
)


@memo
def _sweep(df: pd.DataFrame) -> pd.DataFrame:
    rows = plain_rows(experiment_rows(finished(df), "lr_sweep"))
    return with_labels(rows) if "optim.lr" in rows.columns else rows.iloc[0:0]


def _c5_applicable(df: pd.DataFrame) -> bool:
    s = _sweep(df)
    return n_values(s, "optim.lr") >= 3 and (has(s, FORGET) or has(s, SPARSITY))


def trend(x: np.ndarray, y: np.ndarray, key: str) -> Pair:
    """Fitted change of y over the range of x (least squares) as a pair: a = change, b = 0."""
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.ptp(x) == 0:
        return Pair(key, math.nan, math.nan, 0.0, 0.0)
    xc = x - x.mean()
    slope = float((xc * (y - y.mean())).sum() / (xc * xc).sum())
    resid = y - y.mean() - slope * xc
    dof = len(x) - 2
    se = math.sqrt(float((resid * resid).sum()) / dof / float((xc * xc).sum())) if dof else math.nan
    span = float(np.ptp(x))
    return Pair(key, slope * span, se * span, 0.0, 0.0, float(dof), math.inf)


def _c5(df: pd.DataFrame) -> Verdict:
    s = _sweep(df)
    parts, trends = [], []
    match = match_columns(s, "optim.lr")
    varying = [c for c in match if s[c].map(str).nunique() > 1]
    series = list(s.groupby(match_keys(s, match), sort=True)) if not s.empty else []
    for metric, name, margin in (
        (SPARSITY, "sparsity", C5_SPARSITY),
        (FORGET, "forgetting_pp", C5_FORGET),
    ):
        if not has(s, metric):
            continue
        for _, runs in series:
            if runs["optim.lr"].nunique() < 3:
                continue
            key = cell_key(runs.iloc[0], varying)
            x = np.log10(runs["optim.lr"].astype(float).to_numpy())
            y = pd.to_numeric(runs[metric], errors="coerce").to_numpy(dtype=float)
            y = y * percent_scale(metric)
            t = trend(x, y, f"{name} [{key}]")
            trends.append((t, margin))
            parts.append(f"{name} [{key}] change over the LR range {pp(t.a)} pp {interval(t)}")
    q = None
    if both_rollouts(s) and has(s, FORGET):
        q = pooled_pair(paired(s, FORGET, "_rollout", "OffPD", "OnPD"), "OffPD vs OnPD")
        parts.append(f"OffPD − OnPD forgetting_pp {pp(q.diff)} pp {interval(q)}")
    ev = "; ".join(parts) if parts else "no series with ≥ 3 learning rates"
    k = max(len(trends), 1)
    if any(beyond(t, 0.0, ALPHA / k) == 1 for t, _ in trends):
        return Verdict("contradicted", ev, R5)
    falls = trends and all(beyond(t, m) == -1 for t, m in trends)
    if falls and not (q is not None and beyond(q, 0.0) == -1):
        return Verdict("supported", ev, R5)
    return Verdict("inconclusive", ev, R5)


# 9 ------------------------------------------------------------------------------------------
C9_MARGIN = 3.0  # pp more coverage gain under forward KL
R9 = (
    f"Per run, coverage gain g = pass@K − pass@1 (K = 10, else the largest k measured). Δg = "
    f"g(forward) − g(reverse), pooled over matched rollout×LR cells. Supported: Δg > "
    f"{C9_MARGIN:g} pp beyond its {CI}. Contradicted: Δg < 0 beyond its {CI}. Else inconclusive."
)


def _k_max(df: pd.DataFrame) -> int | None:
    ks = sorted(
        int(c.split("@")[1])
        for c in df.columns
        if c.startswith("eval/pass@") and c.split("@")[1].isdigit() and has(df, c)
    )
    big = [k for k in ks if k > 1]
    return (10 if 10 in big else big[-1]) if big and 1 in ks else None


def _c9_applicable(df: pd.DataFrame) -> bool:
    m = main_grid(df)
    return both_kls(m) and _k_max(m) is not None


def _c9(df: pd.DataFrame) -> Verdict:
    m = main_grid(df)
    k = _k_max(m)
    gain = f"eval/pass@{k}_gain"  # a fraction: shown in pp
    m = m.assign(**{gain: m[f"eval/pass@{k}"] - m["eval/pass@1"]})
    pairs = paired(m, gain, "objective.kind", "forward_kl", "reverse_kl")
    one = paired(m, "eval/pass@1", "objective.kind", "forward_kl", "reverse_kl")
    p = pooled_pair(pairs, "Δg")
    ev = (
        f"pooled Δg {pp(p.diff)} pp {interval(p)} over {len(pairs)} cells. pass@1 forward vs "
        f"reverse: {describe_pairs(one)}"
    )
    if beyond(p, 0.0) == -1:
        return Verdict("contradicted", ev, R9)
    if beyond(p, C9_MARGIN) == 1:
        return Verdict("supported", ev, R9)
    return Verdict("inconclusive", ev, R9)


_MAIN = "main grid: OnPD and OffPD rollouts"
RULES_GRID = [
    ClaimRule(
        1,
        "Rollout policy gives no consistent in-distribution gain (best mean 72% OnPD vs "
        "73% OffPD).",
        f"{_MAIN}, eval/accuracy",
        _c1_applicable,
        _c1,
    ),
    ClaimRule(
        2,
        "KL direction matters more: forward KL 71–73% in every rollout × LR cell; "
        "reverse KL 35–72%.",
        "main grid: forward and reverse KL, eval/accuracy",
        _c2_applicable,
        _c2,
    ),
    ClaimRule(
        3,
        "LR governs forgetting: ≤ 1.3 pp change at the low LR, 11.2–14.0 pp drop at the high LR.",
        "main grid at two learning rates, eval/forgetting_pp",
        lambda df: _two_lrs(df, FORGET),
        _c3,
    ),
    ClaimRule(
        4,
        "LR governs sparsity: 85–90% (low LR) vs 52–60% (high LR); OffPD at least as "
        "sparse as OnPD in every matched pair.",
        f"main grid at two learning rates, {SPARSITY}",
        lambda df: _two_lrs(df, SPARSITY),
        _c4,
    ),
    ClaimRule(
        5,
        "Sparsity falls and forgetting rises monotonically with LR; OffPD forgets a little less.",
        "an LR sweep with ≥ 3 learning rates and forgetting or sparsity",
        _c5_applicable,
        _c5,
    ),
    ClaimRule(
        9,
        "Forward KL gives more coverage (higher pass@10 at similar pass@1).",
        "main grid with forward and reverse KL, eval/pass@1 and eval/pass@10",
        _c9_applicable,
        _c9,
    ),
]
