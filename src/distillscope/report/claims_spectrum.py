"""Scorecard rules on the λ-spectrum of rollout policies: docs/method.md §9 claims 6–8.

λ = −1 is the teacher (OffPD), +1 the student (OnPD); OnPD/OffPD runs of the spectrum sub-grid
count at λ = ±1. Contrasts compare the cell means (over seeds) at λ > 0 with those at λ < 0
as samples (``sample_pair``), so a spectrum with one seed per λ is judged too. Margins are
named constants (pp).
"""

from __future__ import annotations

import math

import pandas as pd

from distillscope.report.claimkit import (
    ClaimRule,
    Verdict,
    learned,
    memo,
    series_over,
    spearman,
    spectrum_grid,
)
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    interval,
    num,
    pp,
    sample_pair,
    t_quantile,
    within,
)

ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY = "eval/sparsity_bf16_tau1e-06"  # the published view (docs/method.md §10)
CI = f"one-sided {1 - ALPHA:.0%} t-interval"
S_PROB, T_PROB = "rollout/student_token_prob_mean", "rollout/teacher_token_prob_mean"


# 6 ------------------------------------------------------------------------------------------
C6_ROBUST = 8.0  # pp: forward KL's λ>0 vs λ<0 difference must stay within ± this
C6_PREFER = 5.0  # pp by which reverse KL must prefer λ > 0
R6 = (
    f"Per KL direction, Δ = mean accuracy of the cells at λ > 0 − mean at λ < 0 (cells as "
    f"samples, Welch t). Supported: students learned, forward KL's Δ within ±{C6_ROBUST:g} pp "
    f"(TOST) and reverse KL's Δ > {C6_PREFER:g} pp beyond its {CI}. Contradicted: reverse KL's "
    f"Δ < 0, or forward KL's |Δ| > {C6_ROBUST:g} pp, beyond {1 - ALPHA / 2:.1%} intervals. "
    "Else inconclusive."
)


@memo
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


def _sides(series: list[tuple[str, pd.DataFrame]], key: str) -> Pair:
    """Cells at λ > 0 versus cells at λ < 0 of a direction's series, as samples."""
    rows = pd.concat([r for _, r in series])
    return sample_pair(
        list(rows[rows["_lam"] > 0]["mean"]), list(rows[rows["_lam"] < 0]["mean"]), key
    )


def _curve(series: list[tuple[str, pd.DataFrame]]) -> str:
    return "; ".join(
        f"[{k}] "
        + ", ".join(f"{lam:+g}: {num(v)}" for lam, v in zip(r["_lam"], r["mean"], strict=True))
        for k, r in series
    )


def _c6(df: pd.DataFrame) -> Verdict:
    by = _by_direction(df, ACC)
    fwd, rev = _sides(by["forward_kl"], "forward"), _sides(by["reverse_kl"], "reverse")
    ev = (
        f"λ>0 − λ<0: forward KL {pp(fwd.diff)} pp {interval(fwd)}, reverse KL {pp(rev.diff)} pp "
        f"{interval(rev)}. Accuracy (%) by λ: {_curve(by['forward_kl'])}; "
        f"{_curve(by['reverse_kl'])}"
    )
    if beyond(rev, 0.0, ALPHA / 2) == -1 or beyond(fwd, C6_ROBUST, ALPHA / 2) != 0:
        return Verdict("contradicted", ev, R6)
    if within(fwd, C6_ROBUST) and beyond(rev, C6_PREFER) == 1:
        power, text = learned(df, spectrum_grid(df))
        if not power:
            return Verdict("inconclusive", f"{text}. {ev}", R6)
        return Verdict("supported", ev, R6)
    return Verdict("inconclusive", ev, R6)


