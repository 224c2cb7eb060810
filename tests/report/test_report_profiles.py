"""Per-position profile figures (report/profile_figures.py) from a synthetic store."""

from __future__ import annotations

import math

import pytest

from distillscope.report import write_report
from distillscope.report.profile_figures import cell_profile, profile_figures
from distillscope.results import load_study
from distillscope.store import ProfileLog


def profile_row(step: int, offset: float) -> dict:
    """Two position bins; KL falls with the step, the second bin is empty at step 150."""
    bins = []
    for start, stop, count in ((0, 12, 40), (12, 24, 0 if step == 150 else 9)):
        f = 1.0 / (1 + step) + offset + start / 100
        h = 0.5 + start / 100
        empty = count == 0
        bins.append(
            {
                "start": start,
                "stop": stop,
                "count": count,
                "forward_kl": math.nan if empty else f,
                "teacher_entropy": math.nan if empty else h,
                "cross_entropy": math.nan if empty else f + h,
                "student_entropy": math.nan if empty else 2.0,
            }
        )
    return {"step": step, "tokens": 49, "time_s": 0.1, "bins": bins}


def write_profiles(study_dir, run_id: str, offset: float) -> None:
    log = ProfileLog(study_dir / "runs" / run_id, keep_steps=0)
    for step in (0, 150):
        log.append(profile_row(step, offset))


def test_one_figure_per_cell_with_seeds_averaged(synth, tmp_path):
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC))
    rows = [{**r, "optim.steps": 150} for r in rows]
    root = synth.write_study(tmp_path / "study", rows)
    cell = [r for r in rows if r["rollout.policy"] == "student" and r["optim.lr"] == synth.LOW]
    cell = [r for r in cell if r["objective.kind"] == "forward_kl"]
    for r, offset in zip(cell, (-0.1, 0.0, 0.1), strict=True):  # one cell's three seeds
        write_profiles(root, r["run_id"], offset)
    study = load_study(root)

    mean, n_runs = cell_profile(study, [r["run_id"] for r in cell])
    assert n_runs == 3
    assert list(mean["step"]) == [0, 0, 150, 150]
    assert mean["forward_kl"].iloc[0] == pytest.approx(1.0)  # offsets −0.1, 0, +0.1 cancel
    assert mean["cross_entropy"].iloc[1] == pytest.approx(1.0 + 0.12 + 0.5 + 0.12)
    assert math.isnan(mean["forward_kl"].iloc[3])  # a bin no seed reached stays empty

    figures = profile_figures(study, tmp_path / "figs")
    assert len(figures) == 1 and figures[0].path.stat().st_size > 10_000
    assert "OnPD" in figures[0].title and "main" in figures[0].title
    assert "3 finished seed(s)" in figures[0].caption

    paths = write_report(root)
    assert paths["figure:profiles_000_main"].is_file()
    assert "Per-position profiles" in paths["markdown"].read_text()


def test_no_profiles_no_figure(synth, tmp_path):
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC))
    root = synth.write_study(tmp_path / "study", rows)
    assert profile_figures(load_study(root), tmp_path / "figs") == []
    assert not [k for k in write_report(root) if k.startswith("figure:profiles")]
