"""The calibration's own claim: a rule's false-verdict rate is its worst rate over the scenarios
where a verdict would be false, and a "contradicted" under the null is false for effect claims
and no-effect claims alike (only a no-effect claim's "supported" is right there).

The rules are replaced by a scripted scorer whose verdict rates per scenario are known and differ
between scenarios, so the rate ``calibrate`` reports can be stated exactly.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from distillscope.scorecard import calibrate as cal_mod
from distillscope.scorecard.calibrate import (
    NO_EFFECT_CLAIMS,
    calibrate,
    planned_table,
)
from distillscope.scorecard.plants import margin_cases
from distillscope.study.spec import expand, load_spec
from distillscope.study.table import plan_row

DRAWS = 20


def _design():
    runs = [r for r in expand(load_spec("paper")) if r.experiment == "main"]
    return planned_table([plan_row(r) for r in runs])


def _scripted(monkeypatch, script):
    """Make ``calibrate`` score with ``script[scenario][claim]``: a list of verdicts, cycled
    over that scenario's tables (a claim absent from a scenario is "inconclusive" there)."""
    real_draw = cal_mod.draw
    seen: dict[tuple[str, int], int] = {}

    def draw(d, scenario, *args, **kwargs):
        table = real_draw(d, scenario, *args, **kwargs)
        table.attrs["scenario"] = scenario
        return table

    def score_claims(table, claims=None, **_):
        scenario = table.attrs["scenario"]
        out = []
        for c in claims:
            verdicts = script.get(scenario, {}).get(c, ["inconclusive"])
            k = seen.get((scenario, c), 0)
            seen[(scenario, c)] = k + 1
            out.append(SimpleNamespace(id=c, verdict=verdicts[k % len(verdicts)]))
        return out

    monkeypatch.setattr(cal_mod, "draw", draw)
    monkeypatch.setattr(cal_mod, "score_claims", score_claims)


def _share(verdict: str, k: int, of: int = DRAWS) -> list[str]:
    """``of`` verdicts, ``k`` of them ``verdict`` and the rest "inconclusive"."""
    return [verdict] * k + ["inconclusive"] * (of - k)


def test_false_rate_is_the_worst_scenario_not_the_best(monkeypatch):
    # claim 2 (an effect claim): false "supported" 25% of null tables, never on the
    # degenerate ones; claim 4: 10% under the null, "contradicted" on the zeros table
    _scripted(
        monkeypatch,
        {
            "null": {2: _share("supported", 5), 4: _share("supported", 2)},
            "zeros": {4: ["contradicted"]},
            "planted": {2: _share("supported", 12), 4: _share("supported", 16)},
        },
    )
    cal = calibrate(_design(), draws=DRAWS, seed=0, claims=(2, 4))
    assert cal["rates"]["null"]["2"]["supported"] == pytest.approx(0.25)
    assert cal["rates"]["zeros"]["2"] == {"inconclusive": 1.0}
    assert cal["false_rate"]["2"] == pytest.approx(0.25)  # the null's rate, not the zeros' 0
    assert cal["false_rate"]["4"] == pytest.approx(1.0)  # the zeros table's, not the null's 0.1
    assert cal["power"] == {"2": pytest.approx(0.6), "4": pytest.approx(0.8)}


def test_each_side_is_false_where_the_claim_says_the_opposite(monkeypatch):
    # claim 2 (specified, an effect claim): under the null its effect is absent, so
    # "contradicted" is right and "supported" false; with the published effects planted the
    # claim is true and "contradicted" is false.
    null = ["supported"] * 3 + ["contradicted"] * 4 + ["inconclusive"] * 13
    planted = ["supported"] * 15 + ["contradicted"] * 2 + ["inconclusive"] * 3
    _scripted(monkeypatch, {"null": {2: null}, "planted": {2: planted}})
    cal = calibrate(_design(), draws=DRAWS, seed=0, claims=(2,))
    assert cal["false_support"]["2"] == pytest.approx(3 / DRAWS)
    assert cal["false_contradiction"]["2"] == pytest.approx(2 / DRAWS)
    assert cal["false_rate"]["2"] == pytest.approx(3 / DRAWS)


@pytest.mark.parametrize("claim", NO_EFFECT_CLAIMS)
def test_a_no_effect_claim_is_false_when_contradicted_under_the_null(monkeypatch, claim):
    # "supported" under the null is right for a no-effect claim; "contradicted" there is false,
    # and so is "supported" with the effect planted at the margin
    assert {14, 15} <= set(NO_EFFECT_CLAIMS)
    assert margin_cases([claim]), claim  # every no-effect claim has a margin scenario
    null = ["supported"] * 8 + ["contradicted"] * 6 + ["inconclusive"] * 6
    _scripted(
        monkeypatch,
        {"null": {claim: null}, "margin": {claim: _share("supported", 2)}},
    )
    cal = calibrate(_design(), draws=DRAWS, seed=0, claims=(claim,))
    assert cal["rates"]["null"][str(claim)]["supported"] == pytest.approx(0.4)
    assert cal["false_rate"][str(claim)] == pytest.approx(0.3)  # the null's 6 "contradicted"


@pytest.mark.parametrize("claim", NO_EFFECT_CLAIMS)
def test_a_no_effect_claim_supported_at_its_margin_is_false(monkeypatch, claim):
    # a replay claim's (14, 15) cases are its replayed claims' margins: false where the main
    # grid supports the replayed claim (scripted here as "supported")
    given = {c.given: ["supported"] for c in margin_cases([claim]) if c.given is not None}
    _scripted(
        monkeypatch,
        {"null": {claim: ["supported"]}, "margin": {claim: _share("supported", 9), **given}},
    )
    cal = calibrate(_design(), draws=DRAWS, seed=0, claims=(claim,))
    assert cal["rates"]["null"][str(claim)] == {"supported": 1.0}
    assert cal["false_rate"][str(claim)] == pytest.approx(9 / DRAWS)


@pytest.mark.parametrize("main", ["inconclusive", "contradicted"])
@pytest.mark.parametrize("claim", [14, 15])
def test_a_replay_at_a_margin_the_main_grid_leaves_undecided_is_not_false(monkeypatch, claim, main):
    # docs/method.md §9: the replay judges only the conclusions the main grid reaches. A
    # replayed claim at its margin on the ablation, undecided on the main grid of that table,
    # makes no false world: "supported" there is kept apart and not counted as false; where
    # the main grid supports it (half of the tables), "supported" is false. A conclusion the
    # main grid contradicts is none the replay judges for support either (issue 42)
    cases = margin_cases([claim])
    assert cases and all(c.given is not None for c in cases)
    given = {c.given: [main, "supported"] for c in cases}
    _scripted(monkeypatch, {"margin": {claim: ["supported"], **given}})
    cal = calibrate(_design(), draws=DRAWS, seed=0, claims=(claim,))
    rates = cal["rates"]["margin"][str(claim)]
    assert rates["supported"] == pytest.approx(0.5)
    (undecided,) = [v for v in rates if v.startswith("supported (claim ")]
    assert rates[undecided] == pytest.approx(0.5) and "not supported on the main grid" in undecided
    assert cal["false_support"][str(claim)] == pytest.approx(0.5)


def test_supported_on_a_degenerate_table_is_false_even_for_a_no_effect_claim(monkeypatch):
    # the null exemption covers the null only: "supported" on the constant table is false
    _scripted(monkeypatch, {"null": {1: ["supported"]}, "constant": {1: ["supported"]}})
    cal = calibrate(_design(), draws=DRAWS, seed=0, claims=(1,))
    assert cal["false_rate"]["1"] == pytest.approx(1.0)