# 7 ------------------------------------------------------------------------------------------
C7_MARGIN = 8.0  # pp: "barely moves" means λ>0 vs λ<0 within ± this
R7 = (
    f"Per KL direction, for forgetting_pp and sparsity (bf16 view, τ = 1e-6): Δ = mean of the "
    f"cells at λ > 0 − mean at λ < 0 (cells as samples, Welch t). Supported: students learned "
    f"and every Δ within ±{C7_MARGIN:g} pp (TOST). Contradicted: some |Δ| > {C7_MARGIN:g} pp "
    f"beyond its interval (α split over the contrasts). Else inconclusive."
)


def _c7_applicable(df: pd.DataFrame) -> bool:
    return bool(_by_direction(df, FORGET) or _by_direction(df, SPARSITY))


def _c7(df: pd.DataFrame) -> Verdict:
    contrasts, parts = [], []
    for metric, name in ((FORGET, "forgetting_pp"), (SPARSITY, "sparsity")):
        for kind, series in _by_direction(df, metric).items():
            c = _sides(series, f"{name} [{kind}]")
            contrasts.append(c)
            parts.append(
                f"{name} [{kind.replace('_kl', ' KL')}] λ>0 − λ<0 {pp(c.diff)} pp {interval(c)}"
            )
    ev = "; ".join(parts)
    k = len(contrasts)
    if any(beyond(c, C7_MARGIN, ALPHA / (2 * k)) != 0 for c in contrasts):
        return Verdict("contradicted", ev, R7)
    power, text = learned(df, spectrum_grid(df))
    if not power:
        return Verdict("inconclusive", f"{text}. {ev}", R7)
    if all(within(c, C7_MARGIN) for c in contrasts):
        return Verdict("supported", f"{ev}; {text}", R7)
    return Verdict("inconclusive", f"{ev}; {text}", R7)


# 8 ------------------------------------------------------------------------------------------
C8_MIN_LAMBDAS = 5  # fewer λ values leave Spearman's ρ too coarse to test
R8 = (
    f"Spearman ρ over λ (≥ {C8_MIN_LAMBDAS} values) of the mean per-token probability of the "
    f"training rollouts, per KL direction; tested by t = ρ√((n−2)/(1−ρ²)) on n − 2 degrees of "
    f"freedom. Supported: in every series ρ(student prob) > 0 and ρ(teacher prob) < 0, each "
    f"beyond the one-sided {1 - ALPHA:.0%} level. Contradicted: some series with the opposite "
    f"sign beyond the level (α split over the series). Else inconclusive."
)


def _c8_applicable(df: pd.DataFrame) -> bool:
    return bool(_by_direction(df, S_PROB)) and bool(_by_direction(df, T_PROB))


def rho_beyond(rho: float, n: int, alpha: float) -> int:
    """+1 / −1 when Spearman ρ of n points is positive / negative at one-sided level alpha."""
    if math.isnan(rho) or n < C8_MIN_LAMBDAS:
        return 0
    if abs(rho) >= 1.0:
        return 1 if rho > 0 else -1
    t = rho * math.sqrt((n - 2) / (1 - rho * rho))
    crit = t_quantile(1.0 - alpha, n - 2)
    return 1 if t > crit else -1 if t < -crit else 0


def _c8(df: pd.DataFrame) -> Verdict:
    tests, parts = [], []
    for metric, who, want in ((S_PROB, "student", 1), (T_PROB, "teacher", -1)):
        for series in _by_direction(df, metric).values():
            for key, rows in series:
                rho = spearman(rows["_lam"], rows["mean"])
                tests.append((want, rho, len(rows)))
                values = ", ".join(
                    f"{lam:+g}: {v:.3f}" for lam, v in zip(rows["_lam"], rows["mean"], strict=True)
                )
                parts.append(f"{who} prob [{key}] ρ = {num(rho, 2)} ({values})")
    ev = "; ".join(parts)
    k = len(tests)
    if any(rho_beyond(r, n, ALPHA / k) == -w for w, r, n in tests):
        return Verdict("contradicted", ev, R8)
    if tests and all(rho_beyond(r, n, ALPHA) == w for w, r, n in tests):
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
