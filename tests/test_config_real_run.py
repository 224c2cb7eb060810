"""A run on a task that is not the testbed's gets no testbed default: its prompt format follows
the student's chat template, and the testbed's harder variant and skill suite are off unless
named (config.task.real_run_defaults)."""

import json

import pytest
import yaml

from distillscope.config import ConfigError, RunConfig, TaskConfig, load_run_config
from distillscope.config.parse import run_config_from_dict

# absolute: read as it is (a relative one must name a file; preflight checks this one)
MCQ = ["task.name=mcq", "task.file=/data/rows.jsonl"]


def _student(tmp_path, **tokenizer_config):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return f"model.student={tmp_path}"


def test_a_real_task_turns_the_testbed_measures_off_unless_named():
    cfg = load_run_config(None, MCQ)
    assert (cfg.eval.harder_task, cfg.eval.skill_items) == (None, 0)
    assert cfg.task.prompt_format == "testbed"  # the testbed student has no chat template
    named = load_run_config(
        None, [*MCQ, "eval.harder_task=tb-countdown3-hard", "eval.skill_items=7"]
    )
    assert (named.eval.harder_task, named.eval.skill_items) == ("tb-countdown3-hard", 7)
    built = RunConfig(task=TaskConfig(name="mcq", file="rows.jsonl"))  # sections as objects
    assert (built.eval.harder_task, built.eval.skill_items) == (None, 0)


def test_testbed_tasks_keep_the_testbed_defaults():
    cfg = load_run_config(None, ["task.name=tb-countdown4"])
    assert (cfg.eval.harder_task, cfg.eval.skill_items) == ("tb-countdown3-hard", 100)
    assert cfg.task.prompt_format == "testbed"


def test_a_chat_template_makes_chat_the_default(tmp_path):
    cfg = load_run_config(None, [*MCQ, _student(tmp_path, chat_template="{{ messages }}")])
    assert cfg.task.prompt_format == "chat"
    (tmp_path / "tokenizer_config.json").write_text("{}")
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")  # transformers 5's file
    assert load_run_config(None, [*MCQ, f"model.student={tmp_path}"]).task.prompt_format == "chat"
    # the resolved config names what it chose: reloaded, it is the same run
    again = run_config_from_dict(yaml.safe_load(yaml.safe_dump(cfg.model_dump(mode="json"))))
    assert again == cfg


def test_a_tokenizer_without_a_template_is_refused_in_one_whole_line(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_run_config(None, [*MCQ, _student(tmp_path)])
    message = str(err.value)
    assert "task.prompt_format" in message and "\n" not in message
    assert message.endswith("testbed, the bare question without one)")  # never cut mid-advice
    chosen = load_run_config(None, [*MCQ, _student(tmp_path), "task.prompt_format=testbed"])
    assert chosen.task.prompt_format == "testbed"


def test_an_absent_student_directory_defaults_to_chat(tmp_path):
    # a GPU study's config still loads on a laptop (status, report); preflight names the model
    cfg = load_run_config(None, [*MCQ, f"model.student={tmp_path / 'elsewhere'}"])
    assert cfg.task.prompt_format == "chat"
