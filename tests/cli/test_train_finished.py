"""Issue 44, class 4 and ``--threads``: ``train`` on a run it finished already returns at once
(its evaluation printed, ``--force`` to evaluate again, ``--overwrite`` to start over), as
``study`` skips finished runs; ``--threads N`` sets torch's threads of train, eval and study."""

from __future__ import annotations

import os

import pytest
import torch
from typer.testing import CliRunner

import distillscope.study.run_one as run_one_module
from distillscope.cli import app
from distillscope.config import load_run_config
from distillscope.store import claim_run, write_eval, write_status
from distillscope.study.executors import THREADS_ENV, WorkerPool, requested_threads

OVERRIDES = ["optim.steps=2", "eval.items=4"]


@pytest.fixture
def calls(monkeypatch) -> list:
    """The runs ``train`` started (``run_one`` replaced: nothing trains)."""
    started: list = []

    def fake(cfg, out, **kwargs):
        started.append((cfg, kwargs))
        write_status(out, "done")
        return {"eval/accuracy": 0.5}

    monkeypatch.setattr(run_one_module, "run_one", fake)
    return started


def _finished(out, overrides=OVERRIDES, status="done"):
    cfg = load_run_config(None, overrides)
    out.mkdir(parents=True)
    claim_run(out, cfg.model_dump(mode="json"))
    write_eval(out, {"eval/accuracy": 0.25})
    write_status(out, status)


def _train(*args: str) -> str:
    result = CliRunner().invoke(app, ["train", *OVERRIDES, *args])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_a_finished_run_returns_at_once_with_its_evaluation(tmp_path, calls):
    out = tmp_path / "run"
    _finished(out)
    before = (out / "eval.json").read_text()
    said = _train("--out", str(out))
    assert calls == []
    assert "holds this run finished already" in said and "--force" in said
    assert "0.2500" in said  # the evaluation it holds
    assert (out / "eval.json").read_text() == before


def test_force_evaluates_it_again(tmp_path, calls):
    out = tmp_path / "run"
    _finished(out)
    _train("--out", str(out), "--force")
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("case", "extra"),
    [
        ("another config", ["optim.steps=3"]),  # the mismatch is run_one's to refuse
        ("unfinished", []),
    ],
)
def test_other_runs_are_not_skipped(tmp_path, calls, case, extra):
    out = tmp_path / "run"
    _finished(out, status="done" if case == "another config" else "trained")
    CliRunner().invoke(app, ["train", *OVERRIDES, *extra, "--out", str(out)])
    assert len(calls) == 1


def test_skip_eval_on_a_trained_run_returns_at_once(tmp_path, calls):
    out = tmp_path / "run"
    _finished(out, status="trained")
    said = _train("--out", str(out), "--skip-eval")
    assert calls == [] and "trained already" in said


@pytest.fixture
def threads(monkeypatch):
    """torch's thread count and the environment restored after the test."""
    before = torch.get_num_threads()
    for name in (THREADS_ENV, "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    yield
    torch.set_num_threads(before)
    for name in (THREADS_ENV, "OMP_NUM_THREADS"):
        os.environ.pop(name, None)


@pytest.mark.parametrize("command", ["train", "eval", "study"])
def test_threads_is_an_option_of(command, threads):
    result = CliRunner().invoke(app, [command, "--help"])
    assert "--threads" in result.output


def test_train_threads_sets_torch_threads(tmp_path, calls, threads):
    _train("--out", str(tmp_path / "run"), "--threads", "1")
    assert torch.get_num_threads() == 1 and requested_threads() == 1
    assert os.environ[THREADS_ENV] == "1"


def test_a_pool_worker_gets_the_threads_asked_for(threads, monkeypatch):
    monkeypatch.setenv(THREADS_ENV, "3")
    pool = WorkerPool.__new__(WorkerPool)  # the thread count only: no processes
    monkeypatch.setattr("distillscope.study.executors.ProcessPoolExecutor", _NoPool)
    WorkerPool.__init__(pool, 2)
    assert pool.threads == 3


class _NoPool:
    def __init__(self, **_):
        pass

    def submit(self, *_):
        return None
