"""Scorecard rules on the λ-spectrum of rollout policies: docs/method.md §9 claims 6–8.

λ = −1 is the teacher, +1 the student; OnPD/OffPD runs of the spectrum sub-grid count at
λ = ±1 only where the spectrum's end is that policy (``aggregate.comparable_spectrum``: with
``paper`` temperatures the OffPD cells are left out, and the evidence says so). A spectrum is
judged *per setting* of its other axes — at each of its learning rates when it ran at several
(the paper preset runs it at both): a curve is the cell means (over seeds) against λ.

The range of a curve (max − min of its cell means over λ) is bounded by its matched pairs of
cells (``lambda_range``), with the seed variance pooled over the curve's cells:

- *within* m (equivalence): every pair's |difference| is within ±m by two one-sided t-tests
  at α — an intersection-union test, whose false rate is ≤ α without any adjustment, because a
  true range ≥ m has one pair whose difference is ≥ m, and that pair alone passes with ≤ α;
  the upper bound reported is max over pairs of |d| + t₁₋α(ν)·SE;
- *beyond* m: some pair's |difference| > m beyond its t-interval at α / P (Bonferroni over the
  P pairs), so that no pair of a range ≤ m reaches it with more than α in all.

Margins are named constants (pp), from docs/method.md §9.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from functools import lru_cache

import numpy as np
import pandas as pd

from distillscope.report.aggregate import comparable_spectrum
from distillscope.report.claimkit import (
    MAIN,
    SPECTRUM,
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    n_values,
)
from distillscope.report.matching import LAMBDA, Contrast, series_over
from distillscope.report.stats import (
    ALPHA,
    Pair,
    Range,
    beyond,
    bounds,
    cell_range,
    interval,
    num,
    pooled_pair,
    pp,
    spearman,
    t_quantile,
    trend,
)

ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY = "eval/sparsity_bf16_tau1e-06"  # the published view (docs/method.md §10)
S_PROB, T_PROB = "rollout/student_token_prob_mean", "rollout/teacher_token_prob_mean"
KINDS = ("forward_kl", "reverse_kl")
MIN_LAMBDAS = 3  # a curve needs this many λ values to have a range or a slope
RANGE_METHOD = (
    "range = max − min of the cell means over λ; its upper bound is the largest |d| + "
    "t₁₋α(ν)·SE over all pairs of cells (each pair within ±m by TOST: an intersection-union "
    "test at α), its lower bound the largest |d| − t(ν)·SE at α / (number of pairs) "
    "(Bonferroni); seed variance pooled over the curve's cells, ν = Σ (seeds − 1)"
)


def kl_name(kind: str) -> str:
    return kind.replace("_kl", " KL")


# ---------------------------------------------------------------------------------------------
# Curves over λ and their ranges


def curves(s: Scoring, metric: str) -> dict[str, dict[str, pd.DataFrame]]:
    """{setting: {KL direction: cells against λ (λ, mean, sem, runs)}} of the comparable
    λ-spectrum, for curves with ≥ MIN_LAMBDAS values of λ; a setting is one value of the
    spectrum's other axes (its LR), named as the reader sees it."""
    return s.cached(_curves, metric)


def _curves(s: Scoring, metric: str) -> dict[str, dict[str, pd.DataFrame]]:
    g, _ = comparable_spectrum(s.grid(SPECTRUM))
    out: dict[str, dict[str, pd.DataFrame]] = {}
    for kind in KINDS:
        rows = g[g["objective.kind"] == kind] if not g.empty else g
        for name, cells in series_over(rows, metric, LAMBDA):
            if len(cells) >= MIN_LAMBDAS:
                out.setdefault(lr_setting(rows, name), {})[kind] = cells
    return out


def lr_setting(rows: pd.DataFrame, name: str) -> str:
    """A curve's setting for the evidence: its name, or the spectrum's LR when nothing varies."""
    if name != "all":
        return name
    lrs = sorted(set(rows["_lr"])) if "_lr" in rows.columns else []
    return f"LR {', '.join(lrs)}" if lrs else "all"


def lambda_range(cells: pd.DataFrame, alpha_upper: float, alpha_lower: float) -> Range:
    """The range of one curve (``RANGE_METHOD``, ``stats.cell_range``) with ``best`` the λ of
    its highest cell."""
    r = cell_range(cells, alpha_upper, alpha_lower)
    best = float(cells[LAMBDA].to_numpy(dtype=float)[int(np.argmax(cells["mean"].to_numpy()))])
    return dataclasses.replace(r, best=best)


