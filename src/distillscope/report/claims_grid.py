"""Scorecard rules on the main grid and the LR sweep: docs/method.md §9 claims 1–5 and 9.

Rollout policy, KL direction and learning rate against accuracy, coverage, forgetting and
update sparsity. Thresholds are in percentage points (pp) of the stored fractions; ``claimkit``
says what makes a difference count (minimum effect and 2 × combined SEM).
"""

from __future__ import annotations

import math

import pandas as pd

from distillscope.report.aggregate import done, with_labels
from distillscope.report.claimkit import (
    ClaimRule,
    Pair,
    Verdict,
    both_kls,
    both_rollouts,
    describe_pairs,
    experiment_rows,
    has,
    main_grid,
    mean_diff,
    n_values,
    num,
    paired,
    plain_rows,
    pp,
    series_over,
    sign,
)

ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY = "eval/sparsity_fp32_tau1e-06"
SPARSITY_BF16 = "eval/sparsity_bf16_tau1e-06"


def _lr_ends(m: pd.DataFrame) -> tuple[float, float]:
    lrs = sorted(m["optim.lr"].dropna().unique())
    return float(lrs[0]), float(lrs[-1])


# 1 ------------------------------------------------------------------------------------------
R1 = (
    "Δ = acc(OnPD) − acc(OffPD) per matched KL×LR cell; a Δ counts when |Δ| ≥ 5 pp and > "
    "2×SEM. Contradicted: one policy better by a counting Δ in every cell (a consistent gain). "
    "Supported: the best OnPD cell and the best OffPD cell differ by no counting margin, and at "
    "most half of the cells favour the same policy by a counting Δ. Else inconclusive."
)


def _c1_applicable(df: pd.DataFrame) -> bool:
    m = main_grid(df)
    return both_rollouts(m) and bool(paired(m, ACC, "_rollout", "OnPD", "OffPD"))


def _c1(df: pd.DataFrame) -> Verdict:
    m = main_grid(df)
    pairs = paired(m, ACC, "_rollout", "OnPD", "OffPD")
    signs = [sign(p, 5.0) for p in pairs]
    on = max(pairs, key=lambda p: p.a)
    off = max(pairs, key=lambda p: p.b)
    best = Pair("best cells", on.a, on.a_sem, off.b, off.b_sem)
    ev = (
        f"best cell OnPD {num(best.a)}% ({on.key}) vs OffPD {num(best.b)}% ({off.key}); "
        f"mean Δ over {len(pairs)} matched cells {pp(mean_diff(pairs))} pp, counting Δ "
        f"favour OnPD in {signs.count(1)}, OffPD in {signs.count(-1)}. {describe_pairs(pairs)}"
    )
    if all(s == 1 for s in signs) or all(s == -1 for s in signs):
        return Verdict("contradicted", ev, R1)
    lopsided = max(signs.count(1), signs.count(-1)) * 2 > len(signs)
    if sign(best, 5.0) == 0 and not lopsided:
        return Verdict("supported", ev, R1)
    return Verdict("inconclusive", ev, R1)


# 2 ------------------------------------------------------------------------------------------
R2 = (
    "Δ_KL = acc(forward) − acc(reverse) per matched rollout×LR cell (counts at ≥ 5 pp and > "
    "2×SEM). Supported: reverse never better by a counting Δ, forward-KL range over cells ≤ 5 "
    "pp, reverse-KL range larger, and mean |Δ_KL| > mean |Δ_rollout| (when both rollouts "
    "exist). Contradicted: reverse better by a counting Δ in ≥ half the cells, or the forward "
    "range exceeds the reverse range by ≥ 5 pp. Else inconclusive."
)


def _c2_applicable(df: pd.DataFrame) -> bool:
    m = main_grid(df)
    return both_kls(m) and bool(paired(m, ACC, "objective.kind", "forward_kl", "reverse_kl"))


def _range(rows: pd.DataFrame) -> float:
    means = rows.groupby([c for c in ("_rollout", "_lr") if c in rows], dropna=False)[ACC].mean()
    return float(means.max() - means.min()) * 100.0 if len(means) else math.nan


