"""Issue 44, class 1: every command derives a run's config — and names its teachers — through
one path, so that what one command accepts, every command accepts.

A run with routed teachers (``model.teachers``) is the case that split them: the rehearsal set
``model.teacher`` to its tiny copy on top of the routed teachers (a raw pydantic dump), ``study
plan`` listed the unused default ``model.teacher`` as the teacher, and ``teacher-cache build``
built a cache of that unused default. Each command's own way from its input to a
:class:`~distillscope.config.RunConfig` is exercised here on one routed run and one routed study.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.cli.inputs import planned_runs, run_config, study_spec
from distillscope.cli.teacher_cache_cmd import _configs
from distillscope.config import ConfigError, dump_run_config, load_run_config
from distillscope.store import CONFIG_FILE
from distillscope.study.executors import _worker_config
from distillscope.study.reevaluate import evaluation_config
from distillscope.study.rehearse import shrink
from distillscope.study.spec import expand, load_spec

TEACHERS = {"large": "testbed:teacher", "small": "testbed:teacher-small"}
MODEL = (
    "model:\n  student: testbed:student\n"
    "  teachers: {large: testbed:teacher, small: testbed:teacher-small}\n"
    "  route: {by: mixture, weights: {large: 3, small: 1}}\n"
)
RUN = MODEL + "optim: {steps: 2}\n"
STUDY = (
    "name: routed\nbase:\n"
    + "".join(f"  {line}\n" for line in RUN.splitlines())
    + "experiments:\n  - name: main\n    axes: {seed: [0, 1]}\n"
)


def _tiny(spec: str) -> str:
    return f"/tiny/{spec.replace(':', '-')}"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    run, study = tmp_path / "routed.yaml", tmp_path / "study-routed.yaml"
    run.write_text(RUN)
    study.write_text(STUDY)
    run_dir = tmp_path / "run"  # what train leaves: the resolved config it ran
    run_dir.mkdir()
    (run_dir / CONFIG_FILE).write_text(dump_run_config(load_run_config(run)))
    study_dir = tmp_path / "study"  # what study leaves: its spec beside the runs
    study_dir.mkdir()
    (study_dir / "study.yaml").write_text(STUDY)
    return {"run": run, "study": study, "run_dir": run_dir, "study_dir": study_dir}


#: Each command's way from its input to its runs' configs (the torch-free part it runs first).
COMMANDS = {
    "train": lambda f: [run_config(str(f["run"]), [])],
    "train --rehearse": lambda f: [shrink(run_config(str(f["run"]), []), _tiny)],
    "eval": lambda f: list(evaluation_config(f["run_dir"], ["eval.items=3"])),
    "study": lambda f: [
        r.config for r in planned_runs(study_spec([str(f["study"])], None, []), None)
    ],
    "study (a worker)": lambda f: [
        _worker_config(r.config.model_dump(mode="json"), None)
        for r in expand(load_spec(f["study"]))
    ],
    "study plan --rehearse": lambda f: [
        shrink(r.config, _tiny) for r in planned_runs(study_spec([str(f["study"])], None, []), None)
    ],
    "report": lambda f: [r.config for r in expand(load_spec(f["study_dir"] / "study.yaml"))],
    "teacher-cache build (run)": lambda f: _configs(str(f["run"]), [])[0],
    "teacher-cache build (study)": lambda f: _configs(str(f["study"]), [])[0],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_reads_the_routed_teachers(command, files):
    configs = COMMANDS[command](files)
    assert configs
    rehearsal = "rehearse" in command
    want = {n: _tiny(s) for n, s in TEACHERS.items()} if rehearsal else TEACHERS
    for cfg in configs:
        assert cfg.model.teacher_specs() == want
        assert cfg.model.teachers_text() == ", ".join(f"{n}={s}" for n, s in want.items())


def test_the_one_teacher_run_is_described_by_its_teacher():
    cfg = load_run_config(None, ["model.teacher=testbed:teacher-small"])
    assert cfg.model.teacher_specs() == {"teacher": "testbed:teacher-small"}
    assert cfg.model.teachers_text() == "testbed:teacher-small"


def test_a_rehearsal_keeps_served_and_cached_teachers(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "manifest.json").write_text("{}")
    teachers = {"live": "testbed:teacher", "served": "http://127.0.0.1:9/v1", "cached": str(cache)}
    cfg = load_run_config(
        None,
        [
            f"model.teachers={teachers}",
            "model.route={by: mixture, weights: {live: 1, served: 1, cached: 1}}",
            "objective.teacher_topk=4",
            "objective.teacher_temperature=1.0",
        ],
    )
    shrunk = shrink(cfg, _tiny).model.teachers
    assert shrunk == {**teachers, "live": _tiny("testbed:teacher")}


def test_a_shrunk_config_that_fails_is_one_line_naming_the_field():
    cfg = load_run_config(None, ["model.teacher=testbed:teacher"])
    with pytest.raises(ConfigError) as err:
        shrink(cfg, lambda spec: "http://bad host/v1")  # a stand-in no config accepts
    assert "\n" not in str(err.value) and "pydantic" not in str(err.value)
    assert "model." in str(err.value)


def test_study_plan_names_the_routed_teachers(files):
    result = CliRunner().invoke(app, ["study", "plan", str(files["study"])])
    assert result.exit_code == 0, result.output
    assert "large=testbed:teacher, small=testbed:teacher-small" in result.output


def test_a_cache_of_routed_teachers_is_refused_naming_each(files, tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "teacher-cache", "build", str(files["run"]), "rollout.policy=teacher",
            "objective.teacher_topk=4", "--out", str(tmp_path / "cache"),
        ],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "model.teachers routes 2 teachers (large, small)" in result.output
    assert not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_train_rehearses_a_routed_run(files):
    result = CliRunner().invoke(app, ["train", str(files["run"]), "--rehearse"])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output and "failed" not in result.output
