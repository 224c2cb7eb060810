"""Guards of the calibration's bookkeeping, with scripted verdicts instead of the scorecard.

``draw`` and ``score_claims`` are replaced by stand-ins that hand out a fixed sequence of
verdicts per scenario and margin case, so the rates, the worst margin case, the false-verdict
rate (the worst scenario) and the power are known exactly and the test runs in well under a
second; the noise model and the typical values are checked on hand-made tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from distillscope.scorecard import calibrate as cal
from distillscope.scorecard.noise import default_sd
from distillscope.scorecard.plants import margin_cases
from distillscope.scorecard.runner import CLAIM_IDS

DRAWS = 10
# verdicts per (scenario, margin case name or None, claim), one per table in order
SCRIPT = {
    # claim 3 (specified, an effect claim): under the null "contradicted" is right
    ("null", None, 3): ["supported"] * 2 + ["contradicted"] + ["inconclusive"] * 7,  # false 0.2
    ("null", None, 7): ["supported"] * 4 + ["contradicted"] + ["inconclusive"] * 5,  # false 0.1
    ("zeros", None, 3): ["inconclusive"],
    ("zeros", None, 7): ["inconclusive"],
    ("constant", None, 3): ["inconclusive"],
    ("constant", None, 7): ["inconclusive"],
    # claim 3: its first case is the worst (the second never says "supported")
    ("margin", "low-LR change at the margin", 3): ["supported"] + ["contradicted"] * 9,
    ("margin", "rollout effect at the margin", 3): ["inconclusive"] * 10,
    # claim 7: its second case is the worst (the first never says "supported")
    ("margin", "forgetting range over λ at the margin", 7): ["x"] * 10,
    ("margin", "sparsity range over λ at the margin", 7): ["supported"] * 2 + ["x"] * 8,
    ("planted", None, 3): ["supported"] * 9 + ["inconclusive"],
    ("planted", None, 7): ["inconclusive"] * 10,  # never supported: power 0
}


@dataclass
class _Result:
    id: int
    verdict: str


@pytest.fixture
def scripted(monkeypatch):
    """Counts of tables per (scenario, case); ``counts["rng"]`` the first uniform each table's
    generator gave (the generator is the one seeded by ``calibrate``)."""
    counts: dict = {"rng": []}

    def draw(d, scenario, metrics, noise, typical, rng, case=None, effects=None, items_out=None):
        assert isinstance(d, pd.DataFrame) and metrics == ["eval/accuracy"]
        (got, levels), (want, want_levels) = effects, cal.effects_of(d, scenario, noise, case)
        assert levels == want_levels and got.keys() == want.keys()  # computed once per case
        assert all(np.array_equal(got[m], want[m]) for m in want)
        assert set(noise) == set(typical) == {"eval/accuracy"}
        counts["rng"].append(float(rng.random()))
        key = (scenario, case.name if case is not None else None)
        counts[key] = counts.get(key, 0) + 1
        return (key, counts[key] - 1)

    def score_claims(table, claims, items=None):
        (scenario, case), k = table
        return [_Result(c, SCRIPT[(scenario, case, c)][k]) for c in claims]

    monkeypatch.setattr(cal, "draw", draw)
    monkeypatch.setattr(cal, "score_claims", score_claims)
    return counts


def _table() -> pd.DataFrame:
    rows = [
        {"run_id": f"r{i}", "experiment": "main", "status": "done", "seed": i, "eval/accuracy": a}
        for i, a in enumerate([0.5, 0.6])
    ]
    return pd.DataFrame(rows)


def test_calibrate_rates_worst_case_false_rate_and_power(scripted):
    seen = []
    out = cal.calibrate(_table(), draws=DRAWS, claims=(7, 3), on_table=lambda: seen.append(1))
    # null, planted; zeros, constant; 4 margin cases
    assert len(seen) == cal.tables(DRAWS, (3, 7)) == 2 * DRAWS + 2 + 4 * DRAWS
    rates = out["rates"]
    assert rates["null"]["3"] == {"contradicted": 0.1, "inconclusive": 0.7, "supported": 0.2}
    assert rates["zeros"]["7"] == {"inconclusive": 1.0}
    # margin: each claim keeps its case with the highest "supported" rate
    assert rates["margin"]["3"] == {"contradicted": 0.9, "supported": 0.1}
    assert rates["margin"]["7"] == {"supported": 0.2, "x": 0.8}
    # claim 3: null gives 0.2 (its "supported"; "contradicted" is right for a specified effect
    # claim) above its margin's 0.1; claim 7 (a no-effect claim): "supported" under the
    # null is right, its "contradicted" (0.1) false, its margin's 0.2 the worst
    assert out["false_rate"] == {"3": pytest.approx(0.2), "7": pytest.approx(0.2)}
    assert out["false_support"] == {"3": pytest.approx(0.2), "7": pytest.approx(0.2)}
    assert out["false_contradiction"] == {"3": 0.0, "7": pytest.approx(0.1)}
    assert out["power"] == {"3": 0.9, "7": 0.0}
    assert out["draws"] == DRAWS and out["seed"] == 0 and set(out["noise"]) == {"eval/accuracy"}
    assert list(out["rates"]) == list(cal.SCENARIOS)
    # one generator seeded with ``seed`` (default 0) feeds every table in turn
    rng = np.random.default_rng(0)
    assert scripted["rng"] == [float(rng.random()) for _ in seen]


def test_a_later_margin_case_replaces_only_a_strictly_lower_one(scripted, monkeypatch):
    tie = ["supported"] * 2 + ["inconclusive"] * 8
    monkeypatch.setitem(SCRIPT, ("margin", "low-LR change at the margin", 3), tie)
    later = ["supported"] * 2 + ["contradicted"] * 8
    monkeypatch.setitem(SCRIPT, ("margin", "rollout effect at the margin", 3), later)
    out = cal.calibrate(_table(), draws=DRAWS, seed=5, claims=(3,))
    assert out["rates"]["margin"]["3"] == {"inconclusive": 0.8, "supported": 0.2}
    assert out["seed"] == 5


def test_degenerate_scenarios_are_drawn_once(scripted):
    cal.calibrate(_table(), draws=DRAWS, claims=(3,))
    assert scripted[("zeros", None)] == scripted[("constant", None)] == 1
    assert scripted[("null", None)] == scripted[("planted", None)] == DRAWS
    assert scripted[("margin", "low-LR change at the margin")] == DRAWS


@pytest.mark.parametrize(
    "claim, scenario, verdict, false",
    [
        (3, "margin", "supported", True),
        (3, "margin", "contradicted", False),  # at the margin only "supported" is wrong
        (3, "null", "supported", True),
        (3, "null", "contradicted", False),  # a specified effect claim: its effect is absent
        (3, "planted", "contradicted", True),  # the published effects make it true
        (5, "null", "contradicted", False),  # a specified effect claim: its effect is absent
        (1, "null", "contradicted", True),  # a no-effect claim is true under the null
        (3, "null", "inconclusive", False),
        (3, "zeros", "not tested", False),
        (7, "null", "supported", False),  # a null table makes the no-effect claim true
        (7, "null", "contradicted", True),
        (7, "zeros", "supported", True),  # the exemption is the null's only
        (1, "constant", "supported", True),
        (14, "null", "supported", False),
        (15, "null", "supported", False),
    ],
)
def test_false_verdicts(claim, scenario, verdict, false):
    assert cal._false(claim, scenario, verdict) is false


def test_claim_ids_scored_claims_and_batches():
    assert cal._claim_ids(None) == list(CLAIM_IDS)
    assert cal._claim_ids([9, 2, 999]) == [2, 9]  # claim order, unknown ids dropped
    assert cal._scored("null", [2, 5]) == [2, 5]
    assert cal._scored("margin", [2, 8, 7]) == [2, 7]  # claim 8 has no margin case
    assert cal._runs("null", [2, 5], DRAWS) == [(None, [2, 5])]
    assert cal._runs("planted", [], DRAWS) == []
    assert cal._runs("margin", [7], DRAWS) == [(c, [7]) for c in margin_cases([7])]
    assert len(cal._runs("margin", [7], DRAWS)) == 2


def test_tables_counts_each_scenario():
    assert cal._tables_of("zeros", 50) == cal._tables_of("constant", 50) == 1
    assert cal._tables_of("null", 50) == cal._tables_of("margin", 50) == 50
    assert cal.tables(50, [8]) == 50 + 1 + 1 + 0 + 50  # claim 8: no margin case
    assert cal.tables(50, [3]) == 50 + 1 + 1 + 2 * 50 + 50
    assert cal.tables(5) == 5 * 2 + 2 + 5 * len(margin_cases(cal._claim_ids(None)))


# --- the noise model and typical values --------------------------------------------------------


def _cells(values: dict[str, list[float]], metric: str = "eval/accuracy") -> pd.DataFrame:
    rows = []
    for lr, vs in values.items():
        for seed, v in enumerate(vs):
            rows.append(
                {"run_id": f"{lr}-{seed}", "experiment": "main", "status": "done", "seed": seed}
                | {"optim.lr": lr, metric: v}
            )
    rows.append({"run_id": "baseline", "experiment": "baseline", "status": "done", metric: 0.0})
    rows.append(
        {"run_id": "x", "experiment": "main", "status": "failed", "optim.lr": "a", metric: 9}
    )
    return pd.DataFrame(rows)


def _dense_residual(cells: list[str], seeds: list[int], y: list[float]) -> float:
    """σ̂² = RSS/ν of the dense least-squares cell + seed fit (an independent reference)."""
    c, s = sorted(set(cells)), sorted(set(seeds))
    x = np.array(
        [
            [ci == k for k in c] + [si == k for k in s[1:]]
            for ci, si in zip(cells, seeds, strict=True)
        ]
    )
    beta, *_ = np.linalg.lstsq(x.astype(float), np.array(y), rcond=None)
    rss = float(((np.array(y) - x @ beta) ** 2).sum())
    return rss / (len(y) - np.linalg.matrix_rank(x.astype(float)))


def test_noise_is_the_study_variance_components():
    # cell a: 0.1, 0.3; cell b: 0.2, 0.4, 0.9; cell c: 0.5 (seeds 0, 1, 2 in order): a metric
    # without evaluation sampling keeps the two-way fit's whole residual as training noise
    metric = "train/grad_norm_mean"
    df = _cells({"a": [0.1, 0.3], "b": [0.2, 0.4, 0.9], "c": [0.5]}, metric)
    comp = cal.noise_model(df, [metric])[metric]
    ref = _dense_residual(
        ["a", "a", "b", "b", "b", "c"], [0, 1, 0, 1, 2, 0], [0.1, 0.3, 0.2, 0.4, 0.9, 0.5]
    )
    assert comp.train_sd**2 == pytest.approx(ref) and comp.eval_var() == 0.0
    acc = cal.noise_model(_cells({"a": [0.1, 0.3], "b": [0.2, 0.4, 0.9]}), ["eval/accuracy"])
    a = acc["eval/accuracy"]  # evaluation binomial at the mean level (no per-item data)
    assert (a.items, a.samples, a.p_items) == (200, 1, None)
    assert a.eval_var() == pytest.approx(0.38 * 0.62 / 200)


def test_noise_falls_back_to_defaults():
    def run_sd(df, metric):
        return math.sqrt(cal.noise_model(df, [metric])[metric].run_var())

    equal = _cells({"a": [0.4, 0.4], "b": [0.7, 0.7]})  # no variance: 3 pp, or the binomial
    eval_sd = math.sqrt(0.55 * 0.45 / 200)  # when larger (200 items × 1 sample at 55%)
    assert run_sd(equal, "eval/accuracy") == pytest.approx(max(0.03, eval_sd))
    single = _cells({"a": [0.4], "b": [0.7]})
    assert run_sd(single, "eval/accuracy") == pytest.approx(max(0.03, eval_sd))
    count = _cells({"a": [40.0], "b": [80.0], "c": [100.0]}, "train/steps_done")
    assert run_sd(count, "train/steps_done") == pytest.approx(4.0)  # 5% of the median
    assert run_sd(equal, "train/steps_done") == pytest.approx(0.05)  # absent: 5% of 1
    assert run_sd(equal, "traj/reward_drop_pp") == 2.0
    both = cal.noise_model(equal, ["traj/len_rise_z", "eval/accuracy"])  # a trajectory key first
    assert list(both) == ["traj/len_rise_z", "eval/accuracy"]
    assert both["traj/len_rise_z"].train_sd == 1.0


def test_noise_reads_non_numeric_values_as_missing():
    metric = "train/grad_norm_mean"
    df = _cells({"a": [0.1, 0.3], "b": [0.2, 0.4, 0.9]}, metric)
    df[metric] = df[metric].astype(object)
    df.loc[df["run_id"] == "b-2", metric] = "n/a"  # cell b: 0.2, 0.4
    comp = cal.noise_model(df, [metric])[metric]
    assert comp.train_sd**2 == pytest.approx(
        _dense_residual(["a", "a", "b", "b"], [0, 1, 0, 1], [0.1, 0.3, 0.2, 0.4])
    )


def test_default_sd_by_unit():
    assert default_sd("eval/accuracy", 0.5) == 0.03
    assert default_sd("eval/forgetting_pp", 7.0) == 3.0
    assert default_sd("train/steps_done", -200.0) == pytest.approx(10.0)
    assert default_sd("train/steps_done", 0.0) == pytest.approx(0.05e-3)


def test_typical_values():
    rows = pd.DataFrame({"eval/accuracy": [0.2, 0.4, 0.9], "train/steps_done": ["1", "3", "x"]})
    assert cal._typical(rows, "eval/accuracy") == pytest.approx(0.4)
    assert cal._typical(rows, "train/steps_done") == pytest.approx(2.0)  # numeric values only
    assert cal._typical(rows, "eval/forgetting_pp") == 0.0
    changes = pd.DataFrame({"eval/forgetting_pp": [-6.0, -4.0, -5.0]})
    assert cal._typical(changes, "eval/forgetting_pp") == 0.0  # the null has no change
    assert cal._typical(rows, "traj/len_rise_sem") == 1.0
    assert cal._typical(rows, "eval/pass@1") == 0.6  # absent fraction
    assert cal._typical(rows, "train/grad_norm_mean") == 1.0  # absent, other unit


def test_planned_table_and_design():
    plan = [{"run_id": "r1", "experiment": "main", "optim.lr": 1e-3, "seed": 1}]
    table = cal.planned_table(plan)
    assert list(table["run_id"]) == ["r1", "baseline"]
    assert list(table["experiment"]) == ["main", "baseline"]
    assert set(table["status"]) == {"done"}
    assert (table["eval/accuracy"] == cal.TYPICAL["eval/accuracy"]).all()
    df = _cells({"a": [0.1, 0.3]}).assign(reason="boom")
    df.index = [7, 3, 9, 1]
    d = cal.design(df)
    assert "eval/accuracy" not in d.columns
    assert set(d["status"]) == {"done"} and set(d["reason"]) == {""}
    assert list(d.index) == list(range(len(df))) and "index" not in d.columns
    assert list(d["run_id"]) == list(df["run_id"])
