"""Claim 24 (reverse KL at the high LR collapses) on synthetic λ-spectrum tables, and the planted
world and margin cases of claims 6, 7 and 24 (claims 6–8 themselves: tests/scorecard/claims/)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from distillscope.scorecard import score_claims
from distillscope.scorecard.calibrate import calibrate, planned_table, simulate
from distillscope.scorecard.claims.c06_lambda_robustness import FORWARD_MARGIN_PP
from distillscope.scorecard.plants import all_margin_cases, planted_offsets
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


def _claims(rows: list[dict] | pd.DataFrame, claims=(24,)) -> dict:
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    return {r.id: r for r in score_claims(df, strict=True, claims=claims)}


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
    r = _claims(flat, (24,))[24]
    assert r.verdict == "inconclusive"
    # no collapse on either side ("0/n vs 0/n"): the design lacks power, it is not "near"
    assert "reverse KL 0/27, forward KL 0/27" in r.evidence, r.evidence
    assert r.reason.startswith("Δ collapse: lacks power (smallest effect the design decides: ")
    assert "near" not in r.reason
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
    cases = {c.name: c for c in all_margin_cases() if c.claim in (6, 7)}
    assert all(c.on_planted for c in cases.values()) and len(cases) == 3
    ramp = cases["forward KL's range over λ at the margin"].offsets(d)["eval/accuracy"]
    # claim 6 is judged over λ ∈ [−1, 1] at the low LR: the ramp spans exactly its margin there
    low = spectrum & (d["optim.lr"] == d.loc[spectrum, "optim.lr"].min()).to_numpy()
    judged = low & ~rev & (np.abs(lam) <= 1) & (d["rollout.policy"] == "spectrum").to_numpy()
    assert ramp[judged].max() - ramp[judged].min() == pytest.approx(FORWARD_MARGIN_PP / 100)
    assert not ramp[~judged].any()


@pytest.mark.slow
def test_calibration_of_claims_6_7_8_24_on_the_paper_spectrum(tmp_path):
    df = _paper_spectrum_at_both_lrs(tmp_path)
    cal = calibrate(df, draws=20, seed=0, claims=(6, 7, 8, 24))
    for c in ("6", "7", "8", "24"):
        assert cal["false_rate"][c] <= 0.05, (c, cal["rates"])
    assert cal["power"]["8"] >= 0.8 and cal["power"]["24"] >= 0.8
    assert set(cal["rates"]["margin"]) == {"6", "7"}
