"""Scorecard rules on the λ-spectrum of rollout policies: docs/method.md §9 claims 6–8.

λ = −1 is the teacher, +1 the student; OnPD/OffPD runs of the spectrum sub-grid count at
λ = ±1 only where the spectrum's end is that policy (``aggregate.comparable_spectrum``: with
``paper`` temperatures the OffPD cells are left out, and the evidence says so). Contrasts
compare the cell means (over seeds) at λ > 0 with those at λ < 0 as samples (``sample_pair``),
so a spectrum with one seed per λ is judged too. Margins are named constants (pp).
"""

from __future__ import annotations

import math

import pandas as pd

from distillscope.report.aggregate import comparable_spectrum
from distillscope.report.claimkit import (
    SPECTRUM,
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    no_effect_verdict,
)
from distillscope.report.matching import LAMBDA, series_over
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    interval,
    num,
    pp,
    sample_pair,
    spearman,
    t_quantile,
    within,
)

ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY = "eval/sparsity_bf16_tau1e-06"  # the published view (docs/method.md §10)
CI = f"one-sided {1 - ALPHA:.0%} t-interval"
S_PROB, T_PROB = "rollout/student_token_prob_mean", "rollout/teacher_token_prob_mean"


# 6 ------------------------------------------------------------------------------------------
CLAIM_06_FORWARD_MARGIN_PP = 8.0  # forward KL's λ>0 vs λ<0 difference must stay within ± this
CLAIM_06_REVERSE_GAIN_PP = 5.0  # by which reverse KL must prefer λ > 0
CLAIM_06_RULE = (
    f"Per KL direction, Δ = mean accuracy of the cells at λ > 0 − mean at λ < 0 (cells as "
    f"samples, Welch t). Supported: students learned, forward KL's Δ within "
    f"±{CLAIM_06_FORWARD_MARGIN_PP:g} pp (TOST) and reverse KL's Δ > "
    f"{CLAIM_06_REVERSE_GAIN_PP:g} pp beyond its {CI}. Contradicted: reverse KL's Δ < 0, or "
    f"forward KL's |Δ| > {CLAIM_06_FORWARD_MARGIN_PP:g} pp, beyond {1 - ALPHA / 2:.1%} intervals. "
    "Else inconclusive."
)


def by_direction(s: Scoring, metric: str) -> dict[str, list[tuple[str, pd.DataFrame]]]:
    """{KL direction: [(series name, cells against λ)]} for series with ≥ 3 values of λ."""
    return s.cached(_by_direction, metric)


def _by_direction(s: Scoring, metric: str) -> dict[str, list[tuple[str, pd.DataFrame]]]:
    g, _ = comparable_spectrum(s.grid(SPECTRUM))
    out = {}
    for kind in ("forward_kl", "reverse_kl"):
        rows = g[g["objective.kind"] == kind] if not g.empty else g
        name = kind.replace("_kl", " KL")
        series = [
            (name if k == "all" else f"{name}, {k}", r)
            for k, r in series_over(rows, metric, LAMBDA)
            if len(r) >= 3
        ]
        if series:
            out[kind] = series
    return out


def left_out(s: Scoring) -> str:
    """A sentence naming the OffPD runs left out of the spectrum (its λ = −1 is not OffPD)."""
    note = comparable_spectrum(s.grid(SPECTRUM))[1]
    return f" {note}." if note else ""


def claim_06_applicable(s: Scoring) -> bool:
    """Claim 6 is testable: accuracy series over ≥ 3 λ under both KL directions."""
    return len(by_direction(s, ACC)) == 2


def _sides(series: list[tuple[str, pd.DataFrame]], key: str) -> Pair:
    """Cells at λ > 0 versus cells at λ < 0 of a direction's series, as samples."""
    rows = pd.concat([r for _, r in series])
    return sample_pair(
        list(rows[rows[LAMBDA] > 0]["mean"]), list(rows[rows[LAMBDA] < 0]["mean"]), key
    )


def _curve(series: list[tuple[str, pd.DataFrame]]) -> str:
    return "; ".join(
        f"[{k}] "
        + ", ".join(f"{lam:+g}: {num(v)}" for lam, v in zip(r[LAMBDA], r["mean"], strict=True))
        for k, r in series
    )


def claim_06_lambda_robustness(s: Scoring) -> Verdict:
    """Claim 6's verdict (``CLAIM_06_RULE``) on the λ-spectrum's accuracy."""
    by = by_direction(s, ACC)
    fwd, rev = _sides(by["forward_kl"], "forward"), _sides(by["reverse_kl"], "reverse")
    ev = (
        f"λ>0 − λ<0: forward KL {pp(fwd.diff)} pp {interval(fwd)}, reverse KL {pp(rev.diff)} pp "
        f"{interval(rev)}. Accuracy (%) by λ: {_curve(by['forward_kl'])}; "
        f"{_curve(by['reverse_kl'])}{left_out(s)}"
    )
    contradicted = (
        beyond(rev, 0.0, ALPHA / 2) == -1 or beyond(fwd, CLAIM_06_FORWARD_MARGIN_PP, ALPHA / 2) != 0
    )
    supported = (
        within(fwd, CLAIM_06_FORWARD_MARGIN_PP) and beyond(rev, CLAIM_06_REVERSE_GAIN_PP) == 1
    )
    if supported and not contradicted:
        power, text = s.learned(SPECTRUM)
        if not power:
            return Verdict("inconclusive", f"{text}. {ev}", CLAIM_06_RULE)
    return decide(CLAIM_06_RULE, ev, contradicted, supported)


