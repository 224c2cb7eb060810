"""The papers' regime (docs/testbed.md): each target against the build record of the regime
candidate (``bench/records/testbed-regime-2026-12-06``, ``testbed build --recipe regime``), and
the reading of targets, bounds and values."""

import copy
from pathlib import Path

import pytest

from distillscope import testbed
from distillscope.cli.testbed_cmd import opd_answer_budget
from distillscope.testbed.regime import STUDY_KEYS, TARGETS, Target, regime_rows, regime_values

ROOT = Path(__file__).resolve().parents[2]
CANDIDATE = ROOT / "bench" / "records" / "testbed-regime-2026-12-06"
INFO = testbed.testbed_info(CANDIDATE)
#: The target the candidate misses (docs/testbed.md, "The papers' regime"): its latent
#: capability on tb-countdown3 carries to the harder variant (pass@10 18%, bound 10%).
MISSED = {"student_harder_pass@10"}
BUILD_KEYS = [
    pytest.param(t.key, marks=pytest.mark.xfail(strict=True, reason="measured: 18% > 10%"))
    if t.key in MISSED
    else t.key
    for t in TARGETS
    if t.key not in STUDY_KEYS
]


@pytest.mark.parametrize("key", BUILD_KEYS)
def test_every_build_measured_target_holds_on_the_candidates_record(key):
    """Untrained student: accuracy 3–25% at T 0.5, pass@32 ≥ 40% at T 1, the second style in
    1–30% of flagged answers at T 1, skills ≥ 90%, harder-variant pass@10 < 10% (missed);
    teacher ≥ 60%; the ``opd`` experiment's answer budget ≥ 3× the student's mean answer."""
    target = next(t for t in TARGETS if t.key == key)
    value = regime_values(INFO, opd_answer_budget())[key]
    assert target.holds(value), (key, value, target.bounds())


def test_the_candidate_was_built_by_the_regime_recipe_from_the_shipped_pretraining():
    """The record names the ``regime`` recipe, and the teacher it measured is the shipped one
    (same numbers as the shipped record: the build reused it)."""
    import json
    from dataclasses import asdict

    from distillscope.testbed.recipe import RECIPES

    assert INFO["recipe"] == json.loads(json.dumps(asdict(RECIPES["regime"])))
    shipped = testbed.testbed_info()
    assert (
        INFO["records"]["student"]["train_seconds"]
        == (shipped["records"]["student"]["train_seconds"])
    )
    for key, value in shipped["measured"]["teacher"].items():
        assert INFO["measured"]["teacher"][key] == value, key


#: Study-level targets the candidate's study measured and missed (docs/testbed.md): no
#: reverse-KL run collapses at 3e-4, and bf16 sparsity is ~2.7% (BENCHMARKS.md explains why).
STUDY_MISSED = {"reverse_kl_collapses", "bf16_sparsity"}


@pytest.mark.parametrize("key", sorted(INFO.get("regime", {})))
def test_every_study_measured_target_on_the_candidates_record(key):
    target = next(t for t in TARGETS if t.key == key)
    holds = target.holds(regime_values(INFO)[key])
    assert holds is (key not in STUDY_MISSED), (key, INFO["regime"][key])


def test_the_latent_measures_are_the_opd_experiments_coverage():
    """pass@32 is measured as the ``paper`` preset's ``opd`` runs measure coverage."""
    from distillscope.safeyaml import load_yaml_file
    from distillscope.study.spec import PRESETS_DIR

    spec = load_yaml_file(PRESETS_DIR / "paper.yaml")
    opd = next(e for e in spec["experiments"] if e["name"] == "opd")["overrides"]
    ev = spec["base"]["eval"]
    latent = INFO["eval"]["latent"]
    assert (latent["items"], latent["samples"], latent["temperature"]) == (
        ev["coverage_items"],
        opd["eval.coverage_samples"],
        ev["coverage_temperature"],
    )
    assert INFO["eval"]["temperature"] == ev["temperature"]


def test_the_opd_budget_reads_the_experiments_override():
    assert opd_answer_budget("paper", "opd") == 48
    assert opd_answer_budget("paper", "main") == 24  # no override: the base task's


def _info(**student) -> dict:
    info = copy.deepcopy(INFO)
    info["measured"]["student"].update(student)
    return info


def test_values_out_of_bounds_and_unmeasured_are_told_apart():
    info = _info(countdown3_accuracy=0.30, alt_style_share_with_flag_t1=0.0)
    info.pop("regime", None)
    values = regime_values(info)
    target = {t.key: t for t in TARGETS}
    assert target["student_accuracy"].holds(values["student_accuracy"]) is False
    assert target["style_share"].holds(values["style_share"]) is False
    notes = {t.key: (v, note) for t, v, note in regime_rows(info)}
    for key in STUDY_KEYS:
        assert notes[key] == (None, "not measured on this build")
        assert target[key].holds(None) is None


