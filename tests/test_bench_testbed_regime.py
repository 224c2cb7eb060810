"""bench/testbed_regime.py: the collapse rule and GRPO's gain with its standard error."""

import importlib.util
import math
from pathlib import Path

import pandas as pd

_PATH = Path(__file__).resolve().parents[1] / "bench" / "testbed_regime.py"
_SPEC = importlib.util.spec_from_file_location("testbed_regime", _PATH)
regime = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(regime)


def _run(kind: str, seed: int, acc: float, status: str = "done") -> dict:
    return {
        "experiment": "collapse",
        "rollout.policy": "student",
        "objective.kind": kind,
        "optim.lr": 3e-4,
        "seed": seed,
        "eval/accuracy": acc,
        "status": status,
    }


def test_a_run_collapses_15_pp_below_its_cells_other_seeds_or_when_it_fails():
    df = pd.DataFrame(
        [
            _run("reverse_kl", 42, 0.40),
            _run("reverse_kl", 43, 0.41),
            _run("reverse_kl", 44, 0.25),  # 15.5 pp below 40.5
            _run("forward_kl", 42, 0.40),
            _run("forward_kl", 43, 0.30),  # 10 pp below 40: not a collapse
            _run("forward_kl", 44, 0.40),
            _run("forward_kl", 45, math.nan, status="failed"),
            _run("forward_kl", 46, math.nan, status="running"),  # not judged yet
        ]
    )
    table = regime.collapses(df)
    collapsed = table[table["collapsed"]][["objective.kind", "seed"]].values.tolist()
    assert collapsed == [["forward_kl", 45], ["reverse_kl", 44]]


def test_cells_with_fewer_than_three_seeds_are_not_judged():
    df = pd.DataFrame([_run("reverse_kl", 42, 0.9), _run("reverse_kl", 43, 0.1)])
    assert regime.collapses(df).empty


def test_grpo_gain_and_its_binomial_standard_error():
    df = pd.DataFrame(
        {
            "experiment": ["grpo", "grpo", "collapse"],
            "status": ["done", "done", "done"],
            "rlvr/eval_accuracy": [0.3, 0.5, 0.0],
            "rlvr/eval_accuracy_before": [0.1, 0.1, 0.0],
        }
    )
    mean, se, n = regime.grpo_gain(df, items=200)
    assert n == 2 and math.isclose(mean, 0.3)
    var = (0.3 * 0.7 + 0.1 * 0.9 + 0.5 * 0.5 + 0.1 * 0.9) / 200
    assert math.isclose(se, math.sqrt(var) / 2)


def test_the_candidates_regime_entry_is_its_study_record():
    """bench/records/testbed-regime-2026-12-06: the ``regime`` entry of its testbed.json is what
    this script computes from the study record beside it."""
    import json

    record = _PATH.parents[1] / "bench" / "records" / "testbed-regime-2026-12-06"
    entry = json.loads((record / "testbed.json").read_text())["regime"]
    df = pd.read_parquet(record / "study" / "results.parquet")
    table = regime.collapses(df)
    at_high = table[table["optim.lr"] == 3e-4]
    for kind in ("reverse_kl", "forward_kl"):
        rows = at_high[at_high["objective.kind"] == kind]
        assert len(rows) == 3
        assert entry[f"{kind}_collapses"]["value"] == int(rows["collapsed"].sum())
    fwd = df[(df["optim.lr"] == 3e-4) & (df["objective.kind"] == "forward_kl")]
    assert math.isclose(entry["bf16_sparsity"]["value"], fwd[regime.SPARSE].mean())
    if "grpo_gain_z" in entry:
        mean, se, _ = regime.grpo_gain(df, 200)
        assert math.isclose(entry["grpo_gain_z"]["value"], mean / se)
