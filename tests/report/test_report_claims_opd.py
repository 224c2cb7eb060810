"""Scorecard rules of the [D] OPD claims and their neighbours (docs/method.md §9 claims 16, 17,
21–23, 25) on synthetic tables whose verdicts are known by construction: null, degenerate and
planted tables, missing measurements, and the adversarial tables of issue 20.

Every rule is run strictly (an exception fails the test): a rule that raises is a bug.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from distillscope.report import score_claims
from distillscope.report.claimkit import NOT_TESTED
from distillscope.report.claims_opd import (
    ADV_RISE,
    LEN_RISE,
    REWARD_DROP,
    TEACHER_PARAMS,
)
from distillscope.report.trajectories import trajectory_features

DECIDED = {"supported", "contradicted"}
REGS = ("none", "hard_clip", "log_compress")


def _result(df: pd.DataFrame, claim: int, study_dir=None):
    return {r.id: r for r in score_claims(df, study_dir, strict=True, claims=[claim])}[claim]


def _wiggle(step: int, seed: int) -> float:
    """Deterministic step noise in [−1, 1]."""
    return ((step * 7 + seed) % 5 - 2) / 2


def opd_curve(
    seed: int, exploit: bool = False, grow: bool | None = None, advantage: bool | None = None
) -> list[dict]:
    """An OPD run's metrics.jsonl, 40 steps. ``exploit``: the reward peaks at mid-run and
    falls 30 pp while length and mean advantage rise; ``grow``/``advantage`` override those two
    (default: as ``exploit``). Every series carries a little step noise."""
    grow = exploit if grow is None else grow
    advantage = exploit if advantage is None else advantage
    out = []
    for s in range(40):
        t, w = s / 39, _wiggle(s, seed)
        reward = 0.3 + 0.3 * min(2 * t, 1) - (0.6 * max(t - 0.5, 0) if exploit else 0.0)
        out.append(
            {
                "step": s,
                "train/loss": 1.0,
                "rollout/reward": reward + 0.01 * w,
                "rollout/len_mean": 20.0 + (20.0 * max(t - 0.5, 0) if grow else 0.0) + 0.3 * w,
                "opd/advantage_mean": -1.0
                + (1.6 * max(t - 0.5, 0) if advantage else 0.0)
                + 0.02 * w,
            }
        )
    return out


def opd_study(synth, tmp_path, exploit=("none",), experiment="opd", curve=opd_curve, extra=()):
    """An `opd` experiment of 3 regulations × 3 seeds written as a study directory; the
    regulations in ``exploit`` show length exploitation. ``extra``: more (row, curve) pairs."""
    rows, metrics = [], {}
    for reg in REGS:
        for seed in synth.SEEDS:
            row = synth.run_row(
                experiment, "student", "opd", synth.LOW, seed, regulation=reg, tag=f"-{reg}"
            )
            row["eval/accuracy"] = 0.6
            rows.append(row)
            metrics[row["run_id"]] = curve(seed, exploit=reg in exploit)
    for row, lines in extra:
        rows.append(row)
        metrics[row["run_id"]] = lines
    rows.append(synth.baseline_row())
    root = synth.write_study(tmp_path / "study", rows, metrics=metrics)
    return pd.read_parquet(root / "results.parquet"), root


# 16 -----------------------------------------------------------------------------------------


def test_trajectory_features_measure_from_the_reward_peak():
    feats = trajectory_features(pd.DataFrame(opd_curve(42, exploit=True)))
    assert feats[REWARD_DROP] > 10.0  # peak quarter ~53% → last quarter ~38%
    assert feats[LEN_RISE] > 3.0 and feats[ADV_RISE] > 0.2
    flat = trajectory_features(pd.DataFrame(opd_curve(42)))
    assert flat[REWARD_DROP] < 5.0 and abs(flat[ADV_RISE]) < 0.05
    no_adv = pd.DataFrame(opd_curve(42, exploit=True)).drop(columns=["opd/advantage_mean"])
    assert math.isnan(trajectory_features(no_adv)[ADV_RISE])
    assert all(math.isnan(v) for v in trajectory_features(pd.DataFrame()).values())


def test_claim_16_supported_when_only_unregulated_runs_exploit(synth, tmp_path):
    df, root = opd_study(synth, tmp_path)
    r = _result(df, 16, root)
    assert r.verdict == "supported", r.evidence
    assert r.headline == "exploitation: unregulated 3/3, regulated 0/6"


def test_claim_16_null_and_regulated_exploitation(synth, tmp_path):
    df, root = opd_study(synth, tmp_path / "null", exploit=())
    assert _result(df, 16, root).verdict == "inconclusive"
    df, root = opd_study(synth, tmp_path / "reg", exploit=("hard_clip", "log_compress"))
    assert _result(df, 16, root).verdict == "contradicted"  # regulated 6/6 vs none 0/3
    df, root = opd_study(synth, tmp_path / "all", exploit=REGS)
    assert _result(df, 16, root).verdict == "inconclusive"  # a regulated run exploits


def test_claim_16_reads_only_the_opd_experiment(synth, tmp_path):
    # Adversarial (issue 20): 60 unregulated prompt-diversity runs exploit, the `opd`
    # experiment's 3 unregulated runs do not. Pooling would say "supported".
    extra = []
    for i in range(60):
        row = synth.run_row("diversity", "student", "opd", synth.LOW, 100 + i, tag="-div")
        row["eval/accuracy"] = 0.6
        extra.append((row, opd_curve(100 + i, exploit=True)))
    df, root = opd_study(synth, tmp_path, exploit=(), extra=extra)
    r = _result(df, 16, root)
    assert r.verdict == "inconclusive"
    assert "unregulated runs 0/3" in r.evidence and "60 OPD runs of other experiments" in r.evidence


def test_claim_16_without_the_opd_experiment_is_not_tested(synth, tmp_path):
    df, root = opd_study(synth, tmp_path, experiment="diversity")
    r = _result(df, 16, root)
    assert r.verdict == NOT_TESTED and "`opd` experiment" in r.evidence


def test_claim_16_advantage_flat_while_length_grows_is_no_exploitation(synth, tmp_path):
    # Adversarial (issue 20): reward falls and length grows, but the mean advantage stays flat.
    def flat_advantage(seed, exploit=False):
        return opd_curve(seed, exploit=exploit, advantage=False)

    df, root = opd_study(synth, tmp_path, curve=flat_advantage)
    r = _result(df, 16, root)
    assert r.verdict == "inconclusive" and "unregulated runs 0/3" in r.evidence

    def flat_length(seed, exploit=False):
        return opd_curve(seed, exploit=exploit, grow=False)

    df, root = opd_study(synth, tmp_path / "len", curve=flat_length)
    assert _result(df, 16, root).verdict == "inconclusive"


def test_claim_16_missing_trajectories_are_not_tested_with_words(synth, tmp_path):
    df, root = opd_study(synth, tmp_path)
    r = _result(df, 16)  # no study directory: no metrics.jsonl
    assert r.verdict == NOT_TESTED and "metrics.jsonl" in r.evidence

    def no_advantage(seed, exploit=False):
        return [
            {k: v for k, v in x.items() if k != "opd/advantage_mean"}
            for x in opd_curve(seed, exploit)
        ]

    df, root = opd_study(synth, tmp_path / "noadv", curve=no_advantage)
    r = _result(df, 16, root)
    assert r.verdict == NOT_TESTED and "lacks per-step opd/advantage_mean" in r.evidence


def test_claim_16_degenerate_trajectories_decide_nothing(synth, tmp_path):
    def constant(seed, exploit=False):
        return [
            {"step": s, "rollout/reward": 0.5, "rollout/len_mean": 20.0, "opd/advantage_mean": 0.0}
            for s in range(40)
        ]

    df, root = opd_study(synth, tmp_path, curve=constant)
    assert _result(df, 16, root).verdict == "inconclusive"


# 17 -----------------------------------------------------------------------------------------


def _diversity(synth, gain: float, spread: float = 0.01) -> pd.DataFrame:
    rows = []
    for p, g, acc in ((16, 1, 0.60 + gain), (4, 4, 0.60 + gain / 2), (2, 8, 0.60)):
        for seed, k in synth.SEEDS.items():
            vals = {"rollout.prompts_per_step": p, "rollout.rollouts_per_prompt": g}
            vals["eval/accuracy"] = acc + spread * k
            rows.append(
                synth.run_row("diversity", "student", "opd", synth.LOW, seed, tag=f"{p}", **vals)
            )
    return pd.DataFrame([*rows, synth.baseline_row()])


@pytest.mark.parametrize(
    "gain, verdict", [(0.08, "supported"), (0.0, "inconclusive"), (0.035, "inconclusive")]
)
def test_claim_17_planted_null_and_near_margin(synth, gain, verdict):
    r = _result(_diversity(synth, gain), 17)
    assert r.verdict == verdict, r.evidence
    assert r.headline.startswith("most − fewest prompts")


def test_claim_17_degenerate_and_missing(synth):
    assert _result(_diversity(synth, 0.08, spread=0.0), 17).verdict == "inconclusive"
    df = _diversity(synth, 0.08).drop(columns=["rollout.rollouts_per_prompt"])
    r = _result(df, 17)
    assert r.verdict == NOT_TESTED and "prompts_per_step" in r.evidence


# 21 -----------------------------------------------------------------------------------------


def _opd_table(synth, acc: dict[str, float], spread=0.01, experiment="opd", **values):
    rows = []
    for reg, a in acc.items():
        for seed, k in synth.SEEDS.items():
            row = synth.run_row(
                experiment, "student", "opd", synth.LOW, seed, regulation=reg, tag=f"-{reg}"
            )
            row.update({m: v + spread * k for m, v in values.get(reg, {}).items()})
            row["eval/accuracy"] = a + spread * k
            rows.append(row)
    return rows


@pytest.mark.parametrize(
    "acc, verdict",
    [
        ({"none": 0.55, "hard_clip": 0.63, "log_compress": 0.56}, "supported"),  # one route
        ({"none": 0.60, "hard_clip": 0.60, "log_compress": 0.60}, "inconclusive"),  # null
        ({"none": 0.60, "hard_clip": 0.62, "log_compress": 0.61}, "inconclusive"),  # < margin
        ({"none": 0.65, "hard_clip": 0.55, "log_compress": 0.57}, "contradicted"),
        ({"none": 0.65, "hard_clip": 0.55, "log_compress": 0.66}, "inconclusive"),  # mixed
    ],
)
def test_claim_21_regulated_minus_none(synth, acc, verdict):
    r = _result(pd.DataFrame(_opd_table(synth, acc)), 21)
    assert r.verdict == verdict, r.evidence
    assert "at 80% power this design detects a gain ≥" in r.evidence  # what 3 seeds can see


def test_claim_21_degenerate_missing_and_other_experiments(synth):
    acc = {"none": 0.55, "hard_clip": 0.63, "log_compress": 0.63}
    assert _result(pd.DataFrame(_opd_table(synth, acc, spread=0.0)), 21).verdict == "inconclusive"
    only_none = pd.DataFrame(_opd_table(synth, {"none": 0.55}))
    r = _result(only_none, 21)
    assert r.verdict == NOT_TESTED and "hard_clip" in r.evidence
    # regulated runs outside the `opd` experiment are not matched with its unregulated runs
    rows = _opd_table(synth, {"none": 0.55}) + _opd_table(
        synth, {"hard_clip": 0.70}, experiment="diversity"
    )
    assert _result(pd.DataFrame(rows), 21).verdict == NOT_TESTED


# 22 -----------------------------------------------------------------------------------------


def _teachers(synth, small_reg: float, large_none: float, sizes=True, spread=0.01):
    rows = []
    for teacher, size, reg, acc in (
        ("small", 1e8, "hard_clip", small_reg),
        ("small", 1e8, "none", small_reg - 0.05),
        ("large", 1e9, "none", large_none),
        ("large", 1e9, "hard_clip", large_none + 0.02),
    ):
        for seed, k in synth.SEEDS.items():
            row = synth.run_row(
                "teachers",
                "student",
                "opd",
                synth.LOW,
                seed,
                regulation=reg,
                tag=f"-{teacher}{reg}",
            )
            row["model.teacher"] = teacher
            row["eval/accuracy"] = acc + spread * k
            if sizes:
                row[TEACHER_PARAMS] = size
            rows.append(row)
    return pd.DataFrame(rows)


def test_claim_22_needs_two_teachers_and_their_sizes(synth):
    one = pd.DataFrame(_opd_table(synth, {"none": 0.55, "hard_clip": 0.63}))
    r = _result(one, 22)
    assert r.verdict == NOT_TESTED and "two teachers" in r.evidence
    r = _result(_teachers(synth, 0.70, 0.60, sizes=False), 22)
    assert r.verdict == NOT_TESTED and TEACHER_PARAMS in r.evidence


@pytest.mark.parametrize(
    "small, large, verdict",
    [(0.70, 0.60, "supported"), (0.60, 0.60, "inconclusive"), (0.50, 0.62, "contradicted")],
)
def test_claim_22_smaller_regulated_minus_larger_unregulated(synth, small, large, verdict):
    r = _result(_teachers(synth, small, large), 22)
    assert r.verdict == verdict, r.evidence
    assert "small hard clip − large unregulated" in r.evidence


def test_claim_22_degenerate(synth):
    assert _result(_teachers(synth, 0.70, 0.60, spread=0.0), 22).verdict == "inconclusive"


# 23 -----------------------------------------------------------------------------------------


def _catalyst(synth, gain: float, gap: float, baselines: int = 3, spread: float = 0.01, k=32):
    """`opd` runs with pass@1 ``gain`` and pass@k ``gap`` over the untrained student."""
    acc = dict.fromkeys(REGS, 0.6)
    values = dict.fromkeys(REGS, {"eval/pass@1": 0.3 + gain, f"eval/pass@{k}": 0.8 + gap})
    rows = []
    for reg in REGS:
        for seed, j in synth.SEEDS.items():
            row = synth.run_row(
                "opd", "student", "opd", synth.LOW, seed, regulation=reg, tag=f"-{reg}"
            )
            row.update({m: v + spread * j for m, v in values[reg].items()})
            row["eval/accuracy"] = acc[reg] + spread * j
            rows.append(row)
    for i in range(baselines):
        j = (i % 3) - 1
        base = synth.baseline_row() | {"run_id": f"baseline-{i + 1}", "seed": 42 + i}
        base.update({"eval/pass@1": 0.3 + spread * j, f"eval/pass@{k}": 0.8 + spread * j})
        rows.append(base)
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "gain, gap, verdict",
    [
        (0.10, 0.0, "supported"),  # catalyst: pass@1 +10 pp, pass@32 unchanged
        (0.0, 0.0, "inconclusive"),  # null: no pass@1 gain
        (0.03, 0.0, "inconclusive"),  # gain below 5 pp
        (0.10, 0.03, "inconclusive"),  # pass@32 gap at its margin: not equivalent
        (0.10, 0.10, "contradicted"),  # OPD breaks the ceiling
        (-0.10, 0.0, "contradicted"),  # OPD loses pass@1
    ],
)
def test_claim_23_catalyst_not_ceiling_breaker(synth, gain, gap, verdict):
    r = _result(_catalyst(synth, gain, gap), 23)
    assert r.verdict == verdict, r.evidence
    assert "pass@32" in r.headline


def test_claim_23_degenerate_and_one_baseline(synth):
    assert _result(_catalyst(synth, 0.10, 0.0, spread=0.0), 23).verdict == "inconclusive"
    # one untrained-student row: its noise is taken to be a run's, so equivalence is harder
    r = _result(_catalyst(synth, 0.10, 0.0, baselines=1), 23)
    assert r.verdict in ("supported", "inconclusive")


def test_claim_23_missing_pass_at_32_is_not_tested(synth):
    r = _result(_catalyst(synth, 0.10, 0.0, k=10), 23)
    assert r.verdict == NOT_TESTED
    assert "pass@32 on the `opd` runs (measured up to pass@10)" in r.evidence
    df = _catalyst(synth, 0.10, 0.0)
    df.loc[df["experiment"] == "baseline", "eval/pass@32"] = math.nan
    r = _result(df, 23)
    assert r.verdict == NOT_TESTED and "pass@32 on the untrained student" in r.evidence
    r = _result(df[df["experiment"] != "baseline"], 23)
    assert r.verdict == NOT_TESTED and "the untrained student (baseline rows)" in r.evidence


# 25 -----------------------------------------------------------------------------------------


def _long_chains(synth, seeds=(42,), teacher="/models/Qwen2.5-7B-Instruct", task="math"):
    rows = []
    for policy in ("student", "teacher"):
        for kind in ("forward_kl", "reverse_kl"):
            for seed in seeds:
                row = synth.run_row(task, policy, kind, synth.LOW, seed)
                row.update({"task.name": task, "model.teacher": teacher, "eval/len_mean": 622.0})
                best = (policy, kind) == ("student", "reverse_kl")
                row["eval/accuracy"] = (0.80 if best else 0.40) + 0.001 * (seed - 42)
                rows.append(row)
    return pd.DataFrame(rows)


def test_claim_25_is_an_observation_never_supported(synth):
    r = _result(_long_chains(synth), 25)
    assert r.verdict == "inconclusive" and r.evidence.startswith("observation")
    assert "OnPD" in r.headline and "reverse KL" in r.headline and "80.0%" in r.headline
    assert "622 tokens" in r.evidence
    # three seeds and a 40 pp gap: still an observation
    assert _result(_long_chains(synth, seeds=(42, 43, 44)), 25).verdict == "inconclusive"
    # the real presets' long_chain experiment: Numina-MATH from its hub
    hub = _result(_long_chains(synth, task="numina-math"), 25)
    assert hub.verdict == "inconclusive" and "80.0%" in hub.headline


def test_claim_25_needs_a_long_chain_task_with_real_models(synth):
    r = _result(_diversity(synth, 0.0), 25)
    assert r.verdict == NOT_TESTED and "long-chain task (real models)" in r.evidence
    r = _result(_long_chains(synth, teacher="testbed:teacher"), 25)
    assert r.verdict == NOT_TESTED


# every claim of this brief --------------------------------------------------------------------


@pytest.mark.parametrize("fill", [0.0, 0.5])
def test_degenerate_tables_decide_none_of_these_claims(synth, fill):
    df = pd.concat(
        [
            _catalyst(synth, 0.1, 0.0),
            _teachers(synth, 0.7, 0.6),
            _diversity(synth, 0.08),
            _long_chains(synth, seeds=(42, 43, 44)),
        ],
        ignore_index=True,
    )
    df = df[~df["run_id"].duplicated()]
    metrics = [c for c in df.columns if "/" in c and c != TEACHER_PARAMS]
    df[metrics] = fill
    for r in score_claims(df, strict=True, claims=[16, 17, 21, 22, 23, 25]):
        assert r.verdict not in DECIDED, (r.id, r.verdict, r.evidence)