def _c2(df: pd.DataFrame) -> Verdict:
    m = main_grid(df)
    pairs = paired(m, ACC, "objective.kind", "forward_kl", "reverse_kl")
    signs = [sign(p, 5.0) for p in pairs]
    range_f = _range(m[m["objective.kind"] == "forward_kl"])
    range_r = _range(m[m["objective.kind"] == "reverse_kl"])
    eff_kl = float(pd.Series([abs(p.diff) for p in pairs]).mean())
    ro = paired(m, ACC, "_rollout", "OnPD", "OffPD") if both_rollouts(m) else []
    eff_ro = float(pd.Series([abs(p.diff) for p in ro]).mean()) if ro else math.nan
    fwd, rev = [p.a for p in pairs], [p.b for p in pairs]
    ev = (
        f"forward KL {num(min(fwd))}–{num(max(fwd))}% (range {num(range_f)} pp), reverse KL "
        f"{num(min(rev))}–{num(max(rev))}% (range {num(range_r)} pp) over {len(pairs)} matched "
        f"cells; mean |Δ_KL| {num(eff_kl)} pp vs mean |Δ_rollout| {num(eff_ro)} pp. "
        f"{describe_pairs(pairs)}"
    )
    if signs.count(-1) * 2 >= len(signs) or range_f >= range_r + 5.0:
        return Verdict("contradicted", ev, R2)
    kl_dominates = math.isnan(eff_ro) or eff_kl > eff_ro
    if -1 not in signs and range_f <= 5.0 and range_r > range_f and kl_dominates:
        return Verdict("supported", ev, R2)
    return Verdict("inconclusive", ev, R2)


