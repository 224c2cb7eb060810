"""Claims 6–8 (the λ-spectrum, judged at each LR) and 24 (reverse KL at the high LR collapses),
on synthetic tables whose verdicts are known by construction: the published picture, null and
degenerate tables, missing measurements and the adversarial tables of the issue."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from distillscope.report import score_claims
from distillscope.report.calibrate import calibrate, planned_table, simulate
from distillscope.report.claims_spectrum import (
    CLAIM_06_FORWARD_MARGIN_PP,
    CLAIM_07_MARGIN_PP,
    lambda_range,
    rho_beyond,
    rho_tail,
)
from distillscope.report.matching import LAMBDA
from distillscope.report.plants import MARGIN_CASES, planted_offsets
from distillscope.report.stats import spearman, t_quantile
from distillscope.study.spec import expand, load_spec, preset_path
from distillscope.study.table import plan_row

LAMS = (-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0)
KINDS = ("forward_kl", "reverse_kl")
Cell = Callable[[str, float, float], float]  # (KL direction, λ, LR) → a cell value


def _published_acc(kind: str, lam: float, lr: float) -> float:
    """Forward KL 72% at every λ; reverse KL 35% → 72% from λ = −2 to +2."""
    return 0.72 if kind == "forward_kl" else 0.535 + 0.0925 * lam


def _spectrum(
    synth,
    acc: Cell = _published_acc,
    lrs: tuple[float, ...] = (1e-5,),
    spread: float = 0.01,
    **metrics: Cell,
) -> list[dict]:
    """Spectrum runs: KL × λ × ``lrs`` × 3 seeds (offsets −spread, 0, +spread on fractions,
    50 × spread on forgetting_pp), plus the baseline row; ``metrics`` by column name with dots
    for slashes ("eval.forgetting_pp")."""
    rows = []
    for lr in lrs:
        for kind in KINDS:
            for lam in LAMS:
                for seed, k in synth.SEEDS.items():
                    vals = {"lam": lam, "eval/accuracy": acc(kind, lam, lr) + k * spread}
                    for name, fn in metrics.items():
                        m = name.replace(".", "/", 1)
                        step = 50 * spread if m == "eval/forgetting_pp" else spread / 5
                        vals[m] = fn(kind, lam, lr) + k * step
                    rows.append(synth.run_row("spectrum", "spectrum", kind, lr, seed, **vals))
    return [*rows, synth.baseline_row()]


def _flat(value: float) -> Cell:
    return lambda kind, lam, lr: value


def _probs(student: Cell | None = None, teacher: Cell | None = None) -> dict[str, Cell]:
    return {
        "rollout.student_token_prob_mean": student or (lambda k, lam, lr: 0.5 + 0.1 * lam),
        "rollout.teacher_token_prob_mean": teacher or (lambda k, lam, lr: 0.6 - 0.08 * lam),
    }


def _claims(rows: list[dict] | pd.DataFrame, claims=(6, 7, 8, 24)) -> dict:
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    return {r.id: r for r in score_claims(df, strict=True, claims=claims)}


# ---------------------------------------------------------------------------------------------
# The range over λ and its bounds


def test_range_bounds_are_pairwise_t_bounds_iut_above_bonferroni_below():
    cells = pd.DataFrame(
        {LAMBDA: [-1.0, 0.0, 1.0], "mean": [0.0, 2.0, 4.0], "sem": [1 / math.sqrt(3)] * 3}
    ).assign(runs=3)
    r = lambda_range(cells, 0.025, 0.025)
    se = math.sqrt(2 / 3)  # pooled s = 1 on 6 degrees of freedom, 3 seeds per cell
    assert r.value == 4.0 and r.best == 1.0
    assert r.upper == pytest.approx(4.0 + t_quantile(0.975, 6) * se)
    assert r.lower == pytest.approx(4.0 - t_quantile(1 - 0.025 / 3, 6) * se)
    one_seed = cells.assign(sem=math.nan, runs=1)
    assert math.isnan(lambda_range(one_seed, 0.025, 0.025).upper)  # no seed variance: no bound


# ---------------------------------------------------------------------------------------------
# Claim 6


def test_claim_6_published_picture_at_both_lrs_is_supported(synth):
    r = _claims(_spectrum(synth, lrs=(synth.LOW, synth.HIGH)), (6,))[6]
    assert r.verdict == "supported", r.evidence
    assert "1e-05 (low)" in r.evidence and "5e-05 (high)" in r.evidence
    assert r.headline.count("forward range 0.0 pp") == 2 and "reverse slope +9." in r.headline


def test_claim_6_one_lr_spectrum_is_judged_and_names_its_lr(synth):
    r = _claims(_spectrum(synth), (6,))[6]
    assert r.verdict == "supported"
    assert r.headline.startswith("LR 1e-05 (low): forward range 0.0 pp [≤ ")


def test_claim_6_forward_collapse_at_lambda_zero_is_not_supported(synth):
    # the adversarial table of the issue: forward KL 45 pp down at λ = 0 only; λ > 0 and λ < 0
    # still have equal means, which the old rule (λ > 0 vs λ < 0) took for robustness
    def acc(kind, lam, lr):
        return _published_acc(kind, lam, lr) - (0.45 if kind == "forward_kl" and lam == 0 else 0)

    r = _claims(_spectrum(synth, acc), (6,))[6]
    assert r.verdict == "contradicted"
    assert "forward KL range 45.0 pp" in r.evidence


def test_claim_6_fails_when_forward_is_robust_at_one_lr_only(synth):
    def acc(kind, lam, lr):
        drop = 0.04 * (lam + 2) if kind == "forward_kl" and lr == synth.HIGH else 0.0
        return _published_acc(kind, lam, lr) - drop  # 16 pp range at the high LR

    r = _claims(_spectrum(synth, acc, lrs=(synth.LOW, synth.HIGH)), (6,))[6]
    assert r.verdict == "contradicted", r.evidence


def test_claim_6_reverse_range_route_needs_its_best_cell_at_positive_lambda(synth):
    def peak(at: float) -> Cell:
        # reverse KL flat at 50% with one cell 30 pp up: no trend, a large range
        return lambda k, lam, lr: 0.72 if k == "forward_kl" else 0.50 + 0.3 * (lam == at)

    assert _claims(_spectrum(synth, peak(1.0)), (6,))[6].verdict == "supported"
    assert _claims(_spectrum(synth, peak(-1.0)), (6,))[6].verdict == "inconclusive"


def test_claim_6_null_and_degenerate_tables_decide_nothing(synth):
    null = _claims(_spectrum(synth, _flat(0.6)), (6,))[6]
    assert null.verdict == "inconclusive"  # forward flat, but reverse shows no preference
    df = pd.DataFrame(_spectrum(synth))
    for fill in (0.0, 0.5):
        r = _claims(df.assign(**{"eval/accuracy": fill}), (6,))[6]
        assert r.verdict == "inconclusive" and "no seed variance" in r.evidence


def test_claim_6_without_seed_variance_has_no_forward_bound(synth):
    df = pd.DataFrame(_spectrum(synth))
    one = df[(df["seed"] == 42) | df["seed"].isna()]
    r = _claims(one, (6,))[6]
    assert r.verdict == "inconclusive" and "[no seed variance: no bound]" in r.evidence


def test_claim_6_needs_both_directions_and_lambda(synth):
    df = pd.DataFrame(_spectrum(synth))
    r = _claims(df[df["objective.kind"] != "reverse_kl"], (6,))[6]
    assert r.verdict == "not tested" and "both forward and reverse KL" in r.evidence
    r = _claims(df.drop(columns=["rollout.lam"]), (6,))[6]
    assert r.verdict == "not tested" and "λ" in r.evidence


def test_claim_6_students_that_did_not_learn_give_no_power(synth):
    df = pd.DataFrame(_spectrum(synth))
    df.loc[df["experiment"] == "baseline", "eval/accuracy"] = 0.72
    r = _claims(df, (6,))[6]
    assert r.verdict == "inconclusive" and r.evidence.startswith("no power")


# ---------------------------------------------------------------------------------------------
# Claim 7


def _forget(lr_effect: float = 11.0, lam_effect: float = 0.0) -> Cell:
    return lambda k, lam, lr: -1.0 - lr_effect * (lr == 5e-5) + lam_effect * (lam > 0)


def _sparse(lr_effect: float = 0.33) -> Cell:
    return lambda k, lam, lr: 0.88 - lr_effect * (lr == 5e-5)


def _both(**kw) -> dict[str, Cell]:
    return {"eval.forgetting_pp": _forget(**kw), "eval.sparsity_bf16_tau1e-06": _sparse()}


def test_claim_7_flat_over_lambda_with_a_large_lr_effect_is_supported(synth):
    rows = _spectrum(synth, lrs=(synth.LOW, synth.HIGH), **_both())
    r = _claims(rows, (7,))[7]
    assert r.verdict == "supported", r.evidence
    assert "LR effect on eval/forgetting_pp (λ-spectrum) -11.0 pp" in r.evidence
    assert r.headline.startswith("widest λ range 0.0 pp [≤ ")


def test_claim_7_takes_the_lr_effect_from_the_main_grid_for_a_one_lr_spectrum(synth):
    rows = _spectrum(synth, **_both()) + synth.grid("main", synth.main_cells(synth.PAPER_ACC))
    r = _claims(rows, (7,))[7]
    assert r.verdict == "supported", r.evidence
    assert "(main grid)" in r.evidence


@pytest.mark.parametrize(
    "metrics, lacks",
    [
        ({"eval.sparsity_bf16_tau1e-06": _sparse()}, "lacks eval/forgetting_pp of the λ-spectrum"),
        ({"eval.forgetting_pp": _forget()}, "lacks bf16 sparsity (τ = 1e-6) of the λ-spectrum"),
    ],
)
def test_claim_7_needs_both_measurements(synth, metrics, lacks):
    r = _claims(_spectrum(synth, lrs=(synth.LOW, synth.HIGH), **metrics), (7,))[7]
    assert r.verdict == "not tested" and lacks in r.evidence


def test_claim_7_needs_an_lr_contrast_and_an_lr_effect_larger_than_its_margin(synth):
    r = _claims(_spectrum(synth, **_both()), (7,))[7]  # one LR, no main grid
    assert r.verdict == "not tested"
    assert "lacks an LR contrast of eval/forgetting_pp" in r.evidence
    small = {**_both(lr_effect=1.0), "eval.sparsity_bf16_tau1e-06": _sparse(0.01)}
    r = _claims(_spectrum(synth, lrs=(synth.LOW, synth.HIGH), **small), (7,))[7]
    assert r.verdict == "inconclusive"
    assert f"is not > {CLAIM_07_MARGIN_PP:g} pp beyond uncertainty" in r.evidence


def test_claim_7_lambda_moving_forgetting_contradicts(synth):
    rows = _spectrum(synth, lrs=(synth.LOW, synth.HIGH), **_both(lam_effect=10.0))
    assert _claims(rows, (7,))[7].verdict == "contradicted"


def test_claim_7_null_and_degenerate_tables_decide_nothing(synth):
    null = {"eval.forgetting_pp": _flat(-2.0), "eval.sparsity_bf16_tau1e-06": _flat(0.8)}
    rows = _spectrum(synth, lrs=(synth.LOW, synth.HIGH), spread=0.03, **null)
    assert _claims(rows, (7,))[7].verdict == "inconclusive"  # no LR effect to compare with
    df = pd.DataFrame(_spectrum(synth, lrs=(synth.LOW, synth.HIGH), **_both()))
    for fill in (0.0, 0.5):
        metrics = [c for c in df.columns if "/" in c]
        assert _claims(df.assign(**dict.fromkeys(metrics, fill)), (7,))[7].verdict not in (
            "supported",
            "contradicted",
        )


# ---------------------------------------------------------------------------------------------
# Claim 8


def test_claim_8_published_likelihoods_are_supported_at_each_lr(synth):
    r = _claims(_spectrum(synth, lrs=(synth.LOW, synth.HIGH), **_probs()), (8,))[8]
    assert r.verdict == "supported"
    assert r.headline == "weakest student ρ +1.00; weakest teacher ρ -1.00"
    assert r.evidence.count("5e-05 (high)") == 4  # student and teacher, both KL directions


def test_claim_8_needs_rank_correlation_of_at_least_0_8(synth):
    # rising, and significant by the t-test of ρ, but ρ < 0.8: not the published contrast
    rising = [0.30, 0.50, 0.35, 0.55, 0.40, 0.60, 0.45, 0.65, 0.70]
    rho = spearman(LAMS, rising)
    assert 0.6 < rho < 0.8
    student = dict(zip(LAMS, rising, strict=True))
    rows = _spectrum(synth, **_probs(student=lambda k, lam, lr: student[lam]))
    r = _claims(rows, (8,))[8]
    assert r.verdict == "inconclusive" and f"ρ = {rho:.2f}" in r.evidence


def test_claim_8_p_value_of_rho_is_exact_for_short_spectra():
    # n = 5: 1 of 5! orderings has ρ = 1, 4 have ρ = 0.9 and 3 have ρ = 0.8
    assert rho_tail(5, 1.0) == pytest.approx(1 / 120)
    assert rho_tail(5, 0.8) == pytest.approx(8 / 120)
    assert rho_tail(5, -1.0) == 1.0
    assert rho_beyond(0.8, 7, 0.025) == 1 and rho_beyond(0.8, 6, 0.025) == 0  # 2.9% at n = 6
    assert rho_beyond(-1.0, 5, 0.025) == -1 and rho_beyond(0.9, 5, 0.025) == 0


def test_claim_8_one_lr_flat_is_not_supported_and_reversed_teacher_contradicts(synth):
    flat_high = _probs(student=lambda k, lam, lr: 0.5 + 0.1 * lam * (lr == 1e-5))
    rows = _spectrum(synth, lrs=(synth.LOW, synth.HIGH), **flat_high)
    assert _claims(rows, (8,))[8].verdict == "inconclusive"
    rows = _spectrum(synth, **_probs(teacher=lambda k, lam, lr: 0.6 + 0.08 * lam))
    assert _claims(rows, (8,))[8].verdict == "contradicted"


def test_claim_8_missing_and_degenerate(synth):
    rows = _spectrum(synth, **{"rollout.student_token_prob_mean": _flat(0.5)})
    assert _claims(rows, (8,))[8].verdict == "not tested"
    rows = _spectrum(synth, spread=0.0, **_probs(_flat(0.5), _flat(0.5)))
    assert _claims(rows, (8,))[8].verdict == "inconclusive"  # ρ undefined without spread


# ---------------------------------------------------------------------------------------------
# Claim 24


def _unstable(synth, diverged: int = 0) -> list[dict]:
    """Reverse KL as forward KL at the low LR; at the high LR the first seed of each reverse-KL
    cell collapses to 40%, and ``diverged`` more reverse-KL runs diverge."""

    def acc(kind, lam, lr):
        return 0.72

    rows = _spectrum(synth, acc, lrs=(synth.LOW, synth.HIGH))
    for row in rows:
        high_rev = row["optim.lr"] == synth.HIGH and row["objective.kind"] == "reverse_kl"
        if high_rev and row["seed"] == 42:
            row["eval/accuracy"] = 0.40
    extra = []
    for i in range(diverged):
        run = synth.run_row(
            "spectrum", "spectrum", "reverse_kl", synth.HIGH, 90 + i, lam=1.0, status="diverged"
        )
        extra.append(run | {"reason": "step 40: loss nan", "eval/accuracy": math.nan})
    return rows + extra


def test_claim_24_reverse_collapsing_only_at_the_high_lr_is_supported(synth):
    r = _claims(_unstable(synth, diverged=2), (24,))[24]
    assert r.verdict == "supported", r.evidence
    assert "collapsed: reverse KL 11/29, forward KL 0/27 (2 diverged)" in r.evidence
    assert r.headline.startswith(f"Δ collapse +{100 * 11 / 29:.1f} pp")
    low = [row for row in _unstable(synth) if row["optim.lr"] != synth.HIGH]
    assert _claims(low, (24,))[24].verdict == "not tested"  # one LR: no high LR to judge


def test_claim_24_counts_diverged_main_grid_runs(synth):
    rows = synth.grid("main", synth.main_cells({k: 0.72 for k in synth.PAPER_ACC}))
    for row in rows:
        if row["optim.lr"] == synth.HIGH and row["objective.kind"] == "reverse_kl":
            row.update(status="diverged", reason="grad norm inf")
            row["eval/accuracy"] = math.nan
    r = _claims(rows, (24,))[24]
    assert r.verdict == "supported"  # 6 of 6 vs 0 of 6: p = 1 / C(12, 6)
    assert "reverse KL 6/6, forward KL 0/6 (6 diverged)" in r.evidence


def test_claim_24_null_degenerate_reversed_and_missing(synth):
    flat = _spectrum(synth, _flat(0.6), lrs=(synth.LOW, synth.HIGH), spread=0.03)
    assert _claims(flat, (24,))[24].verdict == "inconclusive"
    df = pd.DataFrame(flat)
    for fill in (0.0, 0.5):
        assert _claims(df.assign(**{"eval/accuracy": fill}), (24,))[24].verdict == "inconclusive"
    swapped = pd.DataFrame(_unstable(synth)).replace(
        {"objective.kind": {"forward_kl": "reverse_kl", "reverse_kl": "forward_kl"}}
    )
    assert _claims(swapped, (24,))[24].verdict == "contradicted"
    r = _claims(df.drop(columns=["eval/accuracy"]), (24,))[24]
    assert r.verdict == "not tested" and "lacks eval/accuracy of the high-LR runs" in r.evidence


# ---------------------------------------------------------------------------------------------
# Calibration


def _paper_spectrum_at_both_lrs(tmp_path) -> pd.DataFrame:
    """The paper preset's main grid and λ-spectrum, the spectrum run at both LRs."""
    text = preset_path("paper").read_text()
    lams = "      rollout.lam: [-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0]\n"
    if "spectrum" in text and lams in text and "optim.lr" not in text.split(lams)[1][:60]:
        text = text.replace(lams, lams + "      optim.lr: {low: 1.0e-4, high: 3.0e-4}\n")
    path = tmp_path / "paper.yaml"
    path.write_text(text)
    runs = [r for r in expand(load_spec(path)) if r.experiment in ("main", "spectrum")]
    return planned_table([plan_row(r) for r in runs])


