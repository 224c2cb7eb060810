"""Resume executes exactly the runs that are not finished: counted, not inferred from tables.

A study directory holds runs in every state a crash or a failure leaves; re-running the study
must skip the ``done`` and ``diverged`` runs (no training step, no evaluation), evaluate a
``trained`` run (trained, never evaluated) without training it again, and re-run a ``failed``
one; the finished baseline is not evaluated again.
"""

from __future__ import annotations

import shutil
from collections import Counter

import pandas as pd
import pytest

from distillscope.eval import evaluate as evaluate_mod
from distillscope.store import read_status, write_status
from distillscope.study import run_one as run_one_mod
from distillscope.study.run_study import run_study, study_status

STEPS = 3


@pytest.fixture
def counted(monkeypatch):
    """Counters of evaluations and training calls per run directory name (call-through)."""
    evaluations: Counter[str] = Counter()
    trainings: Counter[str] = Counter()
    real_evaluate, real_distill = evaluate_mod.evaluate, run_one_mod.distill

    def evaluate(cfg, run_dir, *args, **kwargs):
        evaluations[run_dir.name] += 1
        return real_evaluate(cfg, run_dir, *args, **kwargs)

    def distill(cfg, run_dir, *args, **kwargs):
        trainings[run_dir.name] += 1
        return real_distill(cfg, run_dir, *args, **kwargs)

    monkeypatch.setattr(evaluate_mod, "evaluate", evaluate)  # the baseline imports it late
    monkeypatch.setattr(run_one_mod, "evaluate", evaluate)
    monkeypatch.setattr(run_one_mod, "distill", distill)
    return evaluations, trainings


@pytest.mark.slow
def test_resume_runs_exactly_the_unfinished_runs(tiny_study, tmp_path, counted):
    spec = tiny_study({"optim.lr": [1e-3, 2e-3, 3e-3, 4e-3]}, steps=STEPS, checkpoint_every=1)
    out = tmp_path / "study"
    first = pd.read_parquet(run_study(spec, out))
    runs = sorted(first.loc[first["experiment"] != "baseline", "run_id"])
    baseline = first.loc[first["experiment"] == "baseline", "run_id"].item()
    assert len(runs) == 4 and set(first["status"]) == {"done"}
    evaluations, trainings = counted
    evaluations.clear()
    trainings.clear()

    done, diverged, trained, failed = runs
    write_status(out / "runs" / diverged, "diverged", "step 2: non-finite loss")
    write_status(out / "runs" / trained, "trained")  # killed between training and evaluation
    write_status(out / "runs" / failed, "failed", "RuntimeError: out of memory")
    shutil.rmtree(out / "runs" / failed / "checkpoint")  # nothing to resume from: from step 0
    untouched = {r: (out / "runs" / r / "eval.json").read_text() for r in (done, diverged)}

    steps: Counter[str] = Counter()
    finished: list[str] = []
    resumed = pd.read_parquet(
        run_study(
            spec,
            out,
            on_step=lambda rid, step, row: steps.update([rid]),
            on_run_done=lambda rid, status: finished.append(rid),
        )
    )

    assert sorted(finished) == [trained, failed]  # executed: exactly the unfinished runs
    assert dict(evaluations) == {trained: 1, failed: 1}  # the baseline is not evaluated again
    assert dict(trainings) == {trained: 1, failed: 1}  # done and diverged runs are not started
    assert dict(steps) == {failed: STEPS}  # the trained run resumes at its last step
    for r, text in untouched.items():
        assert (out / "runs" / r / "eval.json").read_text() == text
    assert read_status(out / "runs" / diverged)["status"] == "diverged"
    assert {k: sorted(v) for k, v in study_status(out).items()} == {
        "done": sorted([baseline, done, trained, failed]),
        "diverged": [diverged],
    }
    assert len(resumed) == len(first)

    evaluations.clear()
    trainings.clear()
    run_study(spec, out)  # everything finished: a third pass executes nothing
    assert not evaluations and not trainings


def test_status_of_a_directory_without_a_study_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"is not a study directory \(no study.yaml\)$"):
        study_status(tmp_path)
