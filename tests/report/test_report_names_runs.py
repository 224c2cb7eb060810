"""The report names what was really run (issue 44 classes 1 and 5): every place it describes a
run's teachers, student or task — the summary's scope lines, the main table's lead and rows, the
Teachers section — derives them through the one description of a run's teachers
(``config.model.teacher_specs_of``) and shows each path as the study file typed it (study.yaml's
``typed_paths``), not as the machine that ran it resolved it.

One parametrised test over the kinds of teacher: one local teacher, routed teachers (the unused
default ``model.teacher`` must not appear), a served teacher (named, "served", no count), a
teacher cache and a cross-tokenizer teacher."""

from __future__ import annotations

import json
import math

import pytest

from distillscope.report import write_report
from distillscope.report.contents import main_lead
from distillscope.report.scope import study_scope
from distillscope.report.teachers import teacher_table
from distillscope.results import load_study

HERE = "/home/ran/proj"  # the machine that ran the study resolved every path under it
TYPED = {
    f"{HERE}/models/teacher": "models/teacher",
    f"{HERE}/models/student": "models/student",
    f"{HERE}/models/big": "./models/big",
    f"{HERE}/models/qwen-tok": "../shared/qwen-tok",
    f"{HERE}/caches/small": "caches/small",
    f"{HERE}/data/colors.jsonl": "data/colors.jsonl",
}
TASK = {
    "task.dataset": f"mcq:{HERE}/data/colors.jsonl",
    "task.name": "mcq",
    "model.student": f"{HERE}/models/student",
}
ROUTED = json.dumps({"large": f"{HERE}/models/big", "small": "testbed:teacher-small"})

#: kind → (results columns of its runs, the scope's teacher line, text it must not show)
KINDS = {
    "local": (
        {"model.teacher": f"{HERE}/models/teacher", "model/teacher_params": 1929024.0},
        ("Teacher", "models/teacher (1.93M parameters)"),
        "testbed:teacher",
    ),
    "routed": (
        {
            "model.teacher": "testbed:teacher",  # the unused default of a routed run
            "model.teachers": ROUTED,
            "model.route": json.dumps({"by": "mixture", "weights": {"large": 3, "small": 1}}),
            "model/teacher_params": math.nan,
            "teacher/large/params": 2.5e6,
            "teacher/small/params": 4.2e5,
        },
        (
            "Teachers",
            "large=./models/big (2.5M parameters), small=testbed:teacher-small (0.42M parameters)",
        ),
        "testbed:teacher (",
    ),
    "served": (
        {"model.teacher": "http://127.0.0.1:8000/v1", "model/teacher_params": math.nan},
        ("Teacher", "http://127.0.0.1:8000/v1 (served)"),
        "parameters not recorded",
    ),
    # a cache of one teacher (model.teacher_cache): the teacher it was built from, as typed
    "teacher cache": (
        {"model.teacher": f"{HERE}/models/teacher", "model/teacher_params": 1929024.0},
        ("Teacher", "models/teacher (1.93M parameters)"),
        "testbed:teacher",
    ),
    # a routed teacher read from a cache directory: its path as typed, no weights to count
    "routed cache": (
        {
            "model.teacher": "testbed:teacher",
            "model.teachers": json.dumps({"small": f"{HERE}/caches/small"}),
            "model/teacher_params": math.nan,
            "teacher/small/params": math.nan,
        },
        ("Teacher", "small=caches/small (parameters not recorded)"),
        "testbed:teacher (",
    ),
    "cross-tokenizer": (
        {"model.teacher": f"{HERE}/models/qwen-tok", "model/teacher_params": 3.1e6},
        ("Teacher", "../shared/qwen-tok (3.1M parameters)"),
        "testbed:teacher",
    ),
}


def _study(synth, root, columns):
    common = {"model/student_params": 860032.0, "train/steps_done": 150, **TASK}
    rows = synth.grid("main", synth.main_cells(synth.PAPER_ACC), **common, **columns)
    base = {"model/student_params": 860032.0, **TASK}
    rows += [{**synth.baseline_row(**base), "seed": 42, "run_id": "baseline"}]
    return _typed(synth.write_study(root, rows, spec={"name": "named"}))


def _typed(root):
    """study.yaml as a study writes it: with the typed form of each path it resolved."""
    with (root / "study.yaml").open("a") as f:
        f.write(f"typed_paths: {json.dumps(TYPED)}\n")
    return root


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_report_names_the_teachers_and_task_that_ran(kind, synth, tmp_path):
    columns, (label, line), never = KINDS[kind]
    study = load_study(_study(synth, tmp_path / "study", columns))
    scope = study_scope(study)
    lines = dict(scope.lines())
    assert lines.get(label) == line, scope.lines()
    assert lines["Task"] == "mcq:data/colors.jsonl"
    assert lines["Student"] == "models/student (0.86M parameters)"
    lead = main_lead(scope)
    assert "on mcq:data/colors.jsonl" in lead
    for text in (*lines.values(), lead, scope.phrase()):
        assert HERE not in text and never not in text, text


def test_a_routed_report_never_names_the_unused_default(synth, tmp_path):
    """End to end: the written report.md names the routed teachers in the scope, the main
    table's lead and the Teachers section, the task file as typed, and no resolved path."""
    routed = {**KINDS["routed"][0], "teacher/large/seconds_s": 3.0}
    study_dir = _study(synth, tmp_path / "study", routed)
    md = write_report(study_dir)["markdown"].read_text()
    assert "large=./models/big (2.5M)" in md and "mcq:data/colors.jsonl" in md
    assert "testbed:teacher (" not in md and "Teacher**: testbed:teacher" not in md
    assert HERE not in md


def test_the_teachers_section_shows_paths_as_typed_and_routed_sizes(synth, tmp_path):
    """One-teacher runs are named as typed; a routed teacher's size comes from
    ``teacher/<name>/params``; a routed run's unused default is no teacher of it."""
    local = synth.grid("one", synth.main_cells(synth.PAPER_ACC), **TASK, **KINDS["local"][0])
    routed = synth.grid(
        "two",
        synth.main_cells(synth.PAPER_ACC),
        **TASK,
        **KINDS["routed"][0],
        **{"teacher/large/seconds_s": 3.0, "teacher/small/seconds_s": 1.0},
    )
    root = _typed(synth.write_study(tmp_path / "s", local + routed))
    study = load_study(root)
    table = teacher_table(study.finished, study.spec)
    names = [r[0] for r in table.rows]
    assert names == ["models/teacher", "large (routed)", "small (routed)"]
    assert [r[-1] for r in table.rows] == ["1929024 ± 0", "2500000 ± 0", "420000 ± 0"]


def test_a_table_varying_the_teacher_names_it_as_typed(synth, tmp_path):
    """A grid over teachers: the main table's extra column shows each teacher's path as the
    study file typed it."""
    rows = []
    for tag, kind in (("-a", "local"), ("-b", "cross-tokenizer")):
        cells = synth.main_cells(synth.PAPER_ACC)
        rows += synth.grid("main", cells, tag=tag, **TASK, **KINDS[kind][0])
    md = write_report(_typed(synth.write_study(tmp_path / "s", rows)))["markdown"].read_text()
    main = md.split("## Main grid")[1].split("\n\n#")[0]
    assert "| teacher |" in main.replace("  ", " ")
    assert "models/teacher" in main and "../shared/qwen-tok" in main and HERE not in md