def test_planted_effects_and_margin_cases_of_claims_6_7_24(tmp_path):
    df = _paper_spectrum_at_both_lrs(tmp_path)
    d = simulate(df, "null", seed=0)
    offsets = planted_offsets(d, {})
    spectrum = (d["experiment"] == "spectrum").to_numpy()
    high = spectrum & (d["optim.lr"] == d.loc[spectrum, "optim.lr"].max()).to_numpy()
    rev = (d["objective.kind"] == "reverse_kl").to_numpy()
    first = (d["seed"] == 42).to_numpy()
    # claim 24: the first seed of each reverse-KL cell at the high LR 20 pp further down
    lam = d["rollout.lam"].to_numpy()
    published = -0.37 + 0.0925 * (lam + 2)
    assert np.allclose(
        offsets["eval/accuracy"][high & rev & first], published[high & rev & first] - 0.2
    )
    assert np.allclose(
        offsets["eval/accuracy"][high & rev & ~first], published[high & rev & ~first]
    )
    cases = {c.name: c for c in MARGIN_CASES if c.claim in (6, 7)}
    assert all(c.on_planted for c in cases.values()) and len(cases) == 3
    ramp = cases["forward KL's range over λ at the margin"].offsets(d)["eval/accuracy"]
    fwd_high = high & ~rev
    assert ramp[fwd_high].max() - ramp[fwd_high].min() == pytest.approx(
        CLAIM_06_FORWARD_MARGIN_PP / 100
    )
    assert not ramp[~fwd_high].any()


@pytest.mark.slow
def test_calibration_of_claims_6_7_8_24_on_the_paper_spectrum(tmp_path):
    df = _paper_spectrum_at_both_lrs(tmp_path)
    cal = calibrate(df, draws=20, seed=0, claims=(6, 7, 8, 24))
    for c in ("6", "7", "8", "24"):
        assert cal["false_rate"][c] <= 0.05, (c, cal["rates"])
    assert cal["power"]["8"] >= 0.8 and cal["power"]["24"] >= 0.8
    assert set(cal["rates"]["margin"]) == {"6", "7"}
