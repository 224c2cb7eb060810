"""The report's calibration run: only the tested claims, cached by its key, the claim groups
merged by claim, and a progress line when it takes longer than ``PROGRESS_AFTER_S``."""

from __future__ import annotations

import json

import pandas as pd

from distillscope.report import calibration_run as run
from distillscope.report.load import CALIBRATION_FILE, load_study
from distillscope.report.scorecard import score_claims


def _study(synth, tmp_path):
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC), spread=0.02)
    return synth.write_study(tmp_path / "study", [*rows, synth.baseline_row()])


def test_calibrates_the_tested_claims_once_per_design(synth, tmp_path, monkeypatch):
    root = _study(synth, tmp_path)
    said: list[str] = []
    monkeypatch.setattr(run, "PROGRESS_AFTER_S", 0.0)  # every calibration "takes long"
    path = run.ensure_calibration(root, draws=1, say=said.append, workers=1)
    cal = json.loads(path.read_text())
    scored = score_claims(load_study(root).scored, root)
    tested = [r.id for r in scored if r.verdict not in run.UNSCORED]
    assert cal["claims"] == tested and sorted(map(int, cal["false_rate"])) == sorted(tested)
    assert set(cal["power"]) == set(cal["false_support"]) == set(cal["rates"]["null"])
    assert cal["tables"] == run.tables(1, tested) and len(cal["key"]) == 64
    assert said[0].startswith("calibrating the scorecard:") and "calibration:" in said[-1]
    stamp = path.stat().st_mtime_ns
    said.clear()
    run.ensure_calibration(root, draws=1, say=said.append, workers=1)
    assert path.stat().st_mtime_ns == stamp and not said  # the same key: reused, silent
    run.ensure_calibration(root, draws=2, workers=1)  # another key: recalibrated
    assert json.loads((root / CALIBRATION_FILE).read_text())["draws"] == 2


def test_a_claim_read_from_the_runs_trajectories_is_calibrated(synth, tmp_path):
    """Claim 19 reads each run's early entropy from metrics.jsonl (not results.parquet): tested
    on the study directory, it is calibrated too (the simulated tables draw that feature)."""
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC), spread=0.02)
    metrics = {r["run_id"]: synth.curve(20, int(r["seed"])) for r in rows}
    root = synth.write_study(tmp_path / "study", [*rows, synth.baseline_row()], metrics=metrics)
    assert score_claims(load_study(root).scored)[18].verdict == "not tested"  # table alone
    path = run.ensure_calibration(root, draws=1, workers=1)
    cal = json.loads(path.read_text())
    assert 19 in cal["claims"] and "19" in cal["false_rate"]


def test_the_key_follows_the_design_and_its_noise(synth, tmp_path):
    root = _study(synth, tmp_path)
    df = load_study(root).scored
    key = run.calibration_key(run.setup(df, root), 10, 0, [1, 2])
    assert key == run.calibration_key(run.setup(df, root), 10, 0, [1, 2])
    assert key != run.calibration_key(run.setup(df, root), 11, 0, [1, 2])
    assert key != run.calibration_key(run.setup(df, root), 10, 0, [1])
    noisier = df.assign(**{"eval/accuracy": df["eval/accuracy"] * 1.01})
    assert key != run.calibration_key(run.setup(noisier, root), 10, 0, [1, 2])
    fewer = pd.DataFrame(df.iloc[1:])
    assert key != run.calibration_key(run.setup(fewer, root), 10, 0, [1, 2])


def test_groups_are_fixed_and_cover_the_claims():
    claims = [1, 2, 3, 4, 7, 9, 10]
    groups = run._groups(claims)
    assert len(groups) == run.GROUPS and sorted(sum(groups, [])) == claims
    assert run._groups([5]) == [[5]]
