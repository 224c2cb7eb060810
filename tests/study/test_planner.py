"""The planner: closed-form SEs and power (scorecard.power) against an independent calculation and
a simulation of one design, and the designs a study spec plans (study.planner)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from distillscope.results.stats import ALPHA
from distillscope.scorecard.claim_spec import ABOVE, POOLED, WITHIN, Part
from distillscope.scorecard.noise import Components
from distillscope.scorecard.power import (
    CONTRAST,
    LEVEL,
    Profile,
    contrast_se,
    level_se,
    plan_part,
    power_at,
    seeds_to_decide,
)
from distillscope.study.planner import designs
from distillscope.study.sequential import with_policy
from distillscope.study.spec import StudySpec, UntilDecided

#: Accuracy: a 2 pp shared seed effect, 1 pp training noise, 200 items at p = 0.7, 4 samples.
C = Components(0.02, 0.01, 200, 4, None, "accuracy", 1, 0.7)
EFFECT = Part("Δ", "paired contrast", lambda ev: [], POOLED, ABOVE, 5.0, "test", 7.0)


def test_the_closed_forms_are_the_variance_components_over_the_seeds():
    eval_var = 0.7 * 0.3 / 4 / 200  # p(1 − p) / n / I
    assert contrast_se(C, 5, None, None) == pytest.approx(math.sqrt(2 * (1e-4 + eval_var) / 5))
    assert level_se(C, 5, None, None) == pytest.approx(
        math.sqrt((2 * (1e-4 + eval_var) + 4e-4) / 5)
    )
    # 16 samples per item quarter the evaluation variance; more items divide it
    assert contrast_se(C, 5, None, 16) == pytest.approx(math.sqrt(2 * (1e-4 + eval_var / 4) / 5))
    assert contrast_se(C, 5, 400, None) == pytest.approx(math.sqrt(2 * (1e-4 + eval_var / 2) / 5))


def test_power_against_the_noncentral_t_of_a_paired_test():
    """The planner's power F_ν(d/SE − t₁₋α) against the exact power of a paired one-sided t-test
    (noncentral t, δ = d/SE). The shifted-t approximation (the one ``Estimate.reach`` inverts)
    errs by at most 0.036 at ν = 9, 0.016 at 19, 0.008 at 39 over δ ∈ [0, 8] (≈ 0.33 / ν,
    computed with scipy): tolerance 0.4 / ν; as ν → ∞ it is the normal formula
    Φ(d/SE − z₁₋α)."""
    for seeds in (10, 20, 40):
        se = contrast_se(C, seeds, None, None) * 100
        exact = stats.nct.sf(stats.t.ppf(1 - ALPHA, seeds - 1), seeds - 1, 2.0 / se)
        assert power_at(EFFECT, se, seeds - 1) == pytest.approx(exact, abs=0.4 / (seeds - 1))
    normal = stats.norm.cdf(2.0 / 0.8 - stats.norm.ppf(1 - ALPHA))
    assert power_at(EFFECT, 0.8, 1e7) == pytest.approx(normal, rel=1e-5)
    band = Part("|Δ|", "band", lambda ev: [], POOLED, WITHIN, 5.0, "test", 0.0)
    one = stats.t.cdf(5.0 / 2.0 - stats.t.ppf(1 - ALPHA, 9), 9)
    assert power_at(band, 2.0, 9) == pytest.approx(2 * one - 1)  # TOST around a published 0


def test_power_and_smallest_effect_of_a_design():
    prof = Profile(CONTRAST, "eval/accuracy")
    plan = plan_part(EFFECT, prof, C, 6)
    assert plan.se == pytest.approx(contrast_se(C, 6, None, None) * 100)
    reach = (stats.t.ppf(1 - ALPHA, 5) + stats.t.ppf(0.8, 5)) * plan.se
    assert plan.smallest == f"Δ beyond {5.0 + reach:+.1f} pp"
    n = seeds_to_decide(EFFECT, prof, C, None)
    assert plan_part(EFFECT, prof, C, n).power >= 0.8 > plan_part(EFFECT, prof, C, n - 1).power
    assert seeds_to_decide(EFFECT, prof, C, 16) < n  # more samples, fewer seeds
    assert plan_part(EFFECT, Profile(LEVEL, "eval/accuracy"), C, 6).se > plan.se


def test_power_against_a_simulation_of_the_design():
    """2 cells × 10 seeds, the seed effect shared by both cells, per-run training noise,
    per-item binomial evaluation (200 items × 4 samples at p = 0.70 and 0.77): the paired
    test's support rate at the 5 pp margin over 4,000 studies against the planner's power
    (tolerance: 3 Monte Carlo SEs + the approximation's 0.4 / ν). Measured: 57.3% simulated,
    53.4% planned (the exact noncentral-t power of the closed-form SE: 55.4%)."""
    seeds, sims = 10, 4000
    gen = np.random.default_rng(7)
    shared = gen.normal(0, C.seed_sd, (sims, seeds, 1))
    p_cell = np.array([0.70, 0.77])  # the effect: +7 pp, 2 pp beyond the margin
    truth = np.clip(p_cell + shared + gen.normal(0, C.train_sd, (sims, seeds, 2)), 0, 1)
    hits = gen.binomial(4, truth[..., None], (sims, seeds, 2, 200))
    acc = hits.mean(axis=(-1)) / 4  # (sims, seeds, cells)
    d = (acc[..., 1] - acc[..., 0]) * 100
    lower = d.mean(1) - stats.t.ppf(1 - ALPHA, seeds - 1) * d.std(1, ddof=1) / math.sqrt(seeds)
    rate = float((lower > 5.0).mean())
    power = plan_part(EFFECT, Profile(CONTRAST, "eval/accuracy"), C, seeds).power
    # the simulation's per-item p varies with the run's truth; its mean eval var is ≈ C's
    tolerance = 3 * math.sqrt(power * (1 - power) / sims) + 0.4 / (seeds - 1)
    assert 0.2 < power < 0.8 and rate == pytest.approx(power, abs=tolerance)


def test_designs_count_seeds_runs_and_evaluation_per_experiment():
    spec = StudySpec.model_validate(
        {"name": "t", "base": {"eval": {"samples_per_item": 8, "items": 50}},
         "experiments": [{"name": "main", "axes": {"objective.kind": ["forward_kl", "reverse_kl"],
                                                   "seed": [42, 43, 44]}}],
         "rlvr": {"from": "main"}}
    )  # fmt: skip
    d = designs(spec)
    assert (d["main"].seeds, d["main"].runs, d["rlvr"].runs) == (3, 6, 6)
    assert d["main"].counts["accuracy"] == (50, 8)
    grown = with_policy(spec, UntilDecided(looks=[{"main": [45]}]))
    assert designs(grown)["main"].seeds == 4
