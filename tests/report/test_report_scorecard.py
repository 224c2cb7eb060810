"""Scorecard rules on synthetic results tables whose verdicts are known by construction."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from distillscope.report import RULES, score_claims
from distillscope.report.claimkit import VERDICTS, Pair, counts, sign
from distillscope.report.scorecard import add_trajectory_features, trajectory_features


def _verdicts(df: pd.DataFrame, study_dir=None) -> dict[int, str]:
    return {r.id: r.verdict for r in score_claims(df, study_dir)}


def _main(synth, acc: dict, **kw) -> pd.DataFrame:
    return pd.DataFrame(synth.grid("main", synth.main_cells(acc, **kw)))


def test_every_claim_scored_once_with_rule_text(synth):
    results = score_claims(_main(synth, synth.PAPER_ACC))
    assert [r.id for r in results] == list(range(1, 19))
    assert [r.id for r in RULES] == list(range(1, 19))
    for r in results:
        assert r.verdict in (*VERDICTS, "not tested")
        assert r.evidence
        if r.verdict != "not tested":
            assert "⇒" in r.rule or "Supported" in r.rule  # thresholds are stated


def test_paper_picture_on_the_main_grid(synth):
    v = _verdicts(_main(synth, synth.PAPER_ACC))
    assert v[1] == "supported"  # best cells 72 vs 72; OnPD better in only half the cells
    assert v[2] == "supported"  # forward 72% everywhere, reverse 35–72%
    assert v[3] == "supported"  # low LR −1 pp, high LR −12 pp
    assert v[4] == "supported"  # 88% vs 55% sparse, OffPD = OnPD
    assert v[9] == "supported"  # forward KL: pass@10 − pass@1 = 17 pp vs 7 pp
    assert v[10] == "supported"  # OnPD +12 pp harder pass@10 under both directions
    assert v[13] == "supported"  # 95% of steps clipped, reverse-KL norms 3× larger
    for claim in (5, 6, 7, 8, 11, 12, 14, 15, 16, 17, 18):
        assert v[claim] == "not tested"  # no LR sweep, no λ axis, no ablations


def test_reverse_beats_forward_everywhere_contradicts_claim_2(synth):
    acc = {k: (0.40 if k[1] == "forward_kl" else 0.70) for k in synth.PAPER_ACC}
    assert _verdicts(_main(synth, acc))[2] == "contradicted"


def test_consistent_rollout_gain_contradicts_claim_1(synth):
    acc = {k: (0.72 if k[0] == "student" else 0.60) for k in synth.PAPER_ACC}
    assert _verdicts(_main(synth, acc))[1] == "contradicted"


def test_no_lr_effect_contradicts_claims_3_and_4(synth):
    v = _verdicts(
        _main(
            synth,
            synth.PAPER_ACC,
            forget={synth.LOW: -1.0, synth.HIGH: -1.5},
            sparsity={synth.LOW: 0.88, synth.HIGH: 0.87},
        )
    )
    assert v[3] == "contradicted"
    assert v[4] == "contradicted"


def test_noise_makes_small_lr_effect_inconclusive(synth):
    # High LR forgets 6 pp more, but seeds spread ±8 pp: 2 × SEM ≈ 13 pp > 6 pp.
    rows = synth.grid(
        "main",
        synth.main_cells(synth.PAPER_ACC, forget={synth.LOW: -1.0, synth.HIGH: -7.0}),
        spread=0.08,
    )
    assert _verdicts(pd.DataFrame(rows))[3] == "inconclusive"


def test_missing_lambda_axis_is_not_tested_with_needs(synth):
    df = _main(synth, synth.PAPER_ACC).drop(columns=["rollout.lam"])
    result = {r.id: r for r in score_claims(df)}[6]
    assert result.verdict == "not tested"
    assert "λ" in result.evidence


def test_only_finished_runs_count(synth):
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC))
    # A failed OffPD run with absurd numbers must not change anything.
    rows.append(
        synth.run_row(
            "main",
            "teacher",
            "forward_kl",
            synth.LOW,
            99,
            status="failed",
            **{"eval/accuracy": 0.0},
        )
    )
    assert _verdicts(pd.DataFrame(rows))[1] == "supported"


def test_full_paper_study_supports_every_testable_claim(synth, tmp_path):
    rows, metrics = synth.full_rows()
    root = synth.write_study(tmp_path / "study", rows, metrics=metrics)
    v = _verdicts(pd.read_parquet(root / "results.parquet"), root)
    assert {k for k, x in v.items() if x == "not tested"} == {11, 18}
    assert all(x == "supported" for k, x in v.items() if k not in (11, 18)), v


def test_spectrum_reverse_kl_prefering_negative_lambda_contradicts_claim_6(synth):
    rows = []
    for kind in ("forward_kl", "reverse_kl"):
        for lam in (-1.0, 0.0, 1.0):
            acc = 0.72 if kind == "forward_kl" else 0.55 - 0.15 * lam
            for seed, k in synth.SEEDS.items():
                vals = {"lam": lam, "eval/accuracy": acc + 0.01 * k}
                rows.append(synth.run_row("spectrum", "spectrum", kind, synth.LOW, seed, **vals))
    assert _verdicts(pd.DataFrame(rows))[6] == "contradicted"


def test_claim_14_counts_diverged_runs_as_deterioration(synth):
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC))
    no_clip = {("student", "forward_kl", synth.LOW): {"eval/accuracy": 0.72}}
    rows += synth.grid("no_clip", no_clip, grad_clip=math.nan)
    rows += synth.grid(
        "no_clip",
        {("student", "reverse_kl", synth.LOW): {"eval/accuracy": 0.72}},
        grad_clip=math.nan,
    )
    df = pd.DataFrame(rows)
    assert _verdicts(df)[14] == "contradicted"  # reverse KL unharmed without clipping
    rows.append(
        synth.run_row(
            "no_clip",
            "teacher",
            "reverse_kl",
            synth.LOW,
            42,
            grad_clip=math.nan,
            status="diverged",
            reason="inf grad norm",
        )
    )
    rows += synth.grid(
        "no_clip",
        {("teacher", "reverse_kl", synth.LOW): {"eval/accuracy": 0.50}},
        grad_clip=math.nan,
    )
    assert _verdicts(pd.DataFrame(rows))[14] == "supported"


def test_claim_17_fewer_prompts_winning_contradicts(synth):
    rows = []
    for p, g, acc in ((32, 1, 0.55), (8, 4, 0.70)):
        for seed, k in synth.SEEDS.items():
            vals = {"rollout.prompts_per_step": p, "rollout.rollouts_per_prompt": g}
            vals["eval/accuracy"] = acc + 0.01 * k
            rows.append(
                synth.run_row(
                    "diversity", "student", "forward_kl", synth.LOW, seed, tag=f"{p}", **vals
                )
            )
    assert _verdicts(pd.DataFrame(rows))[17] == "contradicted"


def test_trajectory_features_flag_length_growth_and_falling_reward(synth):
    grows = pd.DataFrame(synth.curve(40, 42, grow=1.5, fall=0.2))
    ratio, drop = trajectory_features(grows)
    assert ratio > 1.5 and drop > 5.0
    ratio, drop = trajectory_features(pd.DataFrame(synth.curve(40, 42)))
    assert ratio == pytest.approx(1.0) and drop == pytest.approx(0.0, abs=1e-9)
    assert all(math.isnan(x) for x in trajectory_features(pd.DataFrame()))


def test_claim_16_needs_metrics_from_the_study_dir(synth):
    rows = [
        synth.run_row("opd", "student", "opd", synth.LOW, s, regulation=r, tag=r)
        for r in ("none", "hard_clip")
        for s in (42, 43)
    ]
    df = pd.DataFrame(rows)
    assert _verdicts(df)[16] == "not tested"  # without study_dir, no trajectories
    assert add_trajectory_features(df, __import__("pathlib").Path("/nonexistent")).shape[0] == 4


def test_significance_helpers():
    p = Pair("x", 72.0, 1.0, 66.0, 1.0)  # Δ 6, combined SEM √2
    assert counts(p.diff, p.sem, 5.0)
    assert not counts(p.diff, p.sem, 7.0)
    assert sign(Pair("x", 60.0, 4.0, 66.0, 4.0), 5.0) == 0  # Δ −6 < 2 × 5.66
    assert sign(Pair("x", 60.0, math.nan, 66.0, math.nan), 5.0) == -1  # one seed: effect only


@pytest.mark.parametrize("variant", ["no_experiment", "all_nan_accuracy", "list_axis", "one_seed"])
def test_odd_tables_are_scored_without_errors(synth, variant):
    df = _main(synth, synth.PAPER_ACC)
    df = {
        "no_experiment": lambda: df.drop(columns=["experiment"]),
        "all_nan_accuracy": lambda: df.assign(**{"eval/accuracy": math.nan}),
        "list_axis": lambda: df.assign(**{"task.ops": [["+", "-"]] * len(df)}),
        "one_seed": lambda: df[df["seed"] == 42],
    }[variant]()
    results = score_claims(df)
    assert not [r.id for r in results if "could not be scored" in r.evidence]
    verdicts = {r.id: r.verdict for r in results}
    assert verdicts[1] == ("not tested" if variant == "all_nan_accuracy" else "supported")
