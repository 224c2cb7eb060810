"""Every study evaluates its untrained student once per distinct evaluation: the baseline rows."""

import math

import pandas as pd
import pytest

from distillscope.eval import evaluate as evaluate_mod
from distillscope.eval.evaluate import evaluate
from distillscope.models.load import load_model
from distillscope.study import baseline as baseline_mod
from distillscope.study.run_study import run_study, study_status
from distillscope.study.spec import expand


def spec_of(tiny_study, seeds=(42,), name="main"):
    axes = {"rollout.policy": ["student", "teacher"], "seed": list(seeds)}
    return tiny_study(
        axes,
        steps=2,
        checkpoint_every=0,
        name=name,
        items=6,
        coverage_items=3,
        coverage_samples=4,
        harder_task="tb-countdown4e",
    )


def test_baseline_row_is_the_untrained_students_evaluation(tiny_study, tmp_path, monkeypatch):
    spec = spec_of(tiny_study)
    df = pd.read_parquet(run_study(spec, tmp_path / "s"))
    assert len(df) == 3 and set(df["status"]) == {"done"}
    base = df[df["experiment"] == "baseline"].iloc[0]
    assert base["run_id"] == "baseline" and base["seed"] == 42
    assert base["task.name"] == "tb-countdown3"
    for col in ("rollout.policy", "objective.kind", "optim.lr", "model.teacher"):
        assert pd.isna(base[col]), col
    assert math.isnan(base["eval/sparsity_fp32_tau1e-06"]) and math.isnan(base["train/steps_done"])
    assert base["eval/forgetting_pp"] == 0.0
    assert base["split/eval_items"] == 6 and base["split/overlap"] == 0
    runs = df[df["experiment"] != "baseline"]
    assert set(runs.columns) == set(df.columns)  # the same metric columns as the runs

    # a direct evaluation of the untrained student with a run's config gives the same numbers
    cfg = expand(spec)[0].config
    direct = evaluate(cfg, tmp_path / "direct", student=load_model(cfg.model.student)[0])
    for key, value in direct.items():
        if "sparsity" not in key:
            assert base[key] == pytest.approx(value), key

    # resuming evaluates nothing again
    def refuse(*args, **kwargs):
        raise AssertionError("the baseline was evaluated again")

    monkeypatch.setattr(evaluate_mod, "evaluate", refuse)  # what run_baseline calls
    again = pd.read_parquet(run_study(spec, tmp_path / "s"))
    pd.testing.assert_frame_equal(again, df)
    assert "baseline" in study_status(tmp_path / "s")["done"]


def test_one_baseline_per_distinct_evaluation(tiny_study):
    plans = baseline_mod.plan_baselines(expand(spec_of(tiny_study, seeds=(42, 43))))
    assert [(b.run_id, b.config.seed) for b in plans] == [("baseline-1", 42), ("baseline-2", 43)]


def test_failed_baseline_is_recorded_and_the_study_goes_on(tiny_study, tmp_path, monkeypatch):
    real = evaluate_mod.evaluate

    def broken(*args, untrained=False, **kwargs):  # the baseline's evaluation fails, runs' work
        if untrained:
            raise ValueError("no such items")
        return real(*args, untrained=untrained, **kwargs)

    monkeypatch.setattr(evaluate_mod, "evaluate", broken)  # what run_baseline calls
    spec = spec_of(tiny_study)
    spec.base["optim"]["steps"] = 1
    df = pd.read_parquet(run_study(spec, tmp_path / "s"))
    base = df.set_index("run_id").loc["baseline"]
    assert base["status"] == "failed" and base["reason"] == "ValueError: no such items"
    assert (df[df["experiment"] != "baseline"]["status"] == "done").all()


def test_an_experiment_may_not_be_called_baseline(tiny_study):
    with pytest.raises(ValueError, match="'baseline' names the study's untrained-student rows"):
        spec_of(tiny_study, name="baseline")


def test_runs_read_skills_before_from_the_baseline(tiny_study, tmp_path, monkeypatch):
    """The untrained student's skill suite is scored once per evaluation key, by the baseline."""
    from distillscope.eval import evaluate as evaluate_mod

    calls = []
    score = evaluate_mod.skill_scores

    def counting(model, *args, **kwargs):
        calls.append(kwargs.get("log") is None and len(args) < 6)  # True: a "before" call
        return score(model, *args, **kwargs)

    monkeypatch.setattr(evaluate_mod, "skill_scores", counting)
    df = pd.read_parquet(run_study(spec_of(tiny_study), tmp_path / "s"))
    assert calls.count(True) == 1  # the baseline's; the two runs read it
    assert calls.count(False) == 2  # each run's own "skills after"
    skills = df["eval/skills_before"]
    assert skills.nunique() == 1
    assert skills.iloc[0] == df.set_index("run_id").loc["baseline", "eval/skills_after"]

    # without the study's cache a run scores its own "before", and gets the same number
    cfg = expand(spec_of(tiny_study))[0].config
    direct = evaluate(cfg, tmp_path / "direct", student=load_model(cfg.model.student)[0])
    assert direct["eval/skills_before"] == skills.iloc[0]
