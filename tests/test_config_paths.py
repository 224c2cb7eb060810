"""Issue 44, class 2: a path means one thing, whichever directory a command runs in.

A path typed in a file (a run YAML, a study YAML) is read from the file's directory, one typed on
the command line from the current directory, once, when it is read
(:mod:`distillscope.config.paths`); the config holds it absolute from then on. Each
path-holding field is tested here; a run directory of schema version 3 or older kept paths as
typed and is read from the directory its command ran in (:func:`~.config.paths.rebased`). A
directory moved with its files (a study copied to another machine, a project moved as a whole)
finds them where they moved to, and keeps its run ids and fingerprints.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from distillscope.config import (
    ConfigError,
    apply_overrides,
    config_fields,
    dump_run_config,
    load_run_config,
    run_config_from_dict,
)
from distillscope.config.paths import PATH_FIELDS, rebased
from distillscope.store import (
    CONFIG_FILE,
    STUDY_SPEC_FILE,
    StoreError,
    check_run_config,
    claim_run,
    recorded_cwd,
)
from distillscope.study.reevaluate import evaluation_config
from distillscope.study.run_study import prepare
from distillscope.study.spec import expand, load_spec

ROW = {"question": "1 + 1?", "options": ["2", "3"], "answer": "A", "teacher": "a"}

#: Each path field: the thing it names (made under the base directory), the overrides that set
#: it relatively, how to read its value back from a config, and its name in messages.
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
#: the field as a message names it
SHOWN = {"model.teachers.*": "model.teachers.a", "task.dataset.path": "task.dataset"}


def _make(base: Path, kind: str) -> Path:
    target = base / "models" / "t"
    if kind == "dir":
        target.mkdir(parents=True)
        (target / "config.json").write_text("{}")
    else:
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(ROW) + "\n")
    return target


def _dirs(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """``project`` (where the paths lead) and ``elsewhere`` (the command's directory)."""
    base, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    base.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return base, elsewhere


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
def test_a_relative_path_in_a_run_file_is_read_from_its_directory(field, tmp_path, monkeypatch):
    kind, overrides, read = CASES[field]
    base, _ = _dirs(tmp_path, monkeypatch)
    target = _make(base, kind)
    (base / "run.yaml").write_text(yaml.safe_dump(apply_overrides({}, overrides)))
    cfg = load_run_config(base / "run.yaml")
    assert read(cfg) == str(target)
    assert f": {target}" in dump_run_config(cfg) or str(target) in dump_run_config(cfg)


@pytest.mark.parametrize("field", list(CASES))
def test_a_relative_path_in_a_study_file_is_read_from_its_directory(field, tmp_path, monkeypatch):
    kind, overrides, read = CASES[field]
    base, _ = _dirs(tmp_path, monkeypatch)
    target = _make(base, kind)
    study = {"base": apply_overrides({}, overrides), "experiments": [{"name": "main"}]}
    (base / "s.yaml").write_text(yaml.safe_dump(study))
    spec = load_spec(base / "s.yaml")
    assert [read(r.config) for r in expand(spec)] == [str(target)]
    assert spec.typed_paths == {str(target): "models/t"}  # kept for display


@pytest.mark.parametrize("field", list(CASES))
def test_a_relative_path_on_the_command_line_is_read_from_the_current_directory(
    field, tmp_path, monkeypatch
):
    kind, overrides, read = CASES[field]
    base, elsewhere = _dirs(tmp_path, monkeypatch)
    target = _make(elsewhere, kind)
    (base / "run.yaml").write_text("seed: 3\n")
    assert read(load_run_config(base / "run.yaml", overrides)) == str(target)
    assert read(load_run_config(None, overrides)) == str(target)
    (base / "s.yaml").write_text("experiments: [{name: main}]\n")
    assert read(expand(load_spec(base / "s.yaml", overrides))[0].config) == str(target)


@pytest.mark.parametrize("field", [f for f in CASES if f != "task.dataset.path"])
def test_a_missing_path_names_the_field_the_typed_value_and_the_resolved_path(
    field, tmp_path, monkeypatch
):
    _, overrides, _ = CASES[field]
    base, elsewhere = _dirs(tmp_path, monkeypatch)
    (base / "run.yaml").write_text(yaml.safe_dump(apply_overrides({}, overrides)))
    with pytest.raises(ConfigError) as err:
        load_run_config(base / "run.yaml")
    line = str(err.value)
    assert f"{SHOWN.get(field, field)} 'models/t' is read as {base / 'models' / 't'}" in line
    assert "from the file's directory" in line and "\n" not in line
    with pytest.raises(ConfigError, match=f"is read as {elsewhere}/models/t.*current directory"):
        load_run_config(None, overrides)


def test_a_hub_id_of_a_dataset_stays_a_hub_id(tmp_path, monkeypatch):
    _dirs(tmp_path, monkeypatch)
    assert load_run_config(None, ["task.name=mcq", "task.dataset=org/name"]).task.dataset.path == (
        "org/name"
    )


@pytest.mark.parametrize("value", ["testbed:teacher", "http://127.0.0.1:9/v1"])
def test_what_names_no_local_path_is_left(value, tmp_path):
    served = ["objective.teacher_topk=4", "objective.teacher_temperature=1.0"]
    cfg = load_run_config(None, [f"model.teacher={value}", *(served if "://" in value else [])])
    assert cfg.model.teacher == value
    assert rebased(cfg, tmp_path).model.teacher == value


def test_axes_bundles_and_overrides_of_a_study_are_read_from_its_directory(tmp_path, monkeypatch):
    base, _ = _dirs(tmp_path, monkeypatch)
    for name in ("a", "b", "c"):
        (base / "data").mkdir(exist_ok=True)
        (base / "data" / f"{name}.jsonl").write_text(json.dumps(ROW) + "\n")
    study = {
        "base": {"task": {"name": "mcq", "file": "data/a.jsonl"}},
        "experiments": [
            {"name": "axis", "axes": {"task.file": ["data/a.jsonl", "./data/b.jsonl"]}},
            {"name": "bundle", "axes": {"rows": {"c": {"task.file": "data/c.jsonl"}}}},
            {"name": "over", "overrides": {"task.file": "data/b.jsonl"}},
        ],
    }
    (base / "s.yaml").write_text(yaml.safe_dump(study))
    files = [str(r.config.task.file) for r in expand(load_spec(base / "s.yaml"))]
    assert files == [str(base / "data" / f"{n}.jsonl") for n in ("a", "b", "c", "b")]


def test_a_study_gets_the_same_run_ids_from_any_directory(tmp_path, monkeypatch):
    base, elsewhere = _dirs(tmp_path, monkeypatch)
    _make(base, "file")
    (base / "s.yaml").write_text(
        "base: {task: {name: mcq, file: models/t}}\n"
        "experiments: [{name: main, axes: {seed: [1, 2]}}]\n"
    )
    here = [r.run_id for r in expand(load_spec(base / "s.yaml"))]
    monkeypatch.chdir(base)
    assert [r.run_id for r in expand(load_spec("s.yaml"))] == here
    assert [r.run_id for r in expand(load_spec("./s.yaml", ["task.file=models/t"]))] == here


def _legacy(overrides: list[str]):
    """A config as schema version 3 kept it: its paths as typed."""
    return run_config_from_dict(apply_overrides({}, overrides))


@pytest.mark.parametrize("field", list(CASES))
def test_an_older_runs_relative_path_is_read_from_the_recorded_directory(
    field, tmp_path, monkeypatch
):
    kind, overrides, read = CASES[field]
    base, elsewhere = _dirs(tmp_path, monkeypatch)
    target = _make(base, kind)
    cfg = _legacy(overrides)
    assert read(cfg) == "models/t"  # kept as typed
    assert read(rebased(cfg, base)) == str(target)
    assert read(rebased(cfg, elsewhere)) == "models/t"  # names nothing there: as typed
    assert rebased(cfg, None) is cfg


def test_eval_from_another_directory_reads_the_task_file_train_read(tmp_path, monkeypatch):
    base, elsewhere = _dirs(tmp_path, monkeypatch)
    target = _make(base, "file")
    monkeypatch.chdir(base)  # train ran here
    cfg = load_run_config(None, ["task.name=mcq", "task.file=models/t"])
    run = base / "runs" / "a"
    run.mkdir(parents=True)
    claim_run(run, cfg.model_dump(mode="json"))
    (run / CONFIG_FILE).write_text(dump_run_config(cfg))
    monkeypatch.chdir(elsewhere)  # eval runs here
    trained, evaluated = evaluation_config(run, ["eval.items=3"])
    assert str(trained.task.file) == str(target)  # stored absolute
    assert str(evaluated.task.file) == str(target) and evaluated.eval.items == 3


def test_eval_of_an_older_run_reads_its_relative_task_file_from_where_it_trained(
    tmp_path, monkeypatch
):
    base, elsewhere = _dirs(tmp_path, monkeypatch)
    target = _make(base, "file")
    monkeypatch.chdir(base)  # train ran here, with version 3 (paths kept as typed)
    cfg = _legacy(["task.name=mcq", "task.file=models/t"])
    run = base / "runs" / "a"
    run.mkdir(parents=True)
    claim_run(run, cfg.model_dump(mode="json"))
    (run / CONFIG_FILE).write_text(dump_run_config(cfg))
    monkeypatch.chdir(elsewhere)  # eval runs here
    assert recorded_cwd(run) == base
    trained, evaluated = evaluation_config(run, ["eval.items=3"])
    assert str(trained.task.file) == "models/t"  # the fingerprint's config, as typed
    assert str(evaluated.task.file) == str(target) and evaluated.eval.items == 3


@pytest.mark.slow
def test_a_study_launched_from_its_directory_resumes_from_another(tmp_path, monkeypatch):
    """``cd A && study s.yaml`` then ``cd B && study A/s.yaml``: the same runs, nothing run
    again (2 two-step testbed runs on a task file of the study's directory)."""
    from typer.testing import CliRunner

    from distillscope.cli import app

    study, other = tmp_path / "A", tmp_path / "B"
    (study / "tasks").mkdir(parents=True)
    other.mkdir()
    store = Path(__file__).parent / "data" / "store_versions"
    (study / "tasks" / "colors.jsonl").write_text((store / "colors.jsonl").read_text())
    (study / "s.yaml").write_text((store / "study-relative.yaml").read_text())

    def study_cmd(spec: str, out: str) -> None:
        args = ["study", spec, "--out", out, "--executor", "sequential", "--no-calibrate"]
        res = CliRunner().invoke(app, [*args, "--no-report"], terminal_width=200)
        assert res.exit_code == 0, res.output

    monkeypatch.chdir(study)
    study_cmd("s.yaml", "out")
    runs = sorted((study / "out" / "runs").iterdir())
    files = {p: p.read_bytes() for r in runs for p in r.rglob("*") if p.is_file()}
    monkeypatch.chdir(other)
    study_cmd("../A/s.yaml", str(study / "out"))
    assert sorted((study / "out" / "runs").iterdir()) == runs  # the same run ids
    assert {p: p.read_bytes() for p in files} == files  # nothing trained or evaluated again


def test_study_plan_shows_the_paths_as_typed(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from distillscope.cli import app

    base, _ = _dirs(tmp_path, monkeypatch)
    store = Path(__file__).parent / "data" / "store_versions"
    (base / "tasks").mkdir()
    (base / "tasks" / "colors.jsonl").write_text((store / "colors.jsonl").read_text())
    (base / "s.yaml").write_text((store / "study-relative.yaml").read_text())
    spec = load_spec(base / "s.yaml")
    assert spec.shown(f"mcq:{base}/tasks/colors.jsonl") == "mcq:tasks/colors.jsonl"
    res = CliRunner().invoke(app, ["study", "plan", str(base / "s.yaml")], terminal_width=200)
    assert "mcq:tasks/colors.jsonl" in res.output, res.output


# ---------------------------------------------------------------------------------------------
# A directory moved with its files: a study copied to another machine, a project moved whole
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", list(CASES))
def test_a_moved_run_matches_its_fingerprint_and_is_evaluated_on_its_moved_files(
    field, tmp_path, monkeypatch
):
    kind, overrides, read = CASES[field]
    base, elsewhere = _dirs(tmp_path, monkeypatch)
    _make(base, kind)
    (base / "run.yaml").write_text(yaml.safe_dump(apply_overrides({}, overrides)))
    monkeypatch.chdir(base)  # `cd project && distillscope train run.yaml`
    cfg = load_run_config(base / "run.yaml")
    run = base / "runs" / "a"
    run.mkdir(parents=True)
    claim_run(run, cfg.model_dump(mode="json"))
    (run / CONFIG_FILE).write_text(dump_run_config(cfg))
    moved = tmp_path / "moved"
    base.rename(moved)
    monkeypatch.chdir(elsewhere)
    run, target = moved / "runs" / "a", moved / "models" / "t"
    now = load_run_config(moved / "run.yaml")  # the run file, read where it is now
    assert read(now) == str(target)
    check_run_config(run, now.model_dump(mode="json"))  # the run it holds
    trained, evaluated = evaluation_config(run, [])
    assert read(trained) == str(base / "models" / "t")  # as recorded: its fingerprint's config
    assert read(evaluated) == str(target)  # `eval RUN` reads the moved files
    (moved / "other").mkdir()
    (moved / "models" / "t").rename(moved / "other" / "t")
    elsewhere_now = [o.replace("models/t", str(moved / "other" / "t")) for o in overrides]
    other = load_run_config(None, elsewhere_now)
    with pytest.raises(StoreError, match=re.escape(SHOWN.get(field, field))):
        check_run_config(run, other.model_dump(mode="json"))  # another path: another run


@pytest.mark.parametrize("field", list(CASES))
def test_a_moved_study_keeps_its_run_ids_from_its_own_file_and_its_stored_one(
    field, tmp_path, monkeypatch
):
    """A project (its study file, its data, the study directory inside) moved as a whole:
    the study file read where it is now, or the study directory's ``study.yaml`` (whose paths
    name nothing any more), plans the same runs under the same ids, on the moved files."""
    kind, overrides, read = CASES[field]
    base, _ = _dirs(tmp_path, monkeypatch)
    _make(base, kind)
    study = {
        "base": apply_overrides({}, overrides),
        "experiments": [{"name": "main", "axes": {"seed": [1, 2]}}],
    }
    (base / "s.yaml").write_text(yaml.safe_dump(study))
    ids = [r.run_id for r in prepare(load_spec(base / "s.yaml"), base / "runs" / "s1")]
    moved = tmp_path / "moved"
    base.rename(moved)
    out = moved / "runs" / "s1"
    for source in (moved / "s.yaml", out / STUDY_SPEC_FILE):
        runs = prepare(load_spec(source), out)
        assert [r.run_id for r in runs] == ids, source
        assert {read(r.config) for r in runs} == {str(moved / "models" / "t")}
