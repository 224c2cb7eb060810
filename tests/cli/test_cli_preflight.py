"""One preflight for every command (issue 45): a bad input gets the same one line from ``train``,
``eval``, ``study``, ``study plan`` and ``teacher-cache build``, before anything is written.

Each command reaches :func:`distillscope.cli.inputs.preflight`; the cases are members of the
class (a task file that is gone, a teacher directory that is not there), each run through every
command that reads that input (``eval`` reads no teacher: the weights are trained).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.config import dump_run_config, load_run_config
from distillscope.store import CONFIG_FILE, checkpoint_dir

#: A teacher-written run with top-k, so that ``teacher-cache build`` takes it too.
BASE = ["rollout.policy=teacher", "objective.teacher_topk=4", "optim.steps=2"]


def _case(tmp_path: Path, case: str) -> list[str]:
    if case == "task file":
        return ["task.name=mcq", f"task.file={tmp_path / 'gone.jsonl'}"]
    return [f"model.teacher={tmp_path / 'no-teacher'}"]


def _inputs(tmp_path: Path, case: str) -> dict[str, Path]:
    """A run config, a study and (for ``eval``) a trained run's directory, all with the bad
    input; the directory's checkpoint is a placeholder: the preflight refuses it first."""
    overrides = BASE + _case(tmp_path, case)
    cfg = load_run_config(None, overrides)
    run = tmp_path / "run.yaml"
    run.write_text(dump_run_config(cfg))
    lines = "".join(f"  {line}\n" for line in dump_run_config(cfg).splitlines())
    study = tmp_path / "study.yaml"
    study.write_text(
        f"name: s\nbase:\n{lines}experiments:\n  - name: main\n    axes: {{seed: [0]}}\n"
    )
    trained = tmp_path / "trained"
    checkpoint_dir(trained).mkdir(parents=True)
    (checkpoint_dir(trained) / "model.safetensors").write_bytes(b"")
    (trained / CONFIG_FILE).write_text(dump_run_config(cfg))
    return {"run": run, "study": study, "trained": trained}


COMMANDS = {
    "train": lambda f, out: ["train", str(f["run"]), "--out", str(out)],
    "eval": lambda f, out: ["eval", str(f["trained"])],
    "study": lambda f, out: [
        "study",
        str(f["study"]),
        "--out",
        str(out),
        "--executor",
        "sequential",
    ],
    "study plan": lambda f, out: ["study", "plan", str(f["study"])],
    "teacher-cache build": lambda f, out: [
        "teacher-cache",
        "build",
        str(f["run"]),
        "--out",
        str(out),
    ],
}
#: What each case's one line says, whichever command reads it.
EXPECTED = {"task file": "gone.jsonl does not exist", "teacher": "no-teacher does not exist"}


@pytest.mark.parametrize("case", list(EXPECTED))
def test_a_bad_input_is_one_line_alike_from_every_command(tmp_path, case):
    files = _inputs(tmp_path, case)
    lines = {}
    for name, args in COMMANDS.items():
        if name == "eval" and case == "teacher":
            continue  # a trained run's evaluation reads no teacher
        out = tmp_path / f"out-{name.replace(' ', '-')}"
        result = CliRunner().invoke(app, args(files, out))
        assert result.exit_code == 2, (name, result.output)
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, (name, result.output)
        lines[name] = errors[0]
        assert not out.exists(), name  # nothing written
    assert EXPECTED[case] in next(iter(lines.values()))
    assert len(set(lines.values())) == 1, lines
