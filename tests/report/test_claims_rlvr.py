"""Claims 11 and 20 on synthetic RLVR tables: planted effects, null data, degenerate data."""

import itertools

import numpy as np
import pandas as pd
import pytest

from distillscope.report.claimkit import Scoring
from distillscope.report.claims_rlvr import (
    claim_11_does_not_survive,
    claim_11_lacking,
)
from distillscope.report.scorecard import score_claims


def table(gap_before, gap_after, change=10.0, sd=1.0, seeds=4, harder=None, seed=0):
    """RLVR rows of a 2 × 2 × 2 grid (rollout × KL × LR); accuracies in [0, 1]. OnPD sits
    ``gap_*`` pp above OffPD before/after; every run gains ``change`` pp on average."""
    rng = np.random.default_rng(seed)
    rows = []
    cells = itertools.product(["student", "teacher"], ["forward_kl", "reverse_kl"], [1e-4, 3e-4])
    for (policy, kind, lr), s in itertools.product(cells, range(seeds)):
        on = policy == "student"
        before = 30.0 + (gap_before if on else 0.0) + rng.normal(0, sd)
        after = 30.0 + change + (gap_after if on else 0.0) + rng.normal(0, sd)
        row = {
            "run_id": f"rlvr_{policy}_{kind}_{lr}_{s}",
            "experiment": "rlvr",
            "status": "done",
            "parent_run": f"main_{policy}_{kind}_{lr}_{s}",
            "rollout.policy": policy,
            "objective.kind": kind,
            "optim.lr": lr,
            "seed": s,
            "rlvr/eval_accuracy_before": before / 100,
            "rlvr/eval_accuracy": after / 100,
        }
        if harder is not None:
            hb, ha = harder
            row["rlvr/harder_accuracy_before"] = (10 + (hb if on else 0) + rng.normal(0, sd)) / 100
            row["rlvr/harder_accuracy"] = (12 + (ha if on else 0) + rng.normal(0, sd)) / 100
        rows.append(row)
    return pd.DataFrame(rows)


def verdict_11(df):
    return claim_11_does_not_survive(Scoring(df)).verdict


def test_claim_11_supported_when_the_advantage_fades():
    assert verdict_11(table(gap_before=10, gap_after=0)) == "supported"


def test_claim_11_contradicted_when_the_advantage_survives_on_every_measure():
    df = table(gap_before=10, gap_after=10, harder=(8, 8))
    assert verdict_11(df) == "contradicted"


def test_claim_11_needs_every_measure():
    # the RLVR task's gap fades, the harder variant's survives: not supported
    v = verdict_11(table(gap_before=10, gap_after=0, harder=(8, 8)))
    assert v == "inconclusive"


def test_claim_11_has_no_power_when_rlvr_moved_nothing():
    v = claim_11_does_not_survive(Scoring(table(gap_before=10, gap_after=0, change=0.0)))
    assert v.verdict == "inconclusive" and "no power" in v.evidence


def test_claim_11_is_rarely_decided_on_noise_alone():
    # null: no gap before or after; RLVR moves every run. Only "supported" is a true verdict
    # (the gap after is within ±2 pp), never "contradicted".
    verdicts = [verdict_11(table(0, 0, sd=3.0, seeds=3, seed=k)) for k in range(40)]
    assert verdicts.count("contradicted") == 0


def test_claim_11_lacks_rlvr_runs_and_both_rollouts():
    assert claim_11_lacking(Scoring(table(0, 0).iloc[:0])) == ["RLVR runs (a study's rlvr stage)"]
    only_on = table(0, 0)
    only_on = only_on[only_on["rollout.policy"] == "student"]
    assert "both OnPD and OffPD" in claim_11_lacking(Scoring(only_on))[0]


def verdict_20(df):
    (result,) = score_claims(df, None, claims=[20])
    return result


@pytest.mark.parametrize("gap_after,expect", [(-10, "supported"), (10, "contradicted")])
def test_claim_20_reads_the_best_configuration_per_rollout(gap_after, expect):
    v = verdict_20(table(gap_before=0, gap_after=gap_after))
    assert v.verdict == expect
    assert "before RLVR" in v.evidence


def test_claim_20_inconclusive_on_noise_and_not_tested_without_rlvr():
    verdicts = [verdict_20(table(0, 0, sd=3.0, seeds=3, seed=k)).verdict for k in range(40)]
    assert verdicts.count("supported") <= 3  # best-of-4 against best-of-4 under the null
    assert verdict_20(table(0, 0).iloc[:0]).verdict == "not tested"


def test_the_scorecard_scores_11_and_20_from_a_table():
    results = {c.id: c for c in score_claims(table(gap_before=10, gap_after=0), None)}
    assert results[11].verdict == "supported"
    assert results[20].verdict in ("inconclusive", "contradicted", "supported")
    assert results[11].verdict not in ("not implemented", "error")


def test_the_calibration_plants_both_rlvr_claims_and_finds_few_false_verdicts():
    from distillscope.report.calibrate import calibrate

    cal = calibrate(table(0, 0, sd=3.0, seeds=3), draws=40, seed=0, claims=(11, 20))
    assert cal["power"]["11"] >= 0.8 and cal["power"]["20"] >= 0.8
    assert cal["false_rate"]["11"] <= 0.05 and cal["false_rate"]["20"] <= 0.05
    # claim 11 has a margin case: OnPD ahead by exactly 2 pp before and after RLVR
    assert "11" in cal["rates"]["margin"]
