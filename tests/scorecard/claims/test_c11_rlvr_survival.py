"""Claims 11 and 20 on synthetic RLVR tables: each route of claim 11, its premise, both sides,
claim 20's order, and the calibration of both (their planted world is claim 11's)."""

import itertools

import numpy as np
import pandas as pd
import pytest

from distillscope.scorecard.calibrate import calibrate
from distillscope.scorecard.runner import score_claims


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


def result(df, claim=11):
    (r,) = score_claims(df, None, strict=True, claims=[claim])
    return r


@pytest.mark.parametrize(
    "gap_before,gap_after,route",
    [(10, 0, "gap after [RLVR task]"), (10, -10, "gap after [RLVR task]"), (20, 10, "change")],
)
def test_claim_11_is_supported_by_each_route(gap_before, gap_after, route):
    # within ±2 pp; reversed; 10 pp smaller than before (the gap after still 10 pp)
    r = result(table(gap_before, gap_after))
    assert r.verdict == "supported", r.evidence
    assert route in r.evidence


def test_claim_11_is_contradicted_when_every_route_is_on_every_measure():
    r = result(table(gap_before=10, gap_after=10, harder=(8, 8)))
    assert r.verdict == "contradicted", r.evidence
    assert "harder variant" in r.evidence


def test_claim_11_needs_every_measure():
    # the RLVR task's gap fades, the harder variant's survives: contradicted (every measure)
    r = result(table(gap_before=10, gap_after=0, harder=(8, 8)))
    assert r.verdict == "contradicted", r.evidence


def test_claim_11_without_an_advantage_before_rlvr_is_not_applicable():
    r = result(table(gap_before=0, gap_after=0))
    assert r.verdict == "not applicable", r.evidence
    assert "gap before" in r.reason


def test_claim_11_nan_harder_metric_and_one_policy_are_not_tested():
    df = table(gap_before=10, gap_after=0, harder=(8, 0))
    df.loc[df.index[:2], "rlvr/harder_accuracy"] = np.nan
    r = result(df)
    assert r.verdict == "not tested" and "rlvr/harder_accuracy" in r.reason, r.reason
    only_on = table(10, 0)
    r = result(only_on[only_on["rollout.policy"] == "student"])
    assert r.verdict == "not tested" and "both OnPD and OffPD" in r.reason


def test_claim_11_is_rarely_decided_on_noise_alone():
    # no gap before: the premise is absent (or undecided), never a decided verdict
    verdicts = [result(table(0, 0, sd=3.0, seeds=3, seed=k)).verdict for k in range(20)]
    assert not {"supported", "contradicted"} & set(verdicts)


@pytest.mark.parametrize("gap_after,expect", [(-10, "supported"), (10, "contradicted")])
def test_claim_20_reads_the_best_configuration_per_rollout(gap_after, expect):
    v = result(table(gap_before=0, gap_after=gap_after), claim=20)
    assert v.verdict == expect
    assert "before RLVR" in v.evidence


def test_claim_20_inconclusive_on_noise_and_not_tested_without_rlvr():
    verdicts = [result(table(0, 0, sd=3.0, seeds=3, seed=k), 20).verdict for k in range(40)]
    assert verdicts.count("supported") <= 3  # best-of-4 against best-of-4 under the null
    assert result(table(0, 0).iloc[:0], 20).verdict == "not tested"


def test_the_calibration_plants_both_rlvr_claims_and_finds_few_false_verdicts():
    cal = calibrate(table(0, 0, sd=3.0, seeds=3), draws=40, seed=0, claims=(11, 20))
    # claim 20 picks the best of 4 OffPD and of 4 OnPD cells: its bounds are Bonferroni over
    # the 16 pairs (docs/method.md §9 "What an interval covers"), which costs power here: about
    # half, less 3 binomial SEs of a rate over 40 draws
    assert cal["power"]["11"] >= 0.8 and cal["power"]["20"] >= 0.5 - 3 * (0.25 / 40) ** 0.5
    assert cal["false_rate"]["11"] <= 0.05 and cal["false_rate"]["20"] <= 0.05
    # claim 11's margin case: every route at its margin (after +2 pp, 2 pp smaller than before)
    assert cal["rates"]["margin"]["11"].get("supported", 0.0) <= 0.05