# 7 ------------------------------------------------------------------------------------------
CLAIM_07_MARGIN_PP = 8.0  # "barely moves" means λ>0 vs λ<0 within ± this
CLAIM_07_RULE = (
    f"Per KL direction, for forgetting_pp and sparsity (bf16 view, τ = 1e-6): Δ = mean of the "
    f"cells at λ > 0 − mean at λ < 0 (cells as samples, Welch t). Supported: students learned "
    f"and every Δ within ±{CLAIM_07_MARGIN_PP:g} pp (TOST). Contradicted: some |Δ| > "
    f"{CLAIM_07_MARGIN_PP:g} pp beyond its interval (α split over the contrasts). Else "
    "inconclusive."
)


def claim_07_applicable(s: Scoring) -> bool:
    """Claim 7 is testable: forgetting or sparsity series over ≥ 3 λ."""
    return bool(by_direction(s, FORGET) or by_direction(s, SPARSITY))


def claim_07_lambda_forgetting_sparsity(s: Scoring) -> Verdict:
    """Claim 7's verdict (``CLAIM_07_RULE``) on the λ-spectrum's forgetting and sparsity."""
    contrasts, parts = [], []
    for metric, name in ((FORGET, "forgetting_pp"), (SPARSITY, "sparsity")):
        for kind, series in by_direction(s, metric).items():
            c = _sides(series, f"{name} [{kind}]")
            contrasts.append(c)
            parts.append(
                f"{name} [{kind.replace('_kl', ' KL')}] λ>0 − λ<0 {pp(c.diff)} pp {interval(c)}"
            )
    ev = "; ".join(parts) + left_out(s)
    return no_effect_verdict(s, SPECTRUM, contrasts, CLAIM_07_MARGIN_PP, CLAIM_07_RULE, ev)


# 8 ------------------------------------------------------------------------------------------
CLAIM_08_MIN_LAMBDAS = 5  # fewer λ values leave Spearman's ρ too coarse to test
CLAIM_08_RULE = (
    f"Spearman ρ over λ (≥ {CLAIM_08_MIN_LAMBDAS} values) of the mean per-token probability of "
    f"the training rollouts, per KL direction; tested by t = ρ√((n−2)/(1−ρ²)) on n − 2 degrees "
    f"of freedom. Supported: in every series ρ(student prob) > 0 and ρ(teacher prob) < 0, each "
    f"beyond the one-sided {1 - ALPHA:.0%} level. Contradicted: some series with the opposite "
    f"sign beyond the level (α split over the series). Else inconclusive."
)


def claim_08_applicable(s: Scoring) -> bool:
    """Claim 8 is testable: student and teacher token-probability series over ≥ 3 λ."""
    return bool(by_direction(s, S_PROB)) and bool(by_direction(s, T_PROB))


def rho_beyond(rho: float, n: int, alpha: float) -> int:
    """+1 / −1 when Spearman ρ of n points is positive / negative at one-sided level alpha:
    t = ρ √((n − 2) / (1 − ρ²)) beyond Student's t₁₋α(n − 2); 0 with < CLAIM_08_MIN_LAMBDAS."""
    if math.isnan(rho) or n < CLAIM_08_MIN_LAMBDAS:
        return 0
    if abs(rho) >= 1.0:
        return 1 if rho > 0 else -1
    t = rho * math.sqrt((n - 2) / (1 - rho * rho))
    crit = t_quantile(1.0 - alpha, n - 2)
    return 1 if t > crit else -1 if t < -crit else 0


def claim_08_lambda_likelihoods(s: Scoring) -> Verdict:
    """Claim 8's verdict (``CLAIM_08_RULE``) on the rollouts' token probabilities over λ."""
    tests, parts = [], []
    for metric, who, want in ((S_PROB, "student", 1), (T_PROB, "teacher", -1)):
        for series in by_direction(s, metric).values():
            for key, rows in series:
                rho = spearman(rows[LAMBDA], rows["mean"])
                tests.append((want, rho, len(rows)))
                values = ", ".join(
                    f"{lam:+g}: {v:.3f}" for lam, v in zip(rows[LAMBDA], rows["mean"], strict=True)
                )
                parts.append(f"{who} prob [{key}] ρ = {num(rho, 2)} ({values})")
    ev = "; ".join(parts) + left_out(s)
    k = len(tests)
    contradicted = any(rho_beyond(r, n, ALPHA / k) == -w for w, r, n in tests)
    supported = bool(tests) and all(rho_beyond(r, n, ALPHA) == w for w, r, n in tests)
    return decide(CLAIM_08_RULE, ev, contradicted, supported)


RULES_SPECTRUM = [
    ClaimRule(
        6,
        "Forward KL is robust across λ (accuracy varies ≤ ~5 pp); reverse KL varies "
        "strongly and prefers λ > 0.",
        "a λ-spectrum (≥ 3 λ) under both forward and reverse KL, eval/accuracy",
        claim_06_applicable,
        claim_06_lambda_robustness,
    ),
    ClaimRule(
        7,
        "λ barely moves forgetting or sparsity.",
        "a λ-spectrum (≥ 3 λ) with eval/forgetting_pp or sparsity",
        claim_07_applicable,
        claim_07_lambda_forgetting_sparsity,
    ),
    ClaimRule(
        8,
        "Trajectory likelihoods under student and teacher move with λ as intended.",
        f"a λ-spectrum (≥ 3 λ) with {S_PROB} and {T_PROB}",
        claim_08_applicable,
        claim_08_lambda_likelihoods,
    ),
]
