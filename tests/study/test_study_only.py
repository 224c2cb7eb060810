"""``--only``: a study runs a subset of its experiments; the directory keeps the whole study."""

import pandas as pd
import pytest
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.config import ConfigError
from distillscope.study.run_study import run_study, select, study_status
from distillscope.study.spec import StudySpec, expand


def two_experiments(tiny_study) -> StudySpec:
    one = tiny_study({"rollout.policy": ["student", "teacher"]}, steps=2, checkpoint_every=0)
    data = one.model_dump(mode="json")
    other = {"name": "lr", "axes": {"optim.lr": [1e-3, 3e-3]}}
    return StudySpec.model_validate({**data, "experiments": [*data["experiments"], other]})


def test_only_runs_the_named_experiment_and_the_rest_later(tiny_study, tmp_path):
    spec, out = two_experiments(tiny_study), tmp_path / "s"
    df = pd.read_parquet(run_study(spec, out, only=["lr"]))
    status = dict(zip(df["run_id"], df["status"], strict=True))
    lr_ids = [r.run_id for r in expand(spec) if r.experiment == "lr"]
    main_ids = [r.run_id for r in expand(spec) if r.experiment == "main"]
    assert all(status[i] == "done" for i in lr_ids)
    assert all(status[i] == "pending" for i in main_ids)  # planned, listed, not run
    assert status["baseline"] == "done"
    # the same directory completes with no --only: only the main runs execute now
    before = {i: (out / "runs" / i / "eval.json").stat().st_mtime_ns for i in lr_ids}
    df = pd.read_parquet(run_study(spec, out))
    assert set(df["status"]) == {"done"}
    assert before == {i: (out / "runs" / i / "eval.json").stat().st_mtime_ns for i in lr_ids}
    assert set(study_status(out)) == {"done"}


def test_only_refuses_a_name_that_is_not_an_experiment(tiny_study, tmp_path):
    spec = two_experiments(tiny_study)
    with pytest.raises(ConfigError, match=r"--only: 'lrr' is not an experiment .*'main', 'lr'"):
        run_study(spec, tmp_path / "s", only=["lrr"])
    with pytest.raises(ConfigError, match="no experiment is"):
        select(spec, expand(spec), [])
    assert not (tmp_path / "s").exists()  # nothing written


def test_only_on_the_command_line(tmp_path):
    result = CliRunner().invoke(
        app,
        ["study", "--preset", "paper", "--only", "main,nope", "--executor", "sequential"]
        + ["--out", str(tmp_path / "s")],
    )
    assert result.exit_code != 0
    assert "--only: 'nope' is not an experiment of study paper" in result.output
    assert not (tmp_path / "s").exists()


def test_only_the_rlvr_stage_selects_its_runs_alone():
    from distillscope.study.spec import load_spec

    spec = load_spec("paper")
    runs = select(spec, expand(spec), ["rlvr"])
    assert runs and {r.experiment for r in runs} == {"rlvr"}
    assert all(r.parent for r in runs)
    assert len(select(spec, expand(spec), ["main", "rlvr"])) == 2 * len(runs)


def test_plan_prints_the_runs_per_experiment_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app, ["study", "plan", "--preset", "paper", "--only", "main,rlvr"], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    assert "study paper: 48 runs" in result.output
    # piped: the plan prints as plain text, one line per experiment
    rows = {line.split()[0]: line for line in result.output.splitlines() if line.strip()}
    assert "24" in rows["main"] and "tb-countdown3-hard" in rows["rlvr"]
    assert list(tmp_path.iterdir()) == []  # no study directory