def lambda_trend(cells: pd.DataFrame, key: str) -> tuple[Pair, float]:
    """(fitted change of the curve over its λ range as a pair, that range): least squares over
    the cell means (``stats.trend``: the residuals of the fit are the noise, so one seed per
    cell is judged too)."""
    lam = cells[LAMBDA].to_numpy(dtype=float)
    return trend(lam, cells["mean"].to_numpy(dtype=float), key), float(np.ptp(lam))


def values_text(cells: pd.DataFrame, digits: int = 1) -> str:
    """``−2: 71.0, −1.5: 72.3, …`` (λ: cell mean)."""
    lams, means = cells[LAMBDA], cells["mean"]
    return ", ".join(f"{x:+g}: {v:.{digits}f}" for x, v in zip(lams, means, strict=True))


def left_out(s: Scoring) -> str:
    """A sentence naming the OffPD runs left out of the spectrum (its λ = −1 is not OffPD)."""
    note = comparable_spectrum(s.grid(SPECTRUM))[1]
    return f" {note}." if note else ""


def undetectable(r: Range, margin: float) -> str:
    """The design's detectable margin, when it is wider than the claim's."""
    if math.isnan(r.detectable) or r.detectable <= margin:
        return ""
    return (
        f" (at this seed noise a flat curve passes ±{margin:g} pp with 80% power only for a "
        f"margin ≥ {num(r.detectable)} pp)"
    )


# 6 ------------------------------------------------------------------------------------------
CLAIM_06_FORWARD_MARGIN_PP = 8.0  # forward KL's range over λ must be within this
CLAIM_06_REVERSE_RANGE_PP = 10.0  # the alternative route: reverse KL's range beyond this
CLAIM_06_RULE = (
    f"At each LR of the spectrum (each setting of its other axes): forward KL's accuracy range "
    f"over all λ (λ = 0 included) and reverse KL's least-squares slope in λ over the cell "
    f"means. Supported: students learned and, at every LR, the forward range within "
    f"{CLAIM_06_FORWARD_MARGIN_PP:g} pp (equivalence) and reverse KL's slope > 0 beyond its "
    f"one-sided {1 - ALPHA / 2:.2%} t-bound, or its range > {CLAIM_06_REVERSE_RANGE_PP:g} pp "
    f"beyond uncertainty with its best cell at λ > 0. Contradicted: at some LR the forward "
    f"range > {CLAIM_06_FORWARD_MARGIN_PP:g} pp, or reverse KL's slope < 0, beyond uncertainty "
    f"(α = {ALPHA:g} split over these routes and LRs). Method: {RANGE_METHOD}. Else inconclusive."
)


def claim_06_applicable(s: Scoring) -> bool:
    """Claim 6 is testable: accuracy curves over ≥ 3 λ under both KL directions at one LR."""
    return any(len(c) == 2 for c in curves(s, ACC).values())


def claim_06_lambda_robustness(s: Scoring) -> Verdict:
    """Claim 6's verdict (``CLAIM_06_RULE``) on the λ-spectrum's accuracy, at each LR."""
    both = {name: c for name, c in curves(s, ACC).items() if len(c) == 2}
    a_con = ALPHA / (2 * len(both))  # two contradiction routes at each setting
    contradicted, supported = False, True
    parts, heads, detect = [], [], ""
    for name, c in both.items():
        fwd = lambda_range(c["forward_kl"], ALPHA, a_con)
        rev = lambda_range(c["reverse_kl"], ALPHA, ALPHA / 2)
        change, span = lambda_trend(c["reverse_kl"], f"reverse KL slope [{name}]")
        slope, (lo, hi) = change.diff / span, bounds(change, ALPHA / 2)
        contradicted |= fwd.lower > CLAIM_06_FORWARD_MARGIN_PP or beyond(change, 0.0, a_con) == -1
        by_range = rev.lower > CLAIM_06_REVERSE_RANGE_PP and rev.best > 0
        supported &= fwd.upper < CLAIM_06_FORWARD_MARGIN_PP and (
            beyond(change, 0.0, ALPHA / 2) == 1 or by_range
        )
        detect = detect or undetectable(fwd, CLAIM_06_FORWARD_MARGIN_PP)
        parts.append(
            f"[{name}] forward KL range {fwd.text()}; reverse KL slope {pp(slope)} pp/λ "
            f"[{pp(lo / span)}, {pp(hi / span)}], range {rev.text()}, best at λ = "
            f"{rev.best:+g}. Accuracy (%) by λ: forward {values_text(c['forward_kl'])}; "
            f"reverse {values_text(c['reverse_kl'])}"
        )
        bound = "" if math.isnan(fwd.upper) else f" [≤ {num(fwd.upper)}]"
        heads.append(f"{name}: forward range {num(fwd.value)} pp{bound}; reverse slope {pp(slope)}")
    ev = ". ".join(parts) + f"{detect}.{left_out(s)}"
    head = "; ".join(h + " pp/λ" for h in heads)
    if supported and not contradicted:
        power, text = s.learned(SPECTRUM)
        if not power:
            return Verdict("inconclusive", f"{text}. {ev}", CLAIM_06_RULE, "no power")
    return decide(CLAIM_06_RULE, ev, contradicted, supported, head)


