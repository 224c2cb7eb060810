"""The study and presets commands with real-model settings: overrides, fail-fast, exit status."""

import json
from typing import get_args

from pydantic import BaseModel
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.config import RunConfig, config_fields
from distillscope.safeyaml import load_yaml
from distillscope.study.spec import PRESETS_DIR

runner = CliRunner()


def test_presets_lists_every_preset_with_its_description():
    res = runner.invoke(app, ["presets"], terminal_width=200)
    assert res.exit_code == 0, res.output
    for path in PRESETS_DIR.glob("*.yaml"):
        assert path.stem in res.output
    assert "Qwen2.5-7B" in res.output  # a description, not only names


def test_presets_show_prints_the_yaml_to_copy():
    res = runner.invoke(app, ["presets", "show", "paper-qwen"])
    assert res.exit_code == 0, res.output
    assert res.output == (PRESETS_DIR / "paper-qwen.yaml").read_text()
    assert load_yaml(res.output, "copy")["name"] == "paper-qwen"
    res = runner.invoke(app, ["presets", "show", "huge"])
    assert res.exit_code == 2 and "paper-qwen" in res.output


def test_missing_model_path_fails_before_any_run(tmp_path):
    out = tmp_path / "s"
    res = runner.invoke(
        app,
        [
            "study",
            "--preset",
            "paper-qwen",
            "--out",
            str(out),
            f"model.teacher={tmp_path / 'no-teacher'}",
            "model.student=testbed:student",
            "model.device=cpu",
        ],
    )
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line and f"{tmp_path / 'no-teacher'} does not exist" in line
    assert not out.exists()  # nothing planned, nothing written


def test_bad_task_file_fails_before_models_load(tiny_pair, tmp_path):
    teacher, student = tiny_pair
    bad = tmp_path / "sci.jsonl"
    bad.write_text('{"question": "q", "options": ["a", "b"], "answer": "A"}\n{"question": ""}\n')
    common = [
        "study",
        "--preset",
        "smoke",
        "--out",
        str(tmp_path / "s"),
        f"model.teacher={teacher}",
        f"model.student={student}",
        "task.name=mcq",
        "task.prompt_format=testbed",  # the tiny student has no chat template
    ]
    res = runner.invoke(app, [*common, f"task.file={bad}"])
    assert res.exit_code == 2 and "sci.jsonl line 2" in res.output, res.output
    res = runner.invoke(app, [*common, f"task.file={tmp_path / 'gone.jsonl'}"])
    assert res.exit_code == 2 and "gone.jsonl does not exist" in res.output, res.output
    assert not (tmp_path / "s").exists()


def test_study_where_every_run_failed_exits_non_zero(tiny_pair, tmp_path):
    teacher, student = tiny_pair
    out = tmp_path / "s"
    res = runner.invoke(
        app,
        [
            "study",
            "--preset",
            "smoke",
            "--out",
            str(out),
            "--executor",
            "sequential",
            f"model.teacher={teacher}",
            f"model.student={student}",
            "rollout.prompts_per_step=100000",
        ],
    )
    assert res.exit_code == 1, res.output
    assert "4 of 4 runs failed" in res.output
    assert not (out / "report").exists()
    for status in (out / "runs").glob("main_*/status.json"):
        assert json.loads(status.read_text())["status"] == "failed"
    # the untrained student's baseline is evaluated and is not counted among the grid's runs
    assert json.loads((out / "runs" / "baseline" / "status.json").read_text())["status"] == "done"


def test_overrides_reach_every_run_and_a_file_and_preset_still_exclude(tmp_path):
    res = runner.invoke(app, ["study", "my.yaml", "--preset", "smoke", "seed=3"])
    assert res.exit_code == 2 and "not both" in res.output
    res = runner.invoke(app, ["study", "a.yaml", "b.yaml"])
    assert res.exit_code == 2 and "one study file" in res.output


def test_config_lists_every_field_with_its_description():
    res = runner.invoke(app, ["config"])
    assert res.exit_code == 0, res.output
    rows = config_fields()
    lines = res.output.splitlines()[1:]
    assert [line.split(" ")[0] for line in lines] == [r[0] for r in rows]
    assert (
        "model.teacher_device (cpu | cuda | cuda:N | mps | None; default null): torch device "
        "of the teacher"
    ) in res.output  # a field's allowed values in place of its type
    names = {r[0] for r in rows}
    assert {"model.teacher_device", "eval.samples_per_block", "optim.lr", "seed"} <= names

    def leaves(model: type[BaseModel]) -> int:  # a null-by-default section: its row + fields
        count = 0
        for info in model.model_fields.values():
            kind = info.annotation
            section = [a for a in (kind, *get_args(kind)) if isinstance(a, type)]
            section = [a for a in section if issubclass(a, BaseModel)]
            nested = leaves(section[0]) if section else 0
            count += nested if section and section[0] is kind else 1 + nested
        return count

    assert len(rows) == leaves(RunConfig)
    # every field of a null-by-default section is listed, with a type a reader can read
    assert "model.lora.r (int; default 8): rank" in res.output
    assert "rlvr.parent (str; default required)" in res.output
    assert "optim.betas (tuple[float, float]; default [0.9, 0.999])" in res.output
    assert "optim.grad_clip (float | None; default 1.0)" in res.output
    assert "0x" not in res.output and "Annotated" not in res.output
    assert all(r[3] for r in rows)  # every field has a description
    assert dict((r[0], r[1]) for r in rows)["rollout.policy"] == (
        "student | teacher | spectrum | mix | interleave"
    )


def test_train_takes_overrides_without_a_config_file_and_checks_paths_first(tmp_path):
    out = tmp_path / "r"
    res = runner.invoke(
        app, ["train", "--out", str(out), "--", f"model.teacher={tmp_path / 'gone'}"]
    )
    assert res.exit_code == 2 and f"{tmp_path / 'gone'} does not exist" in res.output
    assert len(res.output.strip().splitlines()) == 1 and not out.exists()
