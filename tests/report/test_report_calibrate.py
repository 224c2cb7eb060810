"""The scorecard calibrated by simulation: presets reach their rules, rates meet the targets,
and ``distillscope report --calibrate`` prints them (black box, through the CLI)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.report import score_claims
from distillscope.report.calibrate import (
    CALIBRATION_FILE,
    calibrate,
    margin_offsets,
    noise_model,
    planned_table,
    simulate,
    tables,
)
from distillscope.study.spec import PRESETS_DIR, expand, load_spec
from distillscope.study.table import plan_row

#: The experiment of the paper preset that each claim's rule reads.
CLAIM_EXPERIMENT = {
    **dict.fromkeys((1, 2, 3, 4, 9, 10, 13), "main"),
    5: "lr_sweep",
    **dict.fromkeys((6, 7, 8), "spectrum"),
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


def test_noise_model_pools_seed_variance_and_falls_back_to_defaults(synth):
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC), spread=0.02)
    df = pd.DataFrame([*rows, synth.baseline_row()])
    noise = noise_model(df, ["eval/accuracy", "eval/forgetting_pp", "train/steps_done"])
    assert noise["eval/accuracy"] == pytest.approx(0.02)  # offsets −d, 0, +d: SD d
    assert noise["eval/forgetting_pp"] == pytest.approx(2.0)  # pp metrics get 100 × spread
    assert noise["train/steps_done"] > 0  # absent: 5% of a typical size
    one_seed = noise_model(df[df["seed"] == 42], ["eval/accuracy"])
    assert one_seed["eval/accuracy"] == pytest.approx(0.03)  # no cell with 2 seeds: 3 pp


def test_calibration_meets_targets_on_a_three_seed_main_grid():
    # The paper's main grid (3 seeds) at 3 pp noise; a modest number of draws, seeded.
    df = _design("paper", ("main",))
    claims = (1, 2, 4, 9)
    scored = []
    cal = calibrate(df, draws=10, seed=0, claims=claims, on_table=lambda: scored.append(1))
    # null, margin (claim 1 only), planted; zeros, constant once
    assert len(scored) == tables(10, claims) == 3 * 10 + 2
    assert set(cal["rates"]["margin"]) == {"1"}
    assert simulate(df, "null", seed=3).equals(simulate(df, "null", seed=3))  # seeded
    for c in map(str, claims):
        assert cal["false_rate"][c] <= 0.1, (c, cal["rates"]["null"][c])
        assert cal["power"][c] >= 0.8, (c, cal["rates"]["planted"][c])
    for scenario in ("zeros", "constant"):
        for c in map(str, claims):
            assert set(cal["rates"][scenario][c]) == {"inconclusive"}


def test_report_cli_prints_false_verdict_rates(tmp_path):
    # A study directory as `distillscope study --preset quick` leaves it (study.yaml, results
    # table of its planned runs plus the baseline row), numbers drawn with the published effects.
    root = tmp_path / "study"
    root.mkdir()
    shutil.copy(PRESETS_DIR / "quick.yaml", root / "study.yaml")
    simulate(_design("quick"), "planted", seed=0).to_parquet(root / "results.parquet")
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(root)])
    assert result.exit_code == 0, result.output
    md = (root / "report" / "report.md").read_text()
    assert "False-verdict rate" in md and "| not calibrated |" in md
    assert "✓ supported" in md

    result = runner.invoke(app, ["report", str(root), "--calibrate", "--draws", "2"])
    assert result.exit_code == 0, result.output
    cal = json.loads((root / CALIBRATION_FILE).read_text())
    claims = {str(i) for i in [*range(1, 19), 20, 21, 22, 23, 25]}
    assert cal["draws"] == 2 and set(cal["false_rate"]) == claims
    md = (root / "report" / "report.md").read_text()
    html = (root / "report" / "report.html").read_text()
    rate = cal["false_rate"]["2"]
    shown = f"{100 * rate:.1f}% (2 draws)"
    assert shown in md and shown in html
    assert "| not calibrated |" not in md


def test_margin_scenario_puts_each_no_effect_claim_at_its_margin():
    df = _design("paper", ("main", "spectrum", "sampled"))
    d = simulate(df, "null", seed=0)
    offsets = margin_offsets(d)
    acc, forget = offsets["eval/accuracy"], offsets["eval/forgetting_pp"]
    main_on = (d["experiment"] == "main") & (d["rollout.policy"] == "student")
    sampled_fwd = (d["experiment"] == "sampled") & (d["objective.kind"] == "forward_sampled")
    assert set(acc[main_on.to_numpy()]) == {0.10} and set(acc[sampled_fwd.to_numpy()]) == {0.03}
    assert not acc[~(main_on | sampled_fwd).to_numpy()].any()
    spectrum = (d["experiment"] == "spectrum").to_numpy()
    moved = spectrum & (d["objective.kind"] == "forward_kl").to_numpy() & (d["rollout.lam"] > 0)
    assert set(forget[moved]) == {8.0} and not forget[~moved].any()
    # at the margin "no effect" is false: equivalence rarely passes, and each such pass counts
    cal = calibrate(df, draws=20, seed=0, claims=(1, 7, 15))
    for c in ("1", "7", "15"):
        at_margin = cal["rates"]["margin"][c].get("supported", 0.0)
        assert at_margin <= 0.1, (c, cal["rates"]["margin"][c])
        assert cal["false_rate"][c] >= at_margin
    assert cal["rates"]["null"]["1"].get("supported", 0.0) >= 0.8  # true under the null


def test_margin_reaches_a_main_grid_with_another_name():
    # a custom study whose grid is not called "main": claim 1 reads every row, and so does the
    # margin scenario, so "supported" stays rare there instead of measuring the null
    df = _design("quick").replace({"experiment": {"main": "grid"}})
    cal = calibrate(df, draws=20, seed=0, claims=(1,))
    assert cal["rates"]["margin"]["1"].get("supported", 0.0) <= 0.1
    assert cal["rates"]["null"]["1"].get("supported", 0.0) > 0.3
