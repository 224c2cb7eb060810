"""The scorecard calibrated by simulation: presets reach their rules, rates meet the targets,
and ``distillscope report --calibrate`` prints them (black box, through the CLI)."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.results.reader import CALIBRATION_FILE, load_study
from distillscope.scorecard import calibrate as calibrate_module
from distillscope.scorecard import score_claims
from distillscope.scorecard.calibrate import (
    calibrate,
    noise_model,
    planned_table,
    simulate,
    tables,
)
from distillscope.scorecard.calibration_run import UNSCORED
from distillscope.scorecard.claims.c01_no_rollout_gain import MARGIN_PP as CLAIM_01_MARGIN_PP
from distillscope.scorecard.noise import Components
from distillscope.scorecard.plants import all_margin_cases, margin_offsets
from distillscope.study.spec import PRESETS_DIR, expand, load_spec
from distillscope.study.table import plan_row

#: The experiment of the paper preset that each claim's rule reads.
CLAIM_EXPERIMENT = {
    **dict.fromkeys((1, 2, 3, 4, 9, 10, 13), "main"),
    5: "lr_sweep",
    **dict.fromkeys((6, 7, 8), "spectrum"),
    24: "main",  # or the spectrum, at the high LR
    12: "style",
    14: "no_clip",
    15: "sampled",
    16: "opd",
    17: "diversity",
    21: "opd",
}


def _design(preset: str, experiments: tuple[str, ...] | None = None) -> pd.DataFrame:
    runs = [r for r in expand(load_spec(preset)) if not experiments or r.experiment in experiments]
    return planned_table([plan_row(r) for r in runs])


@pytest.mark.parametrize("preset", sorted(p.stem for p in PRESETS_DIR.glob("*.yaml")))
def test_every_experiment_of_a_preset_reaches_its_rule(preset):
    df = _design(preset)
    table = simulate(df, "planted", seed=1)
    present = set(df["experiment"])
    main = df[df["experiment"] == "main"]
    if main["optim.lr"].nunique() < 2:  # smoke: one LR, so the LR claims need what it lacks
        present.discard("main")
    results = score_claims(table, strict=True)
    untested = [
        r.id for r in results if CLAIM_EXPERIMENT.get(r.id) in present and r.verdict == "not tested"
    ]
    assert not untested, untested


def test_noise_model_reads_the_study_components(synth):
    """The main grid's seeds 42/43/44 shift every cell alike by −d, 0, +d in rotation; the
    components come from ``noise.estimate_noise`` and fall back to the defaults on one seed."""
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC), spread=0.02)
    df = pd.DataFrame([*rows, synth.baseline_row()])
    noise = noise_model(df, ["eval/accuracy", "eval/forgetting_pp", "train/steps_done"])
    assert noise["eval/accuracy"].eval_var() > 0 and noise["eval/forgetting_pp"].scale == 100.0
    assert noise["train/steps_done"].train_sd > 0  # absent: 5% of a typical size
    one_seed = noise_model(df[df["seed"] == 42], ["eval/accuracy"])["eval/accuracy"]
    assert one_seed.seed_sd == 0.0  # no seed term without two seeds
    assert one_seed.run_var() == pytest.approx(max(0.03**2, one_seed.eval_var()))


def test_calibration_meets_targets_on_a_three_seed_main_grid():
    # The paper's main grid (3 seeds) at 3 pp noise; a modest number of draws, seeded.
    df = _design("paper", ("main",))
    claims = (1, 2, 4, 9)
    scored = []
    cal = calibrate(df, draws=10, seed=0, claims=claims, on_table=lambda: scored.append(1))
    # null, planted, one margin case each for claims 1, 2, 4 and 9; zeros, constant once
    assert len(scored) == tables(10, claims) == (2 + 4) * 10 + 2
    assert set(cal["rates"]["margin"]) == {"1", "2", "4", "9"}
    assert simulate(df, "null", seed=3).equals(simulate(df, "null", seed=3))  # seeded
    for c in map(str, claims):
        assert cal["false_rate"][c] <= 0.1, (c, cal["rates"]["null"][c])
    # at 3 pp seed noise and 3 seeds, ±5 pp equivalence of best-vs-best cells and a 5 pp band
    # for forward KL's four cells are beyond the design (docs/scorecard.md): power stays low
    assert cal["power"]["1"] <= 0.3 and cal["power"]["2"] <= 0.3
    assert cal["power"]["9"] >= 0.6
    for scenario in ("zeros", "constant"):  # never decided (all-zero sparsity: on its floor)
        for c in map(str, claims):
            assert set(cal["rates"][scenario][c]) <= {"inconclusive", "not applicable"}


def test_main_grid_rules_have_power_where_the_seed_noise_allows(monkeypatch):
    # the same design at 0.5 pp per run (0.1 pp for sparsity, 0.5 pp for forgetting), half of it
    # a seed effect shared by the cells of a seed: every rule reaches its published effect, and
    # still keeps its false verdicts rare
    df = _design("paper", ("main",))

    def low_noise(_df, metrics, _study_dir=None):
        out = {}
        for m in metrics:
            sd = 0.5 if m == "eval/forgetting_pp" else 0.005
            sd = 0.001 if m.startswith("eval/sparsity") else sd  # barely varies by seed
            out[m] = Components(sd / math.sqrt(2), sd / math.sqrt(2), 0, 0, None)
        return out

    monkeypatch.setattr(calibrate_module, "noise_model", low_noise)
    claims = (1, 2, 3, 4, 9)
    cal = calibrate(df, draws=10, seed=0, claims=claims)
    for c in map(str, claims):
        assert cal["false_rate"][c] <= 0.1, (c, cal["rates"])
        # claim 3's planted rollout effect (OffPD forgets 1 pp less, which claim 5 needs) sits
        # half-way to its ±2 pp margin in each of the 4 LR × KL cells it must pass (not pooled
        # over KL, docs/method.md §9): its power is low by design; 10 draws do not pin it down
        if c != "3":
            assert cal["power"][c] >= 0.8, (c, cal["rates"]["planted"][c])


def test_report_cli_prints_false_verdict_rates(tmp_path):
    # A study directory as `distillscope study --preset quick` leaves it (study.yaml, results
    # table of its planned runs plus the baseline row), numbers drawn with the published effects.
    root = tmp_path / "study"
    root.mkdir()
    shutil.copy(PRESETS_DIR / "quick.yaml", root / "study.yaml")
    # (seed 1: a draw in which the quick design's 2 seeds decide some claims — 10 and 13)
    simulate(_design("quick"), "planted", seed=1).to_parquet(root / "results.parquet")
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(root), "--no-calibrate"])
    assert result.exit_code == 0, result.output
    md = (root / "report" / "report.md").read_text()
    assert "False-verdict rate" in md and "| not calibrated |" in md
    assert "✓ supported" in md and not (root / CALIBRATION_FILE).exists()

    result = runner.invoke(app, ["report", str(root), "--draws", "2"])  # on by default
    assert result.exit_code == 0, result.output
    cal = json.loads((root / CALIBRATION_FILE).read_text())
    tested = [
        r.id for r in score_claims(load_study(root).scored, root) if r.verdict not in UNSCORED
    ]
    assert cal["draws"] == 2 and set(cal["false_rate"]) == {str(c) for c in tested}
    md = (root / "report" / "report.md").read_text()
    html = (root / "report" / "report.html").read_text()
    rate = cal["false_rate"]["2"]
    shown = f"{100 * rate:.1f}% (2 draws)"
    assert shown in md and shown in html
    assert "| not calibrated |" not in md
    assert "Seed SD (pp)" in md and "false support" in md  # components; rates in the summary
    stamp = (root / CALIBRATION_FILE).stat().st_mtime_ns
    assert runner.invoke(app, ["report", str(root), "--draws", "2"]).exit_code == 0
    assert (root / CALIBRATION_FILE).stat().st_mtime_ns == stamp  # the same design: cached


def test_margin_cases_put_each_no_effect_part_at_its_margin():
    df = _design("paper", ("main", "spectrum", "no_clip", "sampled"))
    d = simulate(df, "null", seed=0)
    by_name = {(c.claim, c.name): c for c in all_margin_cases()}
    acc = by_name[(1, "OnPD +margin in the main grid")].offsets(d)["eval/accuracy"]
    main_on = ((d["experiment"] == "main") & (d["rollout.policy"] == "student")).to_numpy()
    assert set(acc[main_on]) == {CLAIM_01_MARGIN_PP / 100} and not acc[~main_on].any()
    # claim 7's cases sit on the planted effects (it needs an LR effect), not on the null
    assert "eval/forgetting_pp" not in margin_offsets(d)
    # claim 2: one forward-KL cell raised by the range margin, on top of the published effects
    case = by_name[(2, "forward KL's range at the margin")]
    assert case.on_planted
    rows = d[case.offsets(d)["eval/accuracy"] != 0]
    assert set(rows["objective.kind"]) == {"forward_kl"} and rows["optim.lr"].nunique() == 1
    assert set(rows["experiment"]) == {"main"}
    # the robustness claims' cases are the replayed claims' own, each placed on the ablation
    for claim, experiment, n in ((14, "no_clip", 5), (15, "sampled", 2)):
        cases = [c for c in all_margin_cases() if c.claim == claim]
        assert len(cases) == n
        for case in cases:
            moved = np.zeros(len(d), dtype=bool)
            for v in case.offsets(d).values():
                moved |= np.asarray(v) != 0
            assert moved.any() and set(d[moved]["experiment"]) == {experiment}, case.name
        on = cases[0].offsets(d)["eval/accuracy"] != 0  # claim 1's: the ablation's OnPD runs
        assert cases[0].name.startswith("claim 1:") and set(d[on]["rollout.policy"]) == {"student"}


def test_at_the_margin_no_effect_parts_are_rarely_supported():
    # claims 14 and 15 are left out: they judge only the conclusions the main grid decides,
    # and at this design's default noise claim 1 is mostly undecided there, so "supported"
    # at claim 1's margin on the ablation is true of the decided ones (test_report_scorecard
    # checks the replay at a margin where the main grid decides)
    df = _design("paper", ("main", "no_clip", "sampled"))
    claims = (1, 2, 3, 9)
    cal = calibrate(df, draws=20, seed=0, claims=claims)
    for c in map(str, claims):
        at_margin = cal["rates"]["margin"][c].get("supported", 0.0)
        assert at_margin <= 0.1, (c, cal["rates"]["margin"][c])
        assert cal["false_rate"][c] >= at_margin


def test_a_grid_with_another_name_is_not_read_as_the_main_grid():
    # a custom study whose grid is not called "main": claim 1 declares `main` and reads nothing
    # else (no fallback), and its margin case moves nothing
    df = _design("quick").replace({"experiment": {"main": "grid"}})
    d = simulate(df, "null", seed=0)
    (case,) = [c for c in all_margin_cases() if c.claim == 1]
    assert not case.offsets(d)["eval/accuracy"].any()
    (result,) = score_claims(d, claims=[1], strict=True)
    assert result.verdict == "not tested" and "`main`" in result.evidence


def test_columns_compared_as_one_measure_share_the_null_level():
    # claim 27 compares OPD's eval/accuracy with GRPO's rlvr/eval_accuracy. A study whose GRPO
    # runs barely learn (5% against 40%) must not carry that gap into the null world, where it
    # made "supported" the rule on every table; with [D]'s 5 pp planted it is found again
    df = _design("paper", ("opd", "grpo"))
    grpo = (df["experiment"] == "grpo").to_numpy()
    assert grpo.any() and (~grpo).any()
    df["rlvr/eval_accuracy"] = np.where(grpo, 0.05, np.nan)
    null = simulate(df, "null", seed=3)
    opd = null[null["experiment"] == "opd"]["eval/accuracy"].mean()
    assert null[grpo]["rlvr/eval_accuracy"].mean() == pytest.approx(opd, abs=0.03)
    planted = simulate(df, "planted", seed=3)
    gap = planted[grpo]["rlvr/eval_accuracy"].mean() - null[grpo]["rlvr/eval_accuracy"].mean()
    assert gap == pytest.approx(-0.05, abs=0.03)
    cal = calibrate(df, draws=10, seed=0, claims=(27,))
    assert cal["rates"]["null"]["27"].get("supported", 0.0) <= 0.1
    assert cal["rates"]["planted"]["27"].get("supported", 0.0) > 0.0


def test_the_rlvr_stage_plant_leaves_another_rlvr_experiment_alone():
    # claims 11 and 20 plant the `rlvr` stage's picture; the `grpo` stage (claim 27's baseline)
    # is another RLVR experiment and keeps its own planted effect only
    df = _design("paper", ("rlvr", "grpo"))
    d = simulate(df, "null", seed=0)
    from distillscope.scorecard.claims.c11_rlvr_survival import planted

    moved = planted(d)["rlvr/eval_accuracy"] != 0
    assert moved.any() and set(d[moved]["experiment"]) == {"rlvr"}


def test_no_rule_is_structurally_false_on_the_paper_record():
    """The committed paper record (bench/records/paper-2026-12-03: its design, its per-item
    outcomes, its trajectories), calibrated as the report does at 10 draws: no rule gives a
    false verdict on half of a scenario's tables. A structural fault does — claim 27's null
    kept GRPO's 14% against OPD's 40% and was "supported" on every null table — while a rule
    at its 5% level reaches 5 of 10 with probability 6e-5."""
    from pathlib import Path

    from distillscope.scorecard.calibration_run import UNSCORED
    from distillscope.scorecard.claims import CLAIMS
    from distillscope.scorecard.runner import add_features

    root = Path(__file__).parents[2] / "bench" / "records" / "paper-2026-12-03"
    study = load_study(root)
    df = add_features(study.scored, study.metrics, list(CLAIMS))
    tested = [r.id for r in score_claims(df) if r.verdict not in UNSCORED]
    assert len(tested) >= 25
    cal = calibrate(df, draws=10, seed=0, claims=tested, study_dir=root)
    worst = {c: r for c, r in cal["false_rate"].items() if r >= 0.5}
    assert not worst, {c: {s: cal["rates"][s].get(c) for s in cal["rates"]} for c in worst}
