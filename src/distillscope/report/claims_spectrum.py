"""Scorecard rules on the λ-spectrum of rollout policies: docs/method.md §9 claims 6–8.

λ = −1 is the teacher (OffPD), +1 the student (OnPD); OnPD/OffPD runs of the spectrum sub-grid
count at λ = ±1. Thresholds in pp; ``claimkit`` says what makes a difference count.
"""

from __future__ import annotations

import pandas as pd

from distillscope.report.claimkit import (
    ClaimRule,
    Pair,
    Verdict,
    num,
    pooled,
    pp,
    series_over,
    sign,
    spearman,
    spectrum_grid,
    spread,
)

ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY = "eval/sparsity_fp32_tau1e-06"
S_PROB, T_PROB = "rollout/student_token_prob_mean", "rollout/teacher_token_prob_mean"


# 6 ------------------------------------------------------------------------------------------
R6 = (
    "Per KL direction, accuracy range (max − min cell mean) over λ. Supported: forward range ≤ "
    "5 pp, reverse range ≥ 10 pp (beyond 2×SEM), and reverse KL's mean accuracy at λ > 0 ≥ 5 pp "
    "above λ < 0 (beyond 2×SEM). Contradicted: forward range ≥ reverse range + 5 pp, or reverse "
    "KL better at λ < 0 by ≥ 5 pp (beyond 2×SEM). Else inconclusive."
)


def _by_direction(df: pd.DataFrame, metric: str) -> dict[str, list[tuple[str, pd.DataFrame]]]:
    """{KL direction: [(series name, cells against λ)]} for series with ≥ 3 values of λ."""
    g = spectrum_grid(df)
    out = {}
    for kind in ("forward_kl", "reverse_kl"):
        rows = g[g["objective.kind"] == kind] if not g.empty else g
        name = kind.replace("_kl", " KL")
        series = [
            (name if k == "all" else f"{name}, {k}", r)
            for k, r in series_over(rows, metric, "_lam")
            if len(r) >= 3
        ]
        if series:
            out[kind] = series
    return out


def _spectrum_applicable(*metrics: str):
    def check(df: pd.DataFrame) -> bool:
        return all(len(_by_direction(df, m)) == 2 for m in metrics)

    return check


def _side(series: list[tuple[str, pd.DataFrame]], positive: bool) -> tuple[float, float]:
    rows = pd.concat([r for _, r in series])
    rows = rows[rows["_lam"] > 0] if positive else rows[rows["_lam"] < 0]
    return pooled(list(rows["mean"]), list(rows["sem"]))


def _curve(series: list[tuple[str, pd.DataFrame]]) -> str:
    return "; ".join(
        f"[{k}] "
        + ", ".join(f"{lam:+g}: {num(v)}" for lam, v in zip(r["_lam"], r["mean"], strict=True))
        for k, r in series
    )


def _c6(df: pd.DataFrame) -> Verdict:
    by = _by_direction(df, ACC)
    range_f = max(spread(r).diff for _, r in by["forward_kl"])
    ranges_r = [spread(r) for _, r in by["reverse_kl"]]
    range_r = max(p.diff for p in ranges_r)
    pos, pos_sem = _side(by["reverse_kl"], True)
    neg, neg_sem = _side(by["reverse_kl"], False)
    pref = Pair("λ>0 vs λ<0", pos, pos_sem, neg, neg_sem)
    ev = (
        f"accuracy range over λ: forward KL {num(range_f)} pp, reverse KL {num(range_r)} pp; "
        f"reverse KL λ>0 {num(pos)}% vs λ<0 {num(neg)}% (Δ {pp(pref.diff)} pp). Accuracy (%) "
        f"by λ: {_curve(by['forward_kl'])}; {_curve(by['reverse_kl'])}"
    )
    if range_f >= range_r + 5.0 or sign(pref, 5.0) == -1:
        return Verdict("contradicted", ev, R6)
    strong = any(sign(p, 10.0) == 1 for p in ranges_r)
    if range_f <= 5.0 and strong and sign(pref, 5.0) == 1:
        return Verdict("supported", ev, R6)
    return Verdict("inconclusive", ev, R6)


