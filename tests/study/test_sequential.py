"""Seeds until decided (study.sequential): the looks, the seeds they add, resume, false rates.

The false-rate simulation runs the scorecard's own decision (``scorecard.verdicts.decide_stratum``)
on seed-blocked paired contrasts whose true effect sits exactly at an ``above`` margin (where
"supported" and "contradicted" are both false verdicts at the boundary), adding 2 seeds per
look from 2 to 6 while the decision says "lacks power": 20,000 sequences, Monte Carlo SE
√(α(1 − α)/20,000) = 0.11 pp at α = 2.5%. Measured: false support 1.9% and false
contradiction 1.9% with every look at α / 3 (Bonferroni over the K = 3 planned looks); 5.3%
each with every look at α (naive).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.config import ConfigError
from distillscope.results.stats import ALPHA
from distillscope.scorecard import interval as interval_mod
from distillscope.scorecard.claim_spec import ABOVE, POOLED, Part
from distillscope.scorecard.estimate import Estimate
from distillscope.scorecard.verdicts import CONTRADICTED, LACKS_POWER, SUPPORTED, decide_stratum
from distillscope.study import sequential as sq
from distillscope.study.baseline import plan_baselines
from distillscope.study.run_study import prepare, run_study
from distillscope.study.spec import StudySpec, UntilDecided, expand, load_spec

SEQUENCES = 20_000


def _spec(max_seeds: int = 6, block: int = 2, **extra) -> StudySpec:
    return StudySpec.model_validate(
        {
            "name": "t",
            "experiments": [
                {"name": "main", "axes": {"objective.kind": ["forward_kl", "reverse_kl"],
                                          "seed": [42, 43]}},
                {"name": "side", "axes": {"seed": [42, 43, 44]}},
            ],
            "until_decided": {"max_seeds": max_seeds, "block": block},
            **extra,
        }
    )  # fmt: skip


# --- the rule --------------------------------------------------------------------------------


def test_the_looks_the_budget_allows_and_the_seeds_each_adds():
    spec = _spec()
    assert sq.max_looks(spec) == 1 + math.ceil((6 - 2) / 2) == 3  # n_min = main's 2 seeds
    assert sq.max_looks(_spec(max_seeds=5)) == 3 and sq.max_looks(_spec(max_seeds=2)) == 1
    assert sq.next_seeds(spec, ["main"]) == {"main": [44, 45]}  # after the spec's largest
    assert sq.next_seeds(_spec(max_seeds=5), ["main", "side"]) == {
        "main": [44, 45],
        "side": [45, 46],
    }
    assert sq.next_seeds(_spec(max_seeds=3), ["main", "side"]) == {"main": [44]}  # side is full


def test_added_seeds_plan_the_runs_a_longer_seed_list_would_and_move_no_baseline():
    spec = _spec()
    policy = spec.until_decided.model_copy(update={"looks": [{"main": [44, 45]}]})
    grown = spec.model_copy(update={"until_decided": policy})
    listed = StudySpec.model_validate(
        {**spec.model_dump(mode="json"), "until_decided": None,
         "experiments": [{"name": "main", "axes": {"objective.kind": ["forward_kl", "reverse_kl"],
                                                   "seed": [42, 43, 44, 45]}},
                         {"name": "side", "axes": {"seed": [42, 43, 44]}}]}
    )  # fmt: skip
    assert {r.run_id for r in expand(grown)} == {r.run_id for r in expand(listed)}
    before = [b.run_id for b in plan_baselines(expand(spec))]
    after = [b.run_id for b in plan_baselines(expand(grown))]
    assert after[: len(before)] == before and len(after) == 4  # seed 45 adds one


def test_a_look_naming_an_unknown_experiment_is_one_line():
    data = _spec().model_dump(mode="json")
    data["until_decided"]["looks"] = [{"mian": [44]}]
    with pytest.raises(ValueError, match="until_decided.looks names experiment 'mian'"):
        StudySpec.model_validate(data)


def test_the_flags():
    assert sq.policy_of(False, None) is None
    policy = sq.policy_of(True, 8)
    assert (policy.max_seeds, policy.block) == (8, 2)
    assert sq.policy_of(True, None) == sq.UntilDecided()
    with pytest.raises(ConfigError, match="--max-seeds goes with --until-decided"):
        sq.policy_of(False, 4)
    with pytest.raises(ConfigError, match="whole number"):
        sq.policy_of(True, 1)


# --- the looks, on a directory (the runs faked: the test is of the loop) --------------------


class FakeStudy:
    """``run``: writes the spec as run_study does (prepare) and records the runs it plans;
    ``judge``: claim 1 (reads main, via the RLVR stage's name too) lacks power until main has
    ``decided_at`` seeds; claim 2 (reads side) is decided."""

    def __init__(self, out, decided_at: int = 99, fail_at_look: int = 0):
        self.out, self.decided_at, self.fail_at = out, decided_at, fail_at_look
        self.planned: list[int] = []
        self.levels: list[float] = []

    def run(self, spec: StudySpec) -> None:
        if len(self.planned) + 1 == self.fail_at:
            self.fail_at = 0
            raise KeyboardInterrupt  # killed mid-look
        prepare(spec, self.out)
        self.planned.append(len(expand(spec)))

    def judge(self, study_dir, alpha):
        self.levels.append(alpha)
        stored = StudySpec.model_validate(yaml.safe_load((study_dir / "study.yaml").read_text()))
        main = len(sq.seeds_of(stored)["main"])
        lacking = main < self.decided_at
        return [(1, "inconclusive", lacking, ("main",)), (2, "supported", False, ("side",))]


def test_seeds_go_only_where_claims_lack_power_until_the_budget_is_spent(tmp_path):
    fake = FakeStudy(tmp_path)
    seen = []
    sq.run_until_decided(
        _spec(), tmp_path, fake.run, fake.judge, ALPHA, lambda s, n: seen.append(n)
    )
    state = sq.read_state(tmp_path)
    assert [look["added"] for look in state["looks"]] == [
        {},
        {"main": [44, 45]},
        {"main": [46, 47]},
    ]
    assert fake.planned == seen == [4 + 3, 8 + 3, 12 + 3]  # side never grows
    assert fake.levels == [ALPHA / 3] * 3 and state["stopped"].startswith("the 3 looks")
    assert [look["seeds"] for look in state["looks"]][-1] == {"main": 6, "side": 3}
    stored = load_spec(tmp_path / "study.yaml")
    assert stored.until_decided.looks == [{"main": [44, 45]}, {"main": [46, 47]}]
    lines = sq.look_lines(tmp_path)
    assert lines[1].startswith("look 2 of ≤ 3 at α = 0.008333: added main: 44, 45 — seeds main 4")
    assert lines[-1] == "looks stopped: the 3 looks the budget allows are spent"


def test_the_looks_stop_once_no_claim_lacks_power(tmp_path):
    fake = FakeStudy(tmp_path, decided_at=4)
    sq.run_until_decided(_spec(), tmp_path, fake.run, fake.judge, ALPHA)
    state = sq.read_state(tmp_path)
    assert len(state["looks"]) == 2 and state["stopped"] == "no claim lacks power"


def test_a_study_killed_mid_look_resumes_the_same_look(tmp_path):
    fake = FakeStudy(tmp_path, fail_at_look=2)
    with pytest.raises(KeyboardInterrupt):
        sq.run_until_decided(_spec(), tmp_path, fake.run, fake.judge, ALPHA)
    state = sq.read_state(tmp_path)
    assert state["looks"][-1] == {"added": {"main": [44, 45]}, "done": False}
    assert "running" in sq.look_lines(tmp_path)[-1]
    sq.run_until_decided(_spec(), tmp_path, fake.run, fake.judge, ALPHA)
    state = sq.read_state(tmp_path)
    assert [look["added"] for look in state["looks"]] == [
        {},
        {"main": [44, 45]},
        {"main": [46, 47]},
    ]
    assert fake.planned == [7, 11, 15] and len(fake.levels) == 3  # look 2 once, not twice


def test_a_resume_with_another_budget_is_refused(tmp_path):
    fake = FakeStudy(tmp_path, decided_at=4)
    sq.run_until_decided(_spec(), tmp_path, fake.run, fake.judge, ALPHA)
    with pytest.raises(ConfigError, match="made its looks with max_seeds 6, block 2"):
        sq.run_until_decided(_spec(max_seeds=8), tmp_path, fake.run, fake.judge, ALPHA)


def test_study_status_lists_the_looks_and_the_flags_are_checked_first(tmp_path):
    fake = FakeStudy(tmp_path, fail_at_look=2)
    with pytest.raises(KeyboardInterrupt):
        sq.run_until_decided(_spec(), tmp_path, fake.run, fake.judge, ALPHA)
    res = CliRunner().invoke(app, ["study", "status", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "look 2 of ≤ 3 at α = 0.008333: added main: 44, 45 — running" in res.output
    res = CliRunner().invoke(app, ["study", "--preset", "smoke", "--max-seeds", "4"])
    assert res.exit_code == 2 and "--max-seeds goes with --until-decided" in res.output
    only = ["study", "--until-decided", "--only", "main", "--executor", "sequential"]
    res = CliRunner().invoke(app, only)
    assert res.exit_code == 2 and "--until-decided runs the whole study" in res.output


def test_an_rlvr_stage_stands_for_its_source_experiment():
    spec = _spec(rlvr={"from": "main"})
    states = [sq.ClaimState(11, "inconclusive", True, ("rlvr", "nowhere"))]
    assert sq.wanting(spec, states) == {11: ["main"]}


def test_a_tiny_study_killed_mid_look_resumes_that_look_and_keeps_finished_runs(
    tiny_study, tmp_path
):
    spec = tiny_study({"seed": [42, 43]}, steps=2, checkpoint_every=1, skill_items=0)
    spec = sq.with_policy(spec, UntilDecided(max_seeds=3, block=1))  # K = 2 looks
    out = tmp_path / "study"
    killed = []

    def on_step(run_id, step, row):
        if "seed-44" in run_id and not killed:
            killed.append(run_id)
            raise KeyboardInterrupt  # mid-training, in the second look

    def run(s):
        return run_study(s, out, on_step=on_step)

    def judge(study_dir, alpha):
        return [(1, "inconclusive", True, ("main",))]

    with pytest.raises(KeyboardInterrupt):
        sq.run_until_decided(spec, out, run, judge, ALPHA)
    first = {p.parent.name: p.read_text() for p in out.glob("runs/main_*/eval.json")}
    assert len(first) == 2 and killed  # seeds 42 and 43 finished; 44 cut short
    assert "look 2 of ≤ 2 at α = 0.0125: added main: 44 — running" in sq.look_lines(out)
    sq.run_until_decided(spec, out, run, judge, ALPHA)
    table = pd.read_parquet(out / "results.parquet")
    runs = table[table["experiment"] == "main"]
    assert sorted(runs["seed"]) == [42, 43, 44] and set(runs["status"]) == {"done"}
    assert {k: (out / "runs" / k / "eval.json").read_text() for k in first} == first
    assert sq.read_state(out)["stopped"] == "the 2 looks the budget allows are spent"


# --- the false rates of the whole sequence ---------------------------------------------------


def _sequences(level: float, looks=(2, 4, 6), sd: float = 4.0) -> tuple[float, float]:
    """False support and false contradiction rates of the sequential rule at ``level`` per look,
    a paired contrast's true effect at its margin (5 pp; published 10 pp, so that "lacks power"
    holds while seeds are few)."""
    part = Part("Δ", "paired contrast", lambda ev: [], POOLED, ABOVE, 5.0, "test", 10.0)
    diffs = np.random.default_rng(0).normal(5.0, sd, size=(SEQUENCES, looks[-1]))
    support = contra = 0
    for row in diffs:
        for n in looks:
            x = row[:n]
            est = Estimate("pooled", float(x.mean()), float(x.std(ddof=1) / math.sqrt(n)), n - 1, n)
            d = decide_stratum(part, est, level, level)
            support += d.state == SUPPORTED
            contra += d.state == CONTRADICTED
            if LACKS_POWER not in d.reason:
                break
    return support / SEQUENCES, contra / SEQUENCES


def test_bonferroni_over_the_looks_keeps_the_sequences_false_rates_at_alpha(monkeypatch):
    # the same quantiles, computed once each (the simulation decides ~57,000 times)
    cached = functools.lru_cache(maxsize=None)(interval_mod.t_quantile)
    monkeypatch.setattr(interval_mod, "t_quantile", cached)
    mc = 3 * math.sqrt(ALPHA * (1 - ALPHA) / SEQUENCES)  # 3 Monte Carlo SEs
    k = sq.max_looks(_spec())
    support, contra = _sequences(ALPHA / k)
    assert support <= ALPHA + mc and contra <= ALPHA + mc
    naive, naive_contra = _sequences(ALPHA)  # every look at α: the sequence's rates inflate
    assert naive > ALPHA + mc and naive_contra > ALPHA + mc
    rates = [round(r, 3) for r in (support, contra, naive, naive_contra)]
    assert rates == [0.019, 0.019, 0.053, 0.053]  # the docstring's numbers
