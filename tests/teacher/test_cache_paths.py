"""Issue 44, class 2: a teacher cache names its teacher and task file by path but identifies
them by content (the teacher's fingerprint, the file's sha256), so one built from relative
paths serves the same teacher and file given relatively, with ``./``, absolutely or copied
elsewhere — and refuses another one by its content, naming the paths."""

from __future__ import annotations

import json
import shutil

import pytest

from distillscope.config import load_run_config
from distillscope.teacher.manifest import (
    FORMAT,
    MANIFEST,
    TeacherCacheError,
    cache_identity,
    check_teacher_cache,
    keyed_as_built,
    teacher_dir,
)

ROWS = [{"question": f"{i} + 1?", "options": [str(i + 1), str(i)], "answer": "A"} for i in range(9)]


def _cfg(teacher: str, file: str, cache=None):
    overrides = [
        f"model.teacher={teacher}", "task.name=mcq", f"task.file={file}",
        "rollout.policy=teacher", "objective.teacher_topk=4", "optim.steps=2",
    ]  # fmt: skip
    if cache is not None:
        overrides.append(f"model.teacher_cache={cache}")
    return load_run_config(None, overrides)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project directory holding models/teacher, data/rows.jsonl and a cache's manifest built
    from the relative paths, the command's directory the project's."""
    root = tmp_path / "project"
    (root / "models" / "teacher").mkdir(parents=True)
    (root / "models" / "teacher" / "config.json").write_text('{"layers": 2}')
    (root / "data").mkdir()
    (root / "data" / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    monkeypatch.chdir(root)
    identity = cache_identity(_cfg("models/teacher", "data/rows.jsonl"))
    # built before paths were resolved (schema version 3): the manifest holds them as typed
    identity |= {"model.teacher": "models/teacher", "task.file": "data/rows.jsonl"}
    manifest = {"format": FORMAT, "identity": identity, "seeds": [42], "steps": 2, "shards": {}}
    (root / "cache").mkdir()
    (root / "cache" / MANIFEST).write_text(json.dumps(manifest))
    return root


@pytest.mark.parametrize(
    "where",
    ["as built", "with ./", "absolute", "from another directory", "copied elsewhere"],
)
def test_the_same_teacher_and_file_are_served_however_named(project, tmp_path, monkeypatch, where):
    teacher, file = "models/teacher", "data/rows.jsonl"
    if where == "with ./":
        teacher, file = "./models/teacher", "./data/rows.jsonl"
    if where == "absolute":
        teacher, file = str(project / teacher), str(project / file)
    if where == "from another directory":
        (tmp_path / "elsewhere").mkdir()
        monkeypatch.chdir(tmp_path / "elsewhere")
        teacher, file = "../project/models/teacher", "../project/data/rows.jsonl"
    if where == "copied elsewhere":
        shutil.copytree(project / "models", tmp_path / "copy" / "models")
        shutil.copytree(project / "data", tmp_path / "copy" / "data")
        teacher, file = (str(tmp_path / "copy" / p) for p in (teacher, file))
    check_teacher_cache(_cfg(teacher, file, project / "cache"))


def test_a_reading_run_keys_entries_as_the_build_typed_its_paths(project, tmp_path):
    """The entries' keys hold the build's path text: a run naming the same content otherwise
    looks them up under the build's text (else every lookup would miss)."""
    cfg = _cfg(str(project / "models" / "teacher"), "./data/rows.jsonl", project / "cache")
    keyed = keyed_as_built(cfg)
    assert (keyed.model.teacher, str(keyed.task.file)) == ("models/teacher", "data/rows.jsonl")
    assert keyed.model_dump(exclude={"model", "task"}) == cfg.model_dump(exclude={"model", "task"})
    plain = _cfg("models/teacher", "data/rows.jsonl")
    assert keyed_as_built(plain) is plain  # no cache: the run's own text


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        ("models/teacher/config.json", 'built for model.teacher="'),
        ("data/rows.jsonl", 'built for task.file="'),
    ],
)
def test_other_content_under_the_same_path_is_refused(project, changed, message):
    with (project / changed).open("a") as fh:
        fh.write("\n")
    with pytest.raises(TeacherCacheError) as err:
        check_teacher_cache(_cfg("models/teacher", "data/rows.jsonl", project / "cache"))
    assert message in str(err.value) and "differ)" in str(err.value), err.value


def test_the_teacher_directory_is_recorded_resolved(project):
    assert teacher_dir("models/teacher") == str(project / "models" / "teacher")
    assert teacher_dir("testbed:teacher") == "testbed:teacher"
