"""Teachers as a study axis: distinct teachers are distinct cells, and the report's section per
teacher (report/teachers.py) shows each one's accuracy, informativeness and compute — one-teacher
runs by ``model.teacher``, routed teachers by name."""

from __future__ import annotations

import pandas as pd
from tests.conftest import save_tiny_llama

from distillscope.report.render import write_report
from distillscope.report.teachers import COLUMNS, teacher_table
from distillscope.results.aggregate import cell_columns
from distillscope.results.reader import finished_runs
from distillscope.scorecard import score_claims
from distillscope.scorecard.runner import NOT_IMPLEMENTED
from distillscope.scorecard.verdicts import NOT_TESTED
from distillscope.study.run_study import run_study
from distillscope.study.spec import StudySpec, expand
from distillscope.study.table import plan_row


def _spec(teacher, student) -> StudySpec:
    routed = {
        "model.teachers": {"big": str(teacher), "small": str(student)},
        "model.route": {"by": "mixture", "weights": {"big": 1, "small": 1}},
    }
    return StudySpec.model_validate(
        {
            "name": "teachers-axis",
            "base": {
                "model": {"student": str(student)},
                "task": {"max_new_tokens": 6},
                "rollout": {"policy": "student", "prompts_per_step": 4, "rollouts_per_prompt": 2},
                "optim": {"steps": 2, "warmup_steps": 1, "lr": 1e-3},
                "checkpoint_every": 0,
                "eval": {"items": 4, "coverage_items": 0, "skill_items": 0, "harder_task": None},
            },
            "experiments": [
                {
                    "name": "teachers",
                    "axes": {
                        "teacher": {
                            "big": {"model.teacher": str(teacher)},
                            "small": {"model.teacher": str(student)},
                            "routed": routed,
                        }
                    },
                }
            ],
        }
    )


def test_teachers_are_cells_and_the_report_has_a_row_per_teacher(tiny_pair, tmp_path):
    teacher, student = tiny_pair
    study = tmp_path / "study"
    df = pd.read_parquet(run_study(_spec(teacher, student), study))
    runs = df[df["experiment"] == "teachers"]
    assert set(runs["status"]) == {"done"} and len(runs) == 3
    assert len(runs.groupby(cell_columns(runs), dropna=False)) == 3  # three distinct cells
    table = teacher_table(finished_runs(df))
    assert table.columns == COLUMNS
    labels = [row[0] for row in table.rows]
    assert labels == sorted([str(teacher), str(student)]) + ["big (routed)", "small (routed)"]
    for row in table.rows:
        assert row[1] == "1" and row[4] != "—"  # one run each, its teacher's seconds
    one = {row[0]: row for row in table.rows}
    assert one[str(teacher)][2] != "—" and one[str(teacher)][5] != "—"  # accuracy, params
    assert one["big (routed)"][2] == "—"  # a mixture routes training prompts only
    write_report(study)
    text = (study / "report" / "report.md").read_text()
    assert "## Teachers" in text and "big (routed)" in text


def test_a_routed_cell_is_apart_from_the_default_teachers_cell():
    """A routed run keeps the default model.teacher (unused): docs/teachers.md's axis of
    testbed:teacher, testbed:teacher-small and both routed is three cells of the table, its
    teachers and route recorded as text."""
    routed = {
        "model.teachers": {"large": "testbed:teacher", "small": "testbed:teacher-small"},
        "model.route": {"by": "mixture", "weights": {"large": 1, "small": 1}},
    }
    axis = {
        "large": {"model.teacher": "testbed:teacher"},
        "small": {"model.teacher": "testbed:teacher-small"},
        "routed": routed,
    }
    spec = {"name": "t", "base": {}, "experiments": [{"name": "e", "axes": {"teacher": axis}}]}
    df = pd.DataFrame([plan_row(r, "done") for r in expand(StudySpec.model_validate(spec))])
    default = "testbed:teacher"  # the routed run's model.teacher, as the large run's
    assert list(df["model.teacher"]) == [default, "testbed:teacher-small", default]
    assert len(df.groupby(cell_columns(df), dropna=False)) == 3
    assert df["model.teachers"].iloc[2] == (
        '{"large": "testbed:teacher", "small": "testbed:teacher-small"}'
    )
    assert df["model.route"].isna().tolist() == [True, True, False]


def test_one_teacher_gives_no_section():
    df = pd.DataFrame(
        {"status": ["done", "done"], "model.teacher": ["t", "t"], "eval/accuracy": [0.5, 0.7]}
    )
    assert teacher_table(finished_runs(df)) is None


def test_claim_28_reads_a_study_of_two_students_and_two_teachers(tiny_pair, tmp_path):
    """Two students × two teachers × two seeds in a `student_scale` experiment: each run records
    both models' sizes, and claim 28 finds its interaction contrast (not "not tested")."""
    teacher, student = tiny_pair
    other_teacher = save_tiny_llama(tmp_path / "teacher-b", hidden=24, layers=1, seed=3)
    other_student = save_tiny_llama(tmp_path / "student-b", hidden=20, layers=1, seed=4)
    spec = _spec(teacher, student).model_dump()
    spec["experiments"] = [
        {
            "name": "student_scale",
            "axes": {
                "model.student": [str(student), str(other_student)],
                "model.teacher": [str(teacher), str(other_teacher)],
                "seed": [42, 43],
            },
        }
    ]
    study = tmp_path / "study"
    df = pd.read_parquet(run_study(StudySpec.model_validate(spec), study))
    runs = df[df["experiment"] == "student_scale"]
    assert set(runs["status"]) == {"done"} and len(runs) == 8
    assert runs.groupby("model.student")["model/student_params"].nunique().eq(1).all()
    assert runs["model/student_params"].nunique() == 2
    (result,) = score_claims(df, study, strict=True, claims=[28])
    assert result.verdict not in (NOT_TESTED, NOT_IMPLEMENTED), result.evidence