# 7 ------------------------------------------------------------------------------------------
CLAIM_07_MARGIN_PP = 3.0  # "barely moves": each range over λ within this
CLAIM_07_METRICS = {FORGET: "eval/forgetting_pp", SPARSITY: "bf16 sparsity (τ = 1e-6)"}
CLAIM_07_RULE = (
    f"For forgetting_pp and sparsity (bf16 view, τ = 1e-6), per KL direction and LR of the "
    f"spectrum: the range over λ of the cell means. The LR effect on the same metric: high − "
    f"low LR, matched cells pooled, from the spectrum when it ran at two LRs, else from the "
    f"main grid. Supported: students learned, every range within {CLAIM_07_MARGIN_PP:g} pp "
    f"(equivalence), and each metric's |LR effect| > {CLAIM_07_MARGIN_PP:g} pp beyond its "
    f"one-sided {1 - ALPHA:.1%} t-bound (so the LR effect is larger than λ's). Contradicted: "
    f"some range > {CLAIM_07_MARGIN_PP:g} pp beyond uncertainty (α = {ALPHA:g} split over the "
    f"ranges). Inconclusive with its reason otherwise. Not tested without either metric or "
    f"without an LR contrast (both measurements are needed). Method: {RANGE_METHOD}."
)


def lr_effect(s: Scoring, metric: str) -> tuple[str, Pair] | None:
    """(sub-grid, high − low LR on ``metric``, matched cells pooled): the λ-spectrum when it
    ran at two LRs, else the main grid; None when neither has an LR contrast."""
    return s.cached(_lr_effect, metric)


def _lr_effect(s: Scoring, metric: str) -> tuple[str, Pair] | None:
    for grid, words in ((SPECTRUM, "λ-spectrum"), (MAIN, "main grid")):
        rows = s.grid(grid)
        lrs = sorted(rows["optim.lr"].dropna().unique()) if "optim.lr" in rows.columns else []
        if len(lrs) < 2:
            continue
        pairs = s.pairs(grid, metric, Contrast("optim.lr", lrs[-1], lrs[0]))
        if pairs:
            return words, pooled_pair(pairs, f"{words}: LR {lrs[-1]:.0e} − {lrs[0]:.0e}")
    return None


def claim_07_applicable(s: Scoring) -> bool:
    """Claim 7 is testable: a λ-spectrum with ≥ 3 values of λ (``lacking`` says what else)."""
    return n_values(s.grid(SPECTRUM), LAMBDA) >= MIN_LAMBDAS


def claim_07_lacking(s: Scoring) -> list[str]:
    """Claim 7 needs both forgetting and sparsity over λ, and an LR contrast of each."""
    out = [f"{w} of the λ-spectrum" for m, w in CLAIM_07_METRICS.items() if not curves(s, m)]
    return out or [
        f"an LR contrast of {w} (the λ-spectrum or the main grid at two LRs)"
        for m, w in CLAIM_07_METRICS.items()
        if lr_effect(s, m) is None
    ]