def test_study_values_come_with_their_source():
    info = _info()
    info["regime"] = {"grpo_gain_z": {"value": 2.5, "source": "bench/records/x"}}
    rows = {t.key: (v, note) for t, v, note in regime_rows(info)}
    assert rows["grpo_gain_z"] == (2.5, "bench/records/x")


def test_bounds_and_formats():
    t = Target("k", "label", 0.03, 0.25, "%")
    assert t.bounds() == "3.0%–25.0%" and t.holds(0.03) and not t.holds(0.251)
    assert Target("k", "l", 3.0, None, "x").bounds() == "≥ 3.00×"
    assert Target("k", "l", None, 0, "n").bounds() == "≤ 0"


def test_the_testbed_page_quotes_the_candidates_record():
    """docs/testbed.md's regime table: each candidate value is its record's."""
    s = INFO["measured"]["student"]
    text = (ROOT / "docs" / "testbed.md").read_text()
    ratio = opd_answer_budget() / s["countdown3_len_mean"]
    for row in (
        f"| 3–25% | **{100 * s['countdown3_accuracy']:.1f}%** |",
        f"| ≥ 40% | **{100 * s['countdown3_pass@32']:.1f}%** |",
        f"| 1–30% | **{100 * s['alt_style_share_with_flag_t1']:.1f}%** |",
        f"| ≥ 90% | **{100 * s['skill_mean']:.1f}%** |",
        f"| < 10% | **{100 * s['harder_pass@10']:.1f}%** (missed) |",
        f"length ({s['countdown3_len_mean']:.1f}) | ≥ 3 | **{ratio:.2f}** ({opd_answer_budget()} ",
        f"then runs the base phase, {INFO['records']['student']['base_seconds']:.0f} s on one",
    ):
        assert row in text, row


def test_the_testbed_page_quotes_the_candidates_study():
    import pandas as pd

    df = pd.read_parquet(CANDIDATE / "study" / "results.parquet")
    runs = df[(df["experiment"] == "collapse") & (df["status"] == "done")]
    text = (ROOT / "docs" / "testbed.md").read_text()

    def span(kind: str, key: str) -> str:
        values = sorted(100 * runs[runs["objective.kind"] == kind][key])
        return f"{values[0]:.1f}–{values[-1]:.1f}"

    forget = sorted(runs["eval/forgetting_pp"])
    assert f"reverse KL ends at {span('reverse_kl', 'eval/accuracy')}%" in text
    assert f"forward KL at {span('forward_kl', 'eval/accuracy')}%" in text
    assert f"(forgetting {forget[-1]:.1f} to {forget[0]:.1f}\n  pp)" in text.replace("−", "-")
    sparse = INFO["regime"]["bf16_sparsity"]["value"]
    assert f"forward-KL runs: {100 * sparse:.1f}%" in text
    grpo = df[(df["experiment"] == "grpo") & (df["status"] == "done")]
    for _, r in grpo.iterrows():
        before, after = 100 * r["rlvr/eval_accuracy_before"], 100 * r["rlvr/eval_accuracy"]
        assert f"{before:.1f}% → {after:.1f}%" in text
    z = INFO["regime"]["grpo_gain_z"]
    assert f"{z['source'].split('(')[1].split(',')[0]}" in text.replace("\n  ", " ")
    assert f"{z['value']:.1f} SE: **held**" in text


def test_testbed_info_prints_every_regime_target(monkeypatch):
    from typer.testing import CliRunner

    from distillscope.cli import app
    from distillscope.cli.output import console

    # the console took its width when first imported (COLUMNS then, or 80): wide enough that
    # no label wraps inside its cell, whichever test imported it first
    monkeypatch.setattr(console, "width", 200)
    out = CliRunner().invoke(app, ["testbed", "info", "--root", str(CANDIDATE)])
    assert out.exit_code == 0, out.output
    for target in TARGETS:
        assert target.label in out.output, target.label
    assert "79.0%" in out.output  # the candidate's pass@32


def test_build_refuses_an_unknown_recipe_before_any_work(tmp_path):
    from typer.testing import CliRunner

    from distillscope.cli import app

    out = CliRunner().invoke(app, ["testbed", "build", "--out", str(tmp_path), "--recipe", "v9"])
    assert out.exit_code != 0
    assert "--recipe 'v9': choose one of ['regime', 'shipped']" in out.output
    assert not any(tmp_path.iterdir())
