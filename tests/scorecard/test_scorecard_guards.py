"""Guards of the generic runner (scorecard/runner.py ``score_spec``, ``_judge``, ``headline``) on
made-up specifications whose parts return fixed estimates: which verdict each combination of
part decisions gives, the reason and headline a reader sees, the contradiction level split over
every stratum of the claim, and what a rule that raises or reads unmeasured keys becomes.

Estimates have ν = ∞ and SE 1, so a bound is value ± z (z.975 = 1.960; at α / k for the
contradictions: z(1 − 0.025/2) = 2.241, z(1 − 0.025/4) = 2.498).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from distillscope.results.reader import Study
from distillscope.scorecard.claim_spec import (
    ABOVE,
    EVERY,
    POOLED,
    Claim,
    Part,
    Quote,
    Replay,
    Routes,
)
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import Evidence
from distillscope.scorecard.runner import (
    CLAIM_IDS,
    ClaimResult,
    add_features,
    headline,
    score_claims,
    score_spec,
)
from distillscope.scorecard.verdicts import decide_part

NEEDS = "the main grid"

#: A quote for the hand-made claims (a real one: claims must quote their seed).
QUOTES = (Quote("002_c8062276978be7ba.txt", 5, "72% para on-policy", "72% for on-policy"),)


def _x(value: float, label: str = "pooled", se: float = 1.0) -> Estimate:
    return Estimate(label, value, se, math.inf, 3)


def _part(name: str, *xs: Estimate, quantifier: str = POOLED, unit: str = "pp") -> Part:
    over = "" if quantifier == POOLED else "cell"
    return Part(name, "e", lambda view: list(xs), quantifier, ABOVE, 5.0, "w", 17.0, over, unit)


def _claim(*parts: Part, premises: tuple[Part, ...] = (), **kw) -> Claim:
    spec = {"experiments": ("main", "other"), "needs": NEEDS, **kw}
    return Claim(1, "T", QUOTES, parts=parts, premises=premises, **spec)


def _ev(**extra) -> Evidence:
    row = {"run_id": "m1", "experiment": "main", "status": "done", "seed": 1, **extra}
    return Evidence(pd.DataFrame([row]))


def _score(*parts: Part, premises: tuple[Part, ...] = (), ev: Evidence | None = None, **kw):
    return score_spec(_claim(*parts, premises=premises, **kw), ev or _ev(), strict=True)


GOOD, NEAR, BAD = _x(9.0), _x(6.0), _x(-10.0)
GAIN = "gain"


def test_every_part_supported_is_supported_with_its_headline():
    r = _score(_part("A", GOOD), _part("B", _x(8.0, "s2")))
    assert (r.verdict, r.reason, r.id, r.claim) == ("supported", "", 1, "T")
    assert r.headline == "A +9.0 pp [+7.0, +11.0]; B [s2] +8.0 pp [+6.0, +10.0]"
    assert r.evidence == (
        "A +9.0 pp [+7.0, +11.0] (95% CI) → A > 5 pp | "
        "B [s2] +8.0 pp [+6.0, +10.0] (95% CI) → B > 5 pp"
    )
    assert r.rule == _claim(_part("A"), _part("B")).rule()


def test_one_contradicted_part_contradicts_whatever_the_others_lack():
    r = _score(_part("A", GOOD), _part("B", BAD), _part("C", not_tested("pooled", "m")))
    assert r.verdict == "contradicted" and r.reason == ""
    assert r.headline.startswith("A +9.0 pp") and "B -10.0 pp" in r.headline


def test_what_the_parts_lack_is_named_once():
    gone = [not_tested("s1", "m1"), not_tested("s2", "m1")]
    r = _score(_part("A", GOOD), _part("B", *gone, quantifier=EVERY), _part("C", gone[0]))
    assert r.verdict == "not tested"
    assert r.reason == f"needs {NEEDS}; lacks m1"
    assert r.headline == "A +9.0 pp [+7.0, +11.0]"  # a part with no value heads nothing
    r = _score(_part("B", not_tested("s", "m2")), _part("C", gone[0]))
    assert r.reason == f"needs {NEEDS}; lacks m2; m1"


def test_an_absent_premise_makes_it_not_applicable_never_supported():
    r = _score(_part("A", GOOD), premises=(_part(GAIN, _x(1.0)),))
    assert r.verdict == "not applicable" and r.reason == "premise gain > 5 pp is absent"
    assert r.headline == "A +9.0 pp [+7.0, +11.0]; gain +1.0 pp [-1.0, +3.0]"
    assert r.evidence.startswith("gain +1.0 pp [-1.0, +3.0] (95% CI) → contradicts gain > 5 pp |")


def test_undecided_reasons_put_power_first_and_name_an_open_premise():
    weak = _x(8.0, se=6.0)  # reach 16.8 > 12: lacks power
    r = _score(_part("A", NEAR), _part("B", weak))
    assert r.verdict == "inconclusive" and r.reason.startswith("B: lacks power (smallest")
    assert r.headline == "A +6.0 pp [+4.0, +8.0]; B +8.0 pp [-3.8, +19.8]"  # 8 ± 1.96·6
    r = _score(_part("A", GOOD), premises=(_part(GAIN, NEAR),))
    assert r.verdict == "inconclusive"
    # what would decide it: ⌈3 · ((z.975 + z.8) · 1 / 1)²⌉ = ⌈23.5⌉ seeds
    assert r.reason == (
        "gain: effect near its margin: +6.0 pp [+4.0, +8.0] against gain > 5 pp; "
        "≈ 24 seeds would decide it if the effect is +6.0 pp"
    )
    r = _score(_part("A", NEAR), premises=(_part(GAIN, weak),))
    assert r.reason.startswith("gain: lacks power")  # the premise's own reason: no prefix
    r = _score(_part("A", weak), premises=(_part(GAIN, NEAR),))
    assert r.reason.startswith("premise gain > 5 pp undecided; A: lacks power (smallest")


def test_a_claim_without_any_run_of_its_experiments_is_not_tested():
    lack = f"needs {NEEDS}; the study has no finished run of `main` or `other`"
    r = _score(_part("A", GOOD), ev=_ev(experiment="lr_sweep"))
    assert (r.verdict, r.evidence, r.reason, r.headline) == ("not tested", lack, lack, "")
    rlvr = _score(_part("A", GOOD), ev=_ev(experiment="other", parent_run="m0"))
    assert rlvr.verdict == "supported"  # RLVR runs of a declared experiment are runs


# contradicted at α/2 (4.89 < 5) but not at α/4; contradicted at α (4.86) but not at α/2
AT_HALF, AT_ONE = _x(5.0 - 2.35), _x(5.0 - 2.1)


def test_contradiction_is_split_over_every_stratum_of_the_claim():
    # k = 1 stratum of A + 1 for B, which has none: α / 2 each
    r = _score(_part("A", AT_HALF), _part("B"))
    assert r.verdict == "contradicted"
    r = _score(_part("A", AT_ONE), _part("B"))
    assert r.verdict == "not tested"  # undecided at α / 2; B has no stratum
    # premises count too: k = 2
    r = _score(_part("A", AT_ONE), premises=(_part(GAIN, GOOD),))
    assert r.verdict == "inconclusive"


def test_the_evidence_ends_with_the_rows_counted_once():
    # the declared experiments' duplicates, whether or not a part reads them
    df = pd.DataFrame([{"run_id": "m1", "experiment": "main", "status": "done", "seed": 1}] * 2)
    r = score_spec(_claim(_part("A", GOOD)), Evidence(df), strict=True)
    assert r.evidence == (
        "A +9.0 pp [+7.0, +11.0] (95% CI) → A > 5 pp. 1 duplicate row(s) counted once: m1 (main)"
    )


def test_unmeasured_keys_and_rules_that_raise():
    r = _score(_part("A", GOOD), unmeasured=("eval/x", "eval/y"))
    assert r.verdict == "not implemented" and r.evidence == "no code writes eval/x, eval/y yet"
    assert r.rule == _claim(_part("A")).rule() and r.reason == ""

    def broken(view):
        raise ValueError("boom")

    claim = _claim(Part("A", "e", broken, POOLED, ABOVE, 5.0, "w", 17.0))
    r = score_spec(claim, _ev())
    assert r.verdict == "error" and r.headline == ""
    assert r.evidence == "the rule raised ValueError: boom (a bug in distillscope)"
    with pytest.raises(ValueError, match="boom"):
        score_spec(claim, _ev(), strict=True)


def test_the_headline_shows_each_parts_worst_stratum():
    a = _part("A", _x(9.0, "s1"), _x(7.0, "s2"), quantifier=EVERY)
    b = _part("B", _x(9.0, "B"), unit="")
    c = _part("C", not_tested("s", "m"))
    decided = [(p, p.estimate(None), decide_part(p, p.estimate(None), 0.025)) for p in (a, b, c)]
    assert headline(decided) == "A [s2] +7.0 pp [+5.0, +9.0]; B +9.0 [+7.0, +11.0]"


def _last(frame: pd.DataFrame) -> float:
    """A trajectory feature: the last logged x (NaN without metrics)."""
    return float(frame["x"].iloc[-1]) if "x" in frame else math.nan


def test_trajectory_features_are_read_for_the_runs_of_the_claims_experiments(tmp_path):
    for rid, xs in (("m1", (2.0, 4.0)), ("o1", (7.0,))):
        (tmp_path / "runs" / rid).mkdir(parents=True)
        lines = [f'{{"step": {i}, "x": {x}}}' for i, x in enumerate(xs)]
        (tmp_path / "runs" / rid / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    df = pd.DataFrame(
        {
            "run_id": ["m1", "m2", "o1", "../m1"],
            "experiment": ["main", "main", "lr_sweep", "main"],
            "feat/kept": [1.0, 2.0, 3.0, 4.0],
        }
    )
    claim = _claim(_part("A", GOOD), features={"feat/last": _last, "feat/kept": _last})
    metrics = Study(tmp_path, df).metrics  # each run's metrics.jsonl, read once
    out = add_features(df, metrics, [claim])
    # m2 has no metrics.jsonl; lr_sweep is not the claim's; "../m1" is never read
    assert out["feat/last"].tolist()[:1] == [4.0]
    assert all(math.isnan(v) for v in out["feat/last"].tolist()[1:])
    assert out["feat/kept"].tolist()[0] == 4.0 and out["feat/kept"].tolist()[2] == 3.0
    assert "feat/last" not in df.columns and df["feat/kept"].tolist() == [1.0, 2.0, 3.0, 4.0]
    for cut in ("run_id", "experiment"):
        assert add_features(df.drop(columns=[cut]), metrics, [claim]).equals(df.drop(columns=[cut]))
    assert add_features(df, metrics, [_claim(_part("A"))]) is df  # no feature: untouched


def test_score_claims_scores_the_asked_claims_in_order(tmp_path):
    df = pd.DataFrame([{"run_id": "m1", "experiment": "lr_sweep", "status": "done", "seed": 1}])
    rs = score_claims(df, tmp_path, strict=True, claims=[3, 1])
    assert [r.id for r in rs] == [1, 3] and {r.verdict for r in rs} == {"not tested"}
    assert [r.id for r in score_claims(df, claims=None)] == list(CLAIM_IDS)


GRID = "no-clip grid"


def _replayed(i: int, experiment: str, x: Estimate | None) -> Claim:
    parts = (_part("A", x),) if x is not None else ()
    return Claim(i, f"T{i}", QUOTES, (experiment,), parts, NEEDS)


def _replay(*pairs, premises: tuple[Part, ...] = (), rows=("main", "no_clip")) -> ClaimResult:
    """Claim 14 replaying claims 1, 2, … whose parts give ``pairs`` [(main x, ablation x)]."""
    replays = tuple(
        Replay(_replayed(i, "main", m), _replayed(i, "no_clip", a), GRID)
        for i, (m, a) in enumerate(pairs, 1)
    )
    claim = Claim(14, "T14", QUOTES, ("main", "no_clip"), (), NEEDS, premises, replays=replays)
    df = pd.DataFrame([{"run_id": e, "experiment": e, "status": "done", "seed": 1} for e in rows])
    return score_spec(claim, Evidence(df), strict=True)


def test_a_replay_holds_when_every_decided_claim_is_the_same_on_the_ablation():
    r = _replay((GOOD, GOOD), (BAD, BAD))
    assert (r.verdict, r.reason) == ("supported", "")
    assert r.headline == f"{GRID}: claim 1 same, claim 2 same"
    assert r.evidence.startswith(
        f"claim 1: main grid supported (A +9.0 pp [+7.0, +11.0]), {GRID} supported (A +9.0 pp"
    )
    assert _replay((GOOD, GOOD), (None, None)).evidence.endswith(
        f"claim 2: main grid supported (—), {GRID} supported (—)"
    )


@pytest.mark.parametrize(
    ("main", "ablation", "verdict"),
    [
        (GOOD, BAD, "contradicted"),  # reversed on the ablation
        (BAD, GOOD, "supported"),  # the main grid contradicts it: no conclusion to hold
        (NEAR, BAD, "contradicted"),  # contradicted there, not on the main grid
        (BAD, NEAR, "supported"),  # only the main grid's supported claims are replayed
        (GOOD, NEAR, "inconclusive"),
    ],
)
def test_a_replay_is_contradicted_only_by_a_reversal(main, ablation, verdict):
    r = _replay((GOOD, GOOD), (main, ablation))
    assert r.verdict == verdict
    if verdict == "inconclusive":
        assert r.reason.startswith(f"claim 2 on the {GRID}: A: effect near its margin")
        assert r.headline == f"{GRID}: claim 1 same, claim 2 inconclusive"


def test_a_replay_says_why_it_cannot_decide():
    r = _replay((NEAR, NEAR), (BAD, GOOD))
    assert (r.verdict, r.reason) == (
        "not applicable",
        "premise: one of claims 1 and 2 supported on the main grid is absent (main grid: "
        "1 inconclusive, 2 contradicted)",
    )
    gone = not_tested("pooled", "m")
    r = _replay((GOOD, gone), (GOOD, GOOD))
    assert r.verdict == "not tested"
    assert r.reason == (
        f"needs {NEEDS}; claim 1 on the {GRID}: not tested (needs {NEEDS}; lacks m)"
    )
    lack = f"needs {NEEDS}; the study has no finished run of `no_clip`"
    r = _replay((GOOD, GOOD), rows=("main",))
    assert (r.verdict, r.evidence, r.reason) == ("not tested", lack, lack)


def test_a_replay_reads_its_premises():
    r = _replay((GOOD, GOOD), premises=(_part(GAIN, _x(1.0)),))
    assert r.verdict == "not applicable" and r.reason == "premise gain > 5 pp is absent"
    assert r.evidence.startswith("gain +1.0 pp [-1.0, +3.0] (95% CI) → contradicts gain > 5 pp |")
    r = _replay((GOOD, GOOD), premises=(_part(GAIN, NEAR),))
    assert r.verdict == "inconclusive" and r.reason.startswith("gain: effect near its margin")
    # one premise: contradicted at α (4.86 < 5), which two tests would not allow
    assert _replay((GOOD, GOOD), premises=(_part(GAIN, AT_ONE),)).verdict == "not applicable"
    assert _replay((GOOD, GOOD), premises=(_part(GAIN, GOOD),)).verdict == "supported"


def test_a_replay_heads_every_verdict_with_the_claims_it_replays():
    contra = _replay((GOOD, GOOD), (GOOD, BAD))
    assert contra.headline == f"{GRID}: claim 1 same, claim 2 contradicted"
    none = _replay((NEAR, NEAR))
    assert none.headline == f"{GRID}: claim 1 same"
    assert none.evidence.startswith("claim 1: main grid inconclusive (A: effect near")
    gone = not_tested("pooled", "m")
    untested = _replay((GOOD, gone), (BAD, gone))
    assert untested.headline == f"{GRID}: claim 1 not tested, claim 2 not tested"
    lacks = f"not tested (needs {NEEDS}; lacks m)"
    # claim 2, contradicted on the main grid, is no conclusion to replay: only claim 1 is named
    assert untested.reason == f"needs {NEEDS}; claim 1 on the {GRID}: {lacks}"
    absent = _replay((GOOD, GOOD), premises=(_part(GAIN, _x(1.0)),))
    assert absent.headline == f"{GRID}: claim 1 same"


def test_a_replays_premises_split_the_contradiction_level_and_its_lack_names_each_ablation():
    # two premises: each contradicts at α / 2 only (4.86 < 5 at α, not at α / 2)
    r = _replay((GOOD, GOOD), premises=(_part(GAIN, AT_ONE), _part("g2", GOOD)))
    assert r.verdict == "inconclusive"
    replays = (
        Replay(_replayed(1, "main", GOOD), _replayed(1, "no_clip", GOOD), GRID),
        Replay(_replayed(2, "main", GOOD), _replayed(2, "sampled", GOOD), GRID),
    )
    claim = Claim(14, "T", QUOTES, ("main", "no_clip", "sampled"), (), NEEDS, replays=replays)
    row = {"run_id": "m", "experiment": "main", "status": "done", "seed": 1}
    r = score_spec(claim, Evidence(pd.DataFrame([row])), strict=True)
    assert r.reason == f"needs {NEEDS}; the study has no finished run of `no_clip` or `sampled`"


def test_a_multi_route_part_counts_its_strata_once_and_heads_by_its_first_route():
    a, b = _part("a", _x(20.0)), _part("b", _x(30.0))
    routes = Routes("R", (a, b))  # two routes, one stratum: one contradiction test
    # k = 1 (R) + 1 (A): A contradicts at α / 2 (4.89 < 5), not at α / 3
    r = _score(routes, _part("A", AT_HALF))
    assert r.verdict == "contradicted"
    assert r.headline.startswith("a +20.0 pp [+18.0, +22.0]; A ")


def test_a_claim_whose_parts_all_lack_evidence_is_not_tested_even_when_a_premise_is_absent():
    """One of its experiments unrun and no part tested, a claim is "not tested": an absent
    premise measured elsewhere (claim 7's main-grid LR effect without a λ-spectrum) does not make
    it "not applicable"; the reason names both. With every experiment run, a part that lacks
    runs because the premise is absent (claim 19's high-entropy runs) is "not applicable"."""
    premise = (_part(GAIN, _x(1.0)),)
    r = _score(_part("B", not_tested("s", "m2")), premises=premise)
    assert r.verdict == "not tested"
    assert r.reason == (
        f"needs {NEEDS}; the study has no finished run of `other` "
        "(premise gain > 5 pp is absent where measured)"
    )
    r = _score(_part("A", GOOD), _part("B", not_tested("s", "m2")), premises=premise)
    assert r.verdict == "not applicable"  # one part tested: the premise decides
    rows = [
        {"run_id": f"m{i}", "experiment": e, "status": "done", "seed": 1}
        for i, e in enumerate(("main", "other"))
    ]
    r = _score(_part("B", not_tested("s", "m2")), premises=premise, ev=Evidence(pd.DataFrame(rows)))
    assert r.verdict == "not applicable" and r.reason == "premise gain > 5 pp is absent"
