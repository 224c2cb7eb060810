"""Issue 44, class 2: a run's relative paths mean what they meant where the run was trained.

``eval RUN`` from another directory read ``task.file: data/x.jsonl`` from there ("no such task
file"). A run directory records the directory its command ran in, and a stored config's relative
paths are read from it (:func:`~distillscope.config.paths.rebased`) — for every path-holding
field, each tested here — while the config keeps them as typed (its fingerprint and run id).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distillscope.config import config_fields, dump_run_config, load_run_config
from distillscope.config.paths import PATH_FIELDS, rebased
from distillscope.store import CONFIG_FILE, claim_run, recorded_cwd
from distillscope.study.reevaluate import evaluation_config

ROW = {"question": "1 + 1?", "options": ["2", "3"], "answer": "A", "teacher": "a"}

#: Each path field: the thing it names (made under the base directory), the overrides that set
#: it relatively, and how to read its value back from a config.
CASES = {
    "model.teacher": ("dir", ["model.teacher=models/t"], lambda c: c.model.teacher),
    "model.student": ("dir", ["model.student=models/t"], lambda c: c.model.student),
    "model.teacher_cache": (
        "dir",
        ["model.teacher_cache=models/t", "rollout.policy=teacher", "objective.teacher_topk=4"],
        lambda c: c.model.teacher_cache,
    ),
    "model.teachers.*": (
        "dir",
        ["model.teachers={a: models/t, b: testbed:teacher}", "model.route={by: column}"],
        lambda c: c.model.teachers["a"],
    ),
    "task.file": ("file", ["task.name=mcq", "task.file=models/t"], lambda c: str(c.task.file)),
    "task.dataset.path": (
        "file",
        ["task.name=mcq", "task.dataset=models/t"],
        lambda c: c.task.dataset.path,
    ),
    "eval.forgetting.include_path": (
        "dir",
        ["eval.forgetting={tasks: [mine], include_path: models/t}", "eval.skill_items=0"],
        lambda c: str(c.eval.forgetting.include_path),
    ),
}


def _make(base: Path, kind: str) -> Path:
    target = base / "models" / "t"
    if kind == "dir":
        target.mkdir(parents=True)
        (target / "config.json").write_text("{}")
    else:
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(ROW) + "\n")
    return target


def test_every_path_field_is_covered():
    """A field whose type is a path or whose description names a directory is in PATH_FIELDS
    (a new one fails here until it is added there and to CASES)."""
    listed = {name: (kind, text) for name, kind, _, text in config_fields()}
    paths = {
        "model.teachers.*" if name == "model.teachers" else name
        for name, (kind, text) in listed.items()
        if "Path" in kind or "directory" in text
    }
    assert paths == set(PATH_FIELDS) == set(CASES)


@pytest.mark.parametrize("field", list(CASES))
def test_a_relative_path_is_read_from_the_recorded_directory(field, tmp_path, monkeypatch):
    kind, overrides, read = CASES[field]
    base, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    target = _make(base, kind)
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_run_config(None, overrides)
    assert read(cfg) == "models/t"  # kept as typed
    assert read(rebased(cfg, base)) == str(target)
    assert read(rebased(cfg, elsewhere)) == "models/t"  # names nothing there: as typed
    assert rebased(cfg, None) is cfg


@pytest.mark.parametrize("value", ["testbed:teacher", "http://127.0.0.1:9/v1"])
def test_what_names_no_local_path_is_left(value, tmp_path):
    served = ["objective.teacher_topk=4", "objective.teacher_temperature=1.0"]
    cfg = load_run_config(None, [f"model.teacher={value}", *(served if "://" in value else [])])
    assert rebased(cfg, tmp_path).model.teacher == value


def test_eval_from_another_directory_reads_the_task_file_train_read(tmp_path, monkeypatch):
    base, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    target = _make(base, "file")
    elsewhere.mkdir()
    monkeypatch.chdir(base)  # train ran here
    cfg = load_run_config(None, ["task.name=mcq", "task.file=models/t"])
    run = base / "runs" / "a"
    run.mkdir(parents=True)
    claim_run(run, cfg.model_dump(mode="json"))
    (run / CONFIG_FILE).write_text(dump_run_config(cfg))
    monkeypatch.chdir(elsewhere)  # eval runs here
    assert recorded_cwd(run) == base
    trained, evaluated = evaluation_config(run, ["eval.items=3"])
    assert str(trained.task.file) == "models/t"  # the fingerprint's config, as typed
    assert str(evaluated.task.file) == str(target) and evaluated.eval.items == 3
