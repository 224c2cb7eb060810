"""The report's calibration run: only the tested claims, cached by its key, the claim groups
merged by claim, and a progress line when it takes longer than ``PROGRESS_AFTER_S``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd

from distillscope.results.reader import CALIBRATION_FILE, load_study
from distillscope.scorecard import calibration_run as run
from distillscope.scorecard.runner import score_claims


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


def _group(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (zombies excluded)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[2]) == pgid and stat[0] != "Z":
                out.append(int(entry))
    return out


def test_a_killed_report_leaves_no_calibration_worker(synth, tmp_path):
    """SIGKILL the process calibrating on two workers: its workers end within seconds (they
    watch their parent, ``distillscope.workers``) instead of scoring their groups on."""
    root = _study(synth, tmp_path)
    script = (
        "import sys\nfrom pathlib import Path\n"
        "from distillscope.scorecard.calibration_run import ensure_calibration\n"
        "if __name__ == '__main__':\n"
        "    ensure_calibration(Path(sys.argv[1]), draws=400, workers=2)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(root)], start_new_session=True)
    try:
        deadline = time.time() + 60
        while len(_group(proc.pid)) < 3 and time.time() < deadline:  # parent + 2 workers
            time.sleep(0.1)
        assert len(_group(proc.pid)) >= 3, "the calibration never started its workers"
        proc.kill()
        proc.wait()
        deadline = time.time() + 10
        while _group(proc.pid) and time.time() < deadline:
            time.sleep(0.1)
        assert _group(proc.pid) == [], "a calibration worker outlived its killed report"
    finally:
        for pid in _group(proc.pid):
            os.kill(pid, signal.SIGKILL)
    assert not (root / CALIBRATION_FILE).exists()
