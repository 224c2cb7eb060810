"""Issue 44, class 3: each error says what is wrong with what the user wrote, where they wrote
it, and the fix — one line. The issue's examples and the other members of their class found
beside them, each case the command (or the call a command makes) and what its line must say.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.config import ConfigError, dump_run_config, load_run_config
from distillscope.models.locate import resolve_model_path
from distillscope.store import CONFIG_FILE, checkpoint_dir, read_status, write_status
from distillscope.study.run_one import mark_interrupted
from distillscope.study.spec import load_spec
from distillscope.teacher.client import DEFAULT_KEY_ENV, ServerError, TeacherClient
from distillscope.teacher.server import make_server

KEY = "sk-catalogue-2b7e"
STUDY = "name: s\n{key}:\n  - name: main\n    axes: {{seed: [0]}}\n"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The testbed teacher served with :data:`KEY`; yields its URL without ``/v1``."""
    srv = make_server(resolve_model_path("testbed:teacher"), port=0, topk_max=4, api_key=KEY)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=10)


def _served(url: str, key: str | None) -> Callable[[], str]:
    def call() -> str:
        client = TeacherClient(url, vocab_size=54, retries=0, api_key=key)
        with pytest.raises(ServerError) as err:
            client.model_name()
        return str(err.value)

    return call


def _cli(*args: str, code: int = 2) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return " ".join(result.output.split())


def _config(*overrides: str, path: Path | None = None) -> str:
    with pytest.raises(ConfigError) as err:
        load_run_config(path, list(overrides))
    return str(err.value)


def _study(tmp_path: Path, text: str) -> str:
    path = tmp_path / "study.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    return str(err.value)


@pytest.fixture
def trained(tmp_path: Path) -> Path:
    """A run directory as train leaves it, as far as ``eval``'s checks read it."""
    run = tmp_path / "run"
    (checkpoint_dir(run)).mkdir(parents=True)
    (checkpoint_dir(run) / "model.safetensors").write_bytes(b"")
    (run / CONFIG_FILE).write_text(dump_run_config(load_run_config(None)))
    return run


def _cases(server: str, tmp_path: Path, trained: Path) -> dict[str, tuple[Callable[[], str], list]]:
    """name → (what produces the line, the pieces it must hold)."""
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text("optim: {steps: 2}\n")
    return {
        "missing API key": (
            _served(f"{server}/v1", None),
            ["HTTP 401", "no API key sent", f"set {DEFAULT_KEY_ENV}"],
        ),
        "wrong API key": (
            _served(f"{server}/v1", "sk-wrong"),
            ["HTTP 401", f"refused the key in {DEFAULT_KEY_ENV}"],
        ),
        "server URL without /v1": (
            _served(server, KEY),
            ["HTTP 404", f"served under /v1: try {server}/v1"],
        ),
        "unknown task with task.file": (
            lambda: _config("task.name=mqc", "task.file=rows.jsonl"),
            ["task.name: unknown task 'mqc' (did you mean 'mcq'?)"],
        ),
        "unknown task with task.dataset": (
            lambda: _config("task.name=meedreason", "task.dataset=org/rows"),
            ["unknown task 'meedreason' (did you mean 'medreason'?)"],
        ),
        "a mistyped eval override blames the command line": (
            lambda: _cli("eval", str(trained), "eval.itmes=5"),
            ["override 'eval.itmes=5' on the command line", "did you mean 'eval.items'?"],
        ),
        "a bad train override blames the command line, not the file": (
            lambda: _config("optim.lr=abc", path=run_yaml),
            ["override 'optim.lr=abc' on the command line: optim.lr"],
        ),
        "the file's own mistake blames the file": (
            lambda: _config("optim.steps=3", path=_write(tmp_path / "bad.yaml", "optim: {lrr: 1}")),
            [f"{tmp_path / 'bad.yaml'}: unknown field 'optim.lrr'; did you mean 'optim.lr'?"],
        ),
        "eval of a directory that does not exist": (
            lambda: _cli("eval", str(tmp_path / "nope")),
            [f"{tmp_path / 'nope'} does not exist"],
        ),
        "eval of a file": (
            lambda: _cli("eval", str(run_yaml)),
            [f"{run_yaml} is not a directory"],
        ),
        "a small task file under the default evaluation sizes": (
            lambda: _preflight(_small_file(tmp_path)),
            ["held-out rows", "asked by eval.items=200 (the default) and eval.coverage_items=100"],
        ),
        "experiment: at the top of a study": (
            lambda: _study(tmp_path, STUDY.format(key="experiment")),
            ["unknown field 'experiment'; did you mean 'experiments'?"],
        ),
        "a mistyped experiment key": (
            lambda: _study(tmp_path, STUDY.format(key="experiments").replace("axes", "axis")),
            ["unknown field 'experiments.0.axis'; did you mean 'experiments.0.axes'?"],
        ),
    }


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _small_file(tmp_path: Path) -> Path:
    rows = [
        json.dumps({"question": f"{i} + 1?", "options": [str(i + 1), str(i)], "answer": "A"})
        for i in range(30)
    ]
    return _write(tmp_path / "small.jsonl", "\n".join(rows) + "\n")


def _preflight(path: Path) -> str:
    from distillscope.eval.eval_checks import preflight_evaluation

    with pytest.raises(ValueError) as err:
        preflight_evaluation(load_run_config(None, ["task.name=mcq", f"task.file={path}"]))
    held = str(err.value).split("only ")[1].split(" ")[0]
    assert f"to evaluate on all {held}: eval.items={held} eval.coverage_items={held}" in str(
        err.value
    )
    return str(err.value)


CASES = [
    "missing API key",
    "wrong API key",
    "server URL without /v1",
    "unknown task with task.file",
    "unknown task with task.dataset",
    "a mistyped eval override blames the command line",
    "a bad train override blames the command line, not the file",
    "the file's own mistake blames the file",
    "eval of a directory that does not exist",
    "eval of a file",
    "a small task file under the default evaluation sizes",
    "experiment: at the top of a study",
    "a mistyped experiment key",
]


@pytest.mark.parametrize("case", CASES)
def test_each_error_names_the_mistake_where_it_was_made(case, server, tmp_path, trained):
    cases = _cases(server, tmp_path, trained)
    assert set(cases) == set(CASES)
    produce, pieces = cases[case]
    line = produce()
    assert "\n" not in line.strip() and "pydantic" not in line, line
    for piece in pieces:
        assert piece in line, line


@pytest.mark.parametrize(
    ("phase", "after", "advice"),
    [("train", "pending", "rerun the same command"), ("eval", "trained", "distillscope eval")],
)
def test_ctrl_c_leaves_no_run_running(tmp_path, phase, after, advice):
    write_status(tmp_path, "running", phase=phase)
    line = mark_interrupted(tmp_path)
    status = read_status(tmp_path)
    assert status["status"] == after and advice in status["reason"] and advice in line


def test_ctrl_c_in_train_says_so_and_exits_130(tmp_path, monkeypatch):
    import distillscope.study.run_one as run_one

    def interrupted(cfg, out, **_):
        out.mkdir(parents=True, exist_ok=True)
        write_status(out, "running", phase="train")
        raise KeyboardInterrupt

    monkeypatch.setattr(run_one, "run_one", interrupted)
    out = tmp_path / "run"
    line = _cli("train", "optim.steps=2", "--out", str(out), code=130)
    assert "interrupted (Ctrl-C); rerun the same command" in line
    assert read_status(out)["status"] == "pending"