# 7 ------------------------------------------------------------------------------------------
R7 = (
    "Per KL direction, range over λ of forgetting_pp and of sparsity (fp32, τ = 1e-6). "
    "Supported: no range is ≥ 3 pp beyond 2×SEM. Contradicted: some range is ≥ 10 pp beyond "
    "2×SEM. Else inconclusive."
)


def _c7_applicable(df: pd.DataFrame) -> bool:
    return bool(_by_direction(df, FORGET) or _by_direction(df, SPARSITY))


def _c7(df: pd.DataFrame) -> Verdict:
    ranges, parts = [], []
    for metric, name in ((FORGET, "forgetting_pp"), (SPARSITY, "sparsity")):
        for series in _by_direction(df, metric).values():
            for key, rows in series:
                r = spread(rows)
                ranges.append(r)
                parts.append(f"{name} [{key}] range {num(r.diff)} pp")
    ev = "; ".join(parts)
    if any(sign(r, 10.0) == 1 for r in ranges):
        return Verdict("contradicted", ev, R7)
    if all(sign(r, 3.0) == 0 for r in ranges):
        return Verdict("supported", ev, R7)
    return Verdict("inconclusive", ev, R7)


# 8 ------------------------------------------------------------------------------------------
R8 = (
    "Spearman ρ over λ of the mean per-token probability of the training rollouts, per KL "
    "direction. Supported: ρ(student prob) ≥ 0.8 and ρ(teacher prob) ≤ −0.8 in every series. "
    "Contradicted: some series with ρ(student) ≤ 0 or ρ(teacher) ≥ 0. Else inconclusive."
)


def _c8_applicable(df: pd.DataFrame) -> bool:
    return bool(_by_direction(df, S_PROB)) and bool(_by_direction(df, T_PROB))


def _c8(df: pd.DataFrame) -> Verdict:
    rhos, parts = [], []
    for metric, who in ((S_PROB, "student"), (T_PROB, "teacher")):
        for series in _by_direction(df, metric).values():
            for key, rows in series:
                rho = spearman(rows["_lam"], rows["mean"])
                rhos.append((who, rho))
                values = ", ".join(
                    f"{lam:+g}: {v:.3f}" for lam, v in zip(rows["_lam"], rows["mean"], strict=True)
                )
                parts.append(f"{who} prob [{key}] ρ = {num(rho, 2)} ({values})")
    ev = "; ".join(parts)
    if any((w == "student" and r <= 0) or (w == "teacher" and r >= 0) for w, r in rhos):
        return Verdict("contradicted", ev, R8)
    if all((r >= 0.8 if w == "student" else r <= -0.8) for w, r in rhos):
        return Verdict("supported", ev, R8)
    return Verdict("inconclusive", ev, R8)


RULES_SPECTRUM = [
    ClaimRule(
        6,
        "Forward KL is robust across λ (accuracy varies ≤ ~5 pp); reverse KL varies "
        "strongly and prefers λ > 0.",
        "a λ-spectrum (≥ 3 λ) under both forward and reverse KL, eval/accuracy",
        _spectrum_applicable(ACC),
        _c6,
    ),
    ClaimRule(
        7,
        "λ barely moves forgetting or sparsity.",
        "a λ-spectrum (≥ 3 λ) with eval/forgetting_pp or sparsity",
        _c7_applicable,
        _c7,
    ),
    ClaimRule(
        8,
        "Trajectory likelihoods under student and teacher move with λ as intended.",
        f"a λ-spectrum (≥ 3 λ) with {S_PROB} and {T_PROB}",
        _c8_applicable,
        _c8,
    ),
]