def claim_07_lambda_forgetting_sparsity(s: Scoring) -> Verdict:
    """Claim 7's verdict (``CLAIM_07_RULE``) on the λ-spectrum's forgetting and sparsity."""
    curves_ = [
        (f"{w} [{kl_name(kind)}, {name}]", cells)
        for m, w in CLAIM_07_METRICS.items()
        for name, c in curves(s, m).items()
        for kind, cells in c.items()
    ]
    a_con = ALPHA / (2 * len(curves_))
    ranges = [(key, lambda_range(cells, ALPHA, a_con)) for key, cells in curves_]
    effects = [(w, *lr_effect(s, m)) for m, w in CLAIM_07_METRICS.items()]
    parts = [f"range over λ of {key} {r.text()}" for key, r in ranges]
    parts += [f"LR effect on {w} ({grid}) {pp(p.diff)} pp {interval(p)}" for w, grid, p in effects]
    worst = max(ranges, key=lambda kr: kr[1].upper if not math.isnan(kr[1].upper) else math.inf)
    detect = undetectable(worst[1], CLAIM_07_MARGIN_PP)
    ev = "; ".join(parts) + f"{detect}.{left_out(s)}"
    bound = "no bound" if math.isnan(worst[1].upper) else f"≤ {num(worst[1].upper)} pp"
    head = f"widest λ range {num(worst[1].value)} pp [{bound}]; LR effect (pp) " + " / ".join(
        f"{pp(p.diff)}" for _, _, p in effects
    )
    if any(r.lower > CLAIM_07_MARGIN_PP for _, r in ranges):
        return Verdict("contradicted", ev, CLAIM_07_RULE, head)
    power, text = s.learned(SPECTRUM)
    if not power:
        return Verdict("inconclusive", f"{text}. {ev}", CLAIM_07_RULE, "no power")
    weak = [w for w, _, p in effects if beyond(p, CLAIM_07_MARGIN_PP) == 0]
    if weak:
        reason = (
            f"the LR effect on {', '.join(weak)} is not > {CLAIM_07_MARGIN_PP:g} pp beyond "
            "uncertainty: this study shows no change larger than λ's to compare with"
        )
        return Verdict("inconclusive", f"{reason}. {ev}", CLAIM_07_RULE, head)
    found = all(r.upper < CLAIM_07_MARGIN_PP for _, r in ranges)
    return decide(CLAIM_07_RULE, f"{ev} {text}.", False, found, head)


# 8 ------------------------------------------------------------------------------------------
CLAIM_08_MIN_RHO = 0.8  # the published contrast: ρ ≥ 0.8 (student) and ρ ≤ −0.8 (teacher)
CLAIM_08_MIN_LAMBDAS = 5  # fewer λ values leave Spearman's ρ too coarse to test
EXACT_RHO_MAX_N = 9  # ρ's p-value exact up to here: 9! = 362,880 orderings, enumerated once
CLAIM_08_RULE = (
    f"Spearman ρ over λ (≥ {CLAIM_08_MIN_LAMBDAS} values) of the mean per-token probability of "
    f"the training rollouts, per KL direction and LR. Supported: in every curve ρ(student prob) "
    f"≥ {CLAIM_08_MIN_RHO:g} and ρ(teacher prob) ≤ −{CLAIM_08_MIN_RHO:g}, each also significant "
    f"at one-sided {ALPHA:g} (exact permutation p-value of ρ up to {EXACT_RHO_MAX_N} λ values, "
    f"else t = ρ√((n−2)/(1−ρ²)); |ρ| ≥ {CLAIM_08_MIN_RHO:g} is significant from 7 λ values on). "
    "Contradicted: some curve with the opposite sign at that level (α split over the curves). "
    "Else inconclusive."
)


def claim_08_applicable(s: Scoring) -> bool:
    """Claim 8 is testable: student and teacher token-probability curves over ≥ 3 λ."""
    return bool(curves(s, S_PROB)) and bool(curves(s, T_PROB))


