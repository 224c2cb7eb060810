"""ExecutorSpec: the study command's executor options as one checked value."""

import dataclasses

import pytest
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.config import ConfigError
from distillscope.study.executors import ExecutorSpec
from distillscope.study.run_study import run_study
from distillscope.study.spec import load_spec


def test_the_defaults_are_the_sequential_executor_and_a_pool_of_two():
    spec = ExecutorSpec()
    assert (spec.kind, spec.workers, spec.address) == ("sequential", 2, None)
    assert (spec.cpus_per_run, spec.gpus_per_run) == (1.0, 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.kind = "ray"


def test_a_bad_kind_or_pool_size_fails_where_the_spec_is_made():
    with pytest.raises(ConfigError, match="--executor must be sequential, pool or ray, got 'gpu'"):
        ExecutorSpec("gpu")
    with pytest.raises(ConfigError, match="--workers must be at least 1, got 0"):
        ExecutorSpec("pool", workers=0)


def test_started_returns_a_spec_without_a_pool_unchanged():
    for spec in (ExecutorSpec(), ExecutorSpec("ray", address="ray://head:10001")):
        with spec.started() as running:
            assert running is spec


def test_run_study_takes_one_executor_spec(tmp_path):
    with pytest.raises(TypeError, match=r"executor must be an ExecutorSpec .* got 'pool'"):
        run_study(load_spec("smoke"), tmp_path / "s", "pool")
    with pytest.raises(ConfigError, match="--workers must be at least 1"):
        run_study(load_spec("smoke"), tmp_path / "s", ExecutorSpec("pool", workers=0))
    assert not (tmp_path / "s").exists()  # checked before anything is written


def test_the_cli_rejects_an_unknown_executor_before_planning(tmp_path):
    out = tmp_path / "s"
    res = CliRunner().invoke(
        app, ["study", "--preset", "smoke", "--out", str(out), "--executor", "gpu"]
    )
    assert res.exit_code == 2
    assert "--executor must be sequential, pool or ray, got 'gpu'" in res.stderr
    assert not out.exists()
