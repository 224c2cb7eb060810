"""Issue 44, "discoverable": what a new user looks for is where they look — each field's allowed
values in ``distillscope config``, ``study plan --help`` of its own, and a teacher with another
tokenizer from docs/teachers.md and the README's table of docs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.config import ConfigError, config_fields, load_run_config
from distillscope.config.parse import allowed_values
from distillscope.tasks.catalogue import get_task

ROOT = Path(__file__).resolve().parents[1]

#: The text fields checked against a registry (their values listed by `distillscope config`).
REGISTRY_FIELDS = ("task.name", "objective.kind", "eval.style_language", "eval.harder_task")


def _values(field: str) -> list[str]:
    return [v for v in allowed_values(field).split(" | ") if v != "None"]


@pytest.mark.parametrize("field", REGISTRY_FIELDS)
def test_config_lists_every_value_its_check_accepts(field):
    listed = {name: kind for name, kind, _, _ in config_fields()}
    assert listed[field] == allowed_values(field)
    for value in _values(field):  # each listed value passes the field's own check
        try:
            load_run_config(None, [f"{field}={value}"])
        except ConfigError as err:
            # a value may need companions (a chat task, a style flag): never "unknown"
            assert "unknown" not in str(err) and "not one of" not in str(err), (value, err)
    with pytest.raises((ConfigError, ValueError)):  # task names: when the task is resolved
        cfg = load_run_config(None, [f"{field}=no-such-value"])
        get_task(cfg.task.name if field == "task.name" else cfg.eval.harder_task)


def test_study_plan_help_is_its_own():
    runner = CliRunner()
    plan = runner.invoke(app, ["study", "plan", "--help"])
    study = runner.invoke(app, ["study", "--help"])
    assert plan.exit_code == 0 and study.exit_code == 0
    assert plan.output.startswith("Usage: distillscope study plan")
    for option in ("--rehearse", "--noise-from", "--only", "--preset"):
        assert option in plan.output
    assert "Usage: distillscope study plan" not in study.output
    assert "--executor" in study.output


def test_a_teacher_with_another_tokenizer_is_found_from_the_teachers_page():
    teachers = (ROOT / "docs" / "teachers.md").read_text()
    assert "Every teacher must share the student's tokenizer" not in teachers
    assert "scaling.md#a-teacher-with-another-tokenizer" in teachers
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if "docs/teachers.md" in line)
    assert "another tokenizer" in row and "scaling.md#a-teacher-with-another-tokenizer" in row