def rho_beyond(rho: float, n: int, alpha: float) -> int:
    """+1 / −1 when Spearman ρ of n points is positive / negative at one-sided level alpha;
    0 with < CLAIM_08_MIN_LAMBDAS points.

    The p-value is exact for n ≤ ``EXACT_RHO_MAX_N`` (the share of all n! orderings whose ρ is
    at least as extreme, ``rho_tail``): the usual t = ρ √((n − 2) / (1 − ρ²)) on n − 2 degrees
    of freedom is liberal at these n (at a one-sided 0.3% level it rejects 0.8% of null
    orderings at n = 5, 0.4% at n = 9). Larger n use that t approximation.
    """
    if math.isnan(rho) or n < CLAIM_08_MIN_LAMBDAS:
        return 0
    if n <= EXACT_RHO_MAX_N:
        return 1 if rho_tail(n, rho) <= alpha else -1 if rho_tail(n, -rho) <= alpha else 0
    if abs(rho) >= 1.0:
        return 1 if rho > 0 else -1
    t = rho * math.sqrt((n - 2) / (1 - rho * rho))
    crit = t_quantile(1.0 - alpha, n - 2)
    return 1 if t > crit else -1 if t < -crit else 0


def rho_tail(n: int, rho: float) -> float:
    """P(ρ ≥ ``rho``) for Spearman's ρ of n untied points in random order (exact)."""
    values = _rho_null(n)
    return float(np.count_nonzero(values >= rho - 1e-12)) / len(values)


@lru_cache(maxsize=16)
def _rho_null(n: int) -> np.ndarray:
    """ρ = 1 − 6 Σ d² / (n (n² − 1)) of every ordering of n ranks."""
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int16)  # (n!, n)
    d2 = ((perms - np.arange(n, dtype=np.int16)) ** 2).sum(axis=1)
    return 1.0 - 6.0 * d2 / (n * (n * n - 1))


def claim_08_lambda_likelihoods(s: Scoring) -> Verdict:
    """Claim 8's verdict (``CLAIM_08_RULE``) on the rollouts' token probabilities over λ."""
    tests, parts = [], []
    for metric, who, want in ((S_PROB, "student", 1), (T_PROB, "teacher", -1)):
        for name, c in curves(s, metric).items():
            for kind, cells in c.items():
                rho = spearman(cells[LAMBDA], cells["mean"])
                tests.append((who, want, rho, len(cells)))
                parts.append(
                    f"{who} prob [{kl_name(kind)}, {name}] ρ = {num(rho, 2)} "
                    f"({values_text(cells, 3)})"
                )
    ev = "; ".join(parts) + left_out(s)
    k = len(tests)
    contradicted = any(rho_beyond(r, n, ALPHA / k) == -w for _, w, r, n in tests)
    supported = bool(tests) and all(
        w * r >= CLAIM_08_MIN_RHO and rho_beyond(r, n, ALPHA) == w for _, w, r, n in tests
    )
    head = "; ".join(f"weakest {who} ρ {pp(r, 2)}" for who, _, r in _extreme(tests))
    return decide(CLAIM_08_RULE, ev, contradicted, supported, head)


def _extreme(tests: list[tuple[str, int, float, int]]) -> list[tuple[str, int, float]]:
    """Per side, the curve furthest from the claim (the weakest ρ in the claimed direction)."""
    out = []
    for who in ("student", "teacher"):
        mine = [(w, r) for x, w, r, _ in tests if x == who]
        if mine:
            w, r = min(mine, key=lambda wr: (wr[0] * wr[1]) if not math.isnan(wr[1]) else -2)
            out.append((who, w, r))
    return out


RULES_SPECTRUM = [
    ClaimRule(
        6,
        "Forward KL is robust across λ (accuracy varies ≤ ~5 pp); reverse KL varies "
        "strongly and prefers λ > 0.",
        "a λ-spectrum (≥ 3 λ) under both forward and reverse KL, eval/accuracy (judged at "
        "each of its LRs)",
        claim_06_applicable,
        claim_06_lambda_robustness,
    ),
    ClaimRule(
        7,
        "λ barely moves forgetting or sparsity.",
        "a λ-spectrum (≥ 3 λ) with eval/forgetting_pp and bf16 sparsity, and an LR contrast "
        "of both (the spectrum or the main grid at two LRs)",
        claim_07_applicable,
        claim_07_lambda_forgetting_sparsity,
        lacking=claim_07_lacking,
    ),
    ClaimRule(
        8,
        "Trajectory likelihoods under student and teacher move with λ as intended.",
        f"a λ-spectrum (≥ 3 λ) with {S_PROB} and {T_PROB}",
        claim_08_applicable,
        claim_08_lambda_likelihoods,
    ),
]