# 3 ------------------------------------------------------------------------------------------
R3 = (
    "low/high LR = smallest/largest LR of the main grid. Supported: every low-LR cell changes "
    "the skill score by ≤ 3 pp (|forgetting_pp|) and in every matched rollout×KL cell the high "
    "LR loses ≥ 5 pp more (beyond 2×SEM). Contradicted: in every matched cell the high LR "
    "loses < 2 pp more than the low LR. Else inconclusive."
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
    low_ok = all(abs(p.a) <= 3.0 for p in pairs)
    ev = (
        f"skill change low LR {num(min(p.a for p in pairs))}…{num(max(p.a for p in pairs))} pp,"
        f" high LR {num(min(p.b for p in pairs))}…{num(max(p.b for p in pairs))} pp (after − "
        f"before). Low vs high: {describe_pairs(pairs)}"
    )
    if low_ok and all(sign(p, 5.0) == 1 for p in pairs):
        return Verdict("supported", ev, R3)
    if all(p.diff < 2.0 for p in pairs):
        return Verdict("contradicted", ev, R3)
    return Verdict("inconclusive", ev, R3)


# 4 ------------------------------------------------------------------------------------------
R4 = (
    "Sparsity = fp32, τ = 1e-6. Supported: in every matched rollout×KL cell the low LR is ≥ 10 "
    "pp sparser than the high LR (beyond 2×SEM), and OffPD is nowhere less sparse than OnPD by "
    "a counting margin (≥ 1 pp, > 2×SEM; part skipped when one rollout is missing). "
    "Contradicted: the low LR is < 2 pp sparser in every cell, or OffPD is less sparse by a "
    "counting margin in every matched pair. Else inconclusive."
)


def _c4(df: pd.DataFrame) -> Verdict:
    m = main_grid(df)
    lr_pairs = _lr_pairs(m, SPARSITY)
    if not lr_pairs:
        return Verdict("inconclusive", "no rollout×KL cell ran at both learning rates", R4)
    ro = paired(m, SPARSITY, "_rollout", "OffPD", "OnPD") if both_rollouts(m) else []
    ev = (
        f"sparsity low LR {num(min(p.a for p in lr_pairs))}–{num(max(p.a for p in lr_pairs))}%,"
        f" high LR {num(min(p.b for p in lr_pairs))}–{num(max(p.b for p in lr_pairs))}%. "
        f"Low vs high: {describe_pairs(lr_pairs)}."
    )
    if has(m, SPARSITY_BF16):
        bf = _lr_pairs(m, SPARSITY_BF16)
        ev += f" bf16 view: {describe_pairs(bf)}."
    ev += (
        f" OffPD vs OnPD: {describe_pairs(ro)}."
        if ro
        else " OffPD-vs-OnPD part not tested (needs both rollouts)."
    )
    off_less = [sign(p, 1.0) == -1 for p in ro]
    if all(p.diff < 2.0 for p in lr_pairs) or (ro and all(off_less)):
        return Verdict("contradicted", ev, R4)
    if all(sign(p, 10.0) == 1 for p in lr_pairs) and not any(off_less):
        return Verdict("supported", ev, R4)
    return Verdict("inconclusive", ev, R4)


# 5 ------------------------------------------------------------------------------------------
R5 = (
    "Per sweep series (rollout×KL), cells sorted by LR. Monotone: no step where sparsity rises "
    "or forgetting_pp rises (less forgetting) by ≥ 2 pp beyond 2×SEM. Trend: lowest vs highest "
    "LR, sparsity falls ≥ 5 pp and forgetting_pp falls ≥ 3 pp (beyond 2×SEM). Supported: every "
    "series monotone with the trend, and OffPD forgets at most 1 pp more than OnPD on average "
    "(when both exist). Contradicted: some series' trend reversed by those margins. Else "
    "inconclusive."
)


def _sweep(df: pd.DataFrame) -> pd.DataFrame:
    rows = plain_rows(experiment_rows(done(df), "lr_sweep"))
    return with_labels(rows) if "optim.lr" in rows.columns else rows.iloc[0:0]


def _c5_applicable(df: pd.DataFrame) -> bool:
    s = _sweep(df)
    return n_values(s, "optim.lr") >= 3 and (has(s, FORGET) or has(s, SPARSITY))


def _trend(rows: pd.DataFrame) -> tuple[Pair, list[Pair]]:
    """(first vs last cell, consecutive steps) of a series sorted by LR: a = later, b = earlier."""
    steps = [
        Pair(
            "step",
            rows["mean"].iloc[i + 1],
            rows["sem"].iloc[i + 1],
            rows["mean"].iloc[i],
            rows["sem"].iloc[i],
        )
        for i in range(len(rows) - 1)
    ]
    ends = Pair(
        "ends",
        rows["mean"].iloc[-1],
        rows["sem"].iloc[-1],
        rows["mean"].iloc[0],
        rows["sem"].iloc[0],
    )
    return ends, steps


def _c5(df: pd.DataFrame) -> Verdict:
    s = _sweep(df)
    parts, ok, reversed_ = [], True, False
    for metric, name, trend_min in ((SPARSITY, "sparsity", 5.0), (FORGET, "forgetting_pp", 3.0)):
        for key, rows in series_over(s, metric, "optim.lr"):
            if len(rows) < 3:
                continue
            ends, steps = _trend(rows)
            values = ", ".join(
                f"{lr:.0e}: {num(v)}" for lr, v in zip(rows["optim.lr"], rows["mean"], strict=True)
            )
            parts.append(f"{name} [{key}] {values}")
            ok &= all(sign(p, 2.0) != 1 for p in steps) and sign(ends, trend_min) == -1
            reversed_ |= sign(ends, trend_min) == 1
    off_more = math.nan
    if both_rollouts(s):
        pairs = paired(s, FORGET, "_rollout", "OffPD", "OnPD")
        off_more = -mean_diff(pairs)  # pp OffPD forgets beyond OnPD
        parts.append(f"OffPD forgets {pp(off_more)} pp more than OnPD on average")
    ev = "; ".join(parts) if parts else "no series with ≥ 3 learning rates"
    if reversed_:
        return Verdict("contradicted", ev, R5)
    if parts and ok and not (off_more > 1.0):
        return Verdict("supported", ev, R5)
    return Verdict("inconclusive", ev, R5)


# 9 ------------------------------------------------------------------------------------------
R9 = (
    "Per run, coverage gain g = pass@K − pass@1 (K = 10, else the largest k measured). Δg = "
    "g(forward) − g(reverse) per matched rollout×LR cell. Supported: mean Δg ≥ 3 pp, no cell "
    "where reverse KL's g or pass@K is higher by ≥ 3 pp beyond 2×SEM. Contradicted: mean Δg ≤ "
    "−3 pp. Else inconclusive."
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
    top = paired(m, f"eval/pass@{k}", "objective.kind", "forward_kl", "reverse_kl")
    one = paired(m, "eval/pass@1", "objective.kind", "forward_kl", "reverse_kl")
    d = mean_diff(pairs)
    ev = (
        f"mean Δg {pp(d)} pp over {len(pairs)} cells. pass@1 forward vs reverse: "
        f"{describe_pairs(one)}. pass@{k}: {describe_pairs(top)}"
    )
    if d <= -3.0:
        return Verdict("contradicted", ev, R9)
    worse = any(sign(p, 3.0) == -1 for p in pairs + top)
    if d >= 3.0 and not worse:
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
        "main grid at two learning rates, eval/sparsity_fp32_tau1e-06",
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
