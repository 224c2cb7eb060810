"""The second testbed teacher, ``testbed:teacher-small``: built alone by ``testbed build --only``
(resumable, recorded in testbed.json), shipped beside the first, and named in configs."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer
from typer.testing import CliRunner

from distillscope import testbed
from distillscope.cli import app
from distillscope.models import resolve_model_path
from distillscope.models.load import load_pair
from distillscope.models.size import parameter_count
from distillscope.testbed.build import build, build_extra
from distillscope.testbed.recipe import DEFAULT_RECIPE, EXTRA_TEACHERS

runner = CliRunner()


def _tiny_extra(out: Path, log=lambda m: None) -> dict:
    return build_extra(
        out, "teacher-small", steps_scale=0.002, log=log, eval_items=4, skill_items=2
    )


def test_build_only_the_extra_teacher_records_it_and_resumes(tmp_path):
    entry = _tiny_extra(tmp_path)
    saved = json.loads((tmp_path / "testbed.json").read_text())
    assert saved == {"extra": {"teacher-small": entry}}
    assert entry["recipe"] == json.loads(json.dumps(asdict(EXTRA_TEACHERS["teacher-small"])))
    assert entry["record"]["steps"] == 2 and entry["record"]["sharpen_rounds"] == 1
    assert entry["record"]["train_seconds"] > 0 and "sharpen_seconds" in entry["record"]
    assert {"countdown3_accuracy", "skill_mean", "harder_pass@10"} <= set(entry["measured"])
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "teacher-small", use_safetensors=True)
    tok = AutoTokenizer.from_pretrained(tmp_path / "teacher-small")
    assert model.config.hidden_size == 160 and model.config.vocab_size == len(tok) == 54
    assert entry["parameters"] == parameter_count(tmp_path / "teacher-small")
    assert not (tmp_path / "teacher").exists()  # nothing else was trained
    logs: list[str] = []
    again = _tiny_extra(tmp_path, logs.append)
    assert any("reusing" in m for m in logs) and not any("[sharpen] round" in m for m in logs)
    assert again["record"] == entry["record"]


def test_unknown_extra_teacher_is_one_line_naming_the_ones_there_are(tmp_path):
    with pytest.raises(ValueError, match="teacher-small"):
        build_extra(tmp_path, "teacher-big")
    res = runner.invoke(app, ["testbed", "build", "--out", str(tmp_path / "x"), "--only", "big"])
    assert res.exit_code == 2 and "teacher-small" in res.output
    assert len(res.output.strip().splitlines()) == 1 and not (tmp_path / "x").exists()


def test_a_bad_testbed_name_lists_the_shipped_models():
    with pytest.raises(ValueError) as err:
        resolve_model_path("testbed:teacher-big")
    message = str(err.value)
    assert "\n" not in message and "testbed:teacher-big" in message
    assert all(f"testbed:{r}" in message for r in ("teacher", "student", "teacher-small"))


@pytest.mark.slow
def test_a_full_build_keeps_the_extra_teachers_record(tmp_path):
    entry = _tiny_extra(tmp_path)
    info = build(tmp_path, DEFAULT_RECIPE, 0.002, lambda m: None, eval_items=4, skill_items=2)
    assert info["extra"] == {"teacher-small": entry}


# the shipped teacher-small --------------------------------------------------------------------


def test_shipped_teacher_small_loads_with_the_students_vocabulary():
    path = testbed.testbed_path("teacher-small")
    assert resolve_model_path("testbed:teacher-small") == path
    pair = load_pair(path, testbed.testbed_path("student"))
    assert pair.vocab_size == 54
    sizes = {r: parameter_count(testbed.testbed_path(r)) for r in testbed.ROLES}
    assert sizes["student"] < sizes["teacher-small"] < sizes["teacher"]


def test_shipped_teacher_small_record_is_the_recipe_and_beats_the_student():
    info = testbed.testbed_info()
    extra = info["extra"]["teacher-small"]
    assert extra["recipe"] == json.loads(json.dumps(asdict(EXTRA_TEACHERS["teacher-small"])))
    assert extra["parameters"] == parameter_count(testbed.testbed_path("teacher-small"))
    assert extra["eval"] == info["eval"]  # measured as the first teacher was
    small, student = extra["measured"], info["measured"]["student"]
    assert small["countdown3_accuracy"] >= student["countdown3_accuracy"] + 0.20
    assert small["countdown3_accuracy"] < info["measured"]["teacher"]["countdown3_accuracy"]


def test_shipped_weights_stay_under_30_mb():
    total = sum(p.stat().st_size for p in testbed.WEIGHTS_DIR.rglob("*.safetensors"))
    assert total <= 30 * 2**20, total


def test_testbed_info_lists_the_extra_teacher():
    res = runner.invoke(app, ["testbed", "info"])
    assert res.exit_code == 0, res.output
    assert "teacher-small" in res.output and "hidden 160" in res.output
