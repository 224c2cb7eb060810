"""Style-transfer settings: the teacher's instruction (chat) and the style share's language.

The working form of a real-model style experiment is the override set
``{task.teacher_instruction: "…", eval.style: true, eval.style_language: es}`` on a chat-format
config; every other combination that a run would ignore or cannot measure is refused in one
line naming the field.
"""

from __future__ import annotations

import json

import pytest

from distillscope.config import ConfigError, evaluation_key, load_run_config
from distillscope.store import config_fingerprint
from distillscope.store_versions import ADDED_FIELDS

CHAT = ["task.name=countdown3", "task.prompt_format=chat"]
SPANISH = ["task.teacher_instruction=Razona en español.", "eval.style=true"]


def _refused(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        load_run_config(None, overrides)
    message = str(err.value)
    assert "\n" not in message and len(message) < 300, message
    return message


def test_the_real_model_style_experiment_loads():
    cfg = load_run_config(None, [*CHAT, *SPANISH, "eval.style_language=es"])
    assert cfg.task.teacher_instruction == "Razona en español."
    assert cfg.eval.style and cfg.eval.style_language == "es"
    upper = load_run_config(None, [*CHAT, *SPANISH, "eval.style_language=ES"])
    assert upper.eval.style_language == "es"


def test_an_instruction_under_the_testbed_format_is_refused():
    message = _refused(["task.teacher_instruction=Reason in Spanish."])
    assert "task.teacher_instruction needs task.prompt_format=chat" in message
    assert "task.teacher_style_flag" in message


def test_an_empty_instruction_is_refused():
    assert "task.teacher_instruction is empty" in _refused([*CHAT, "task.teacher_instruction=' '"])


@pytest.mark.parametrize("code", ["xx", "spanish", "esp", "e"])
def test_an_unknown_language_is_refused(code):
    message = _refused([*CHAT, *SPANISH, f"eval.style_language={code}"])
    assert message.startswith("config: eval.style_language: must be the ISO 639-1 code"), message


def test_a_near_miss_language_code_gets_suggestions():
    assert "e.g." in _refused([*CHAT, *SPANISH, "eval.style_language=esp"])


def test_chat_style_without_a_language_is_refused():
    message = _refused([*CHAT, *SPANISH])
    assert "needs eval.style_language" in message


def test_a_language_without_style_or_under_the_testbed_format_is_refused():
    assert "read only with eval.style=true" in _refused([*CHAT, "eval.style_language=es"])
    message = _refused(["eval.style=true", "eval.style_language=es"])
    assert "applies to task.prompt_format=chat" in message


def test_the_testbed_style_runs_are_unchanged():
    cfg = load_run_config(None, ["task.teacher_style_flag=true", "eval.style=true"])
    assert cfg.eval.style_language is None and cfg.task.teacher_instruction is None


def test_the_new_fields_at_their_default_leave_fingerprints_and_keys_as_they_were():
    assert ADDED_FIELDS["task.teacher_instruction"].default is None
    assert ADDED_FIELDS["eval.style_language"].default is None
    # as a directory of schema version 1, written before them, fingerprints its config
    _, fields = config_fingerprint(load_run_config(None).model_dump(mode="json"), version=1)
    assert "task.teacher_instruction" not in fields and "eval.style_language" not in fields
    key = json.loads(evaluation_key(load_run_config(None)))
    assert "style_language" not in key["eval"] and "teacher_instruction" not in key["task"]


def test_the_instruction_is_the_teacher_s_alone_for_the_evaluation_key():
    plain = load_run_config(None, [*CHAT, "eval.style=true", "eval.style_language=es"])
    told = load_run_config(None, [*CHAT, *SPANISH, "eval.style_language=es"])
    assert evaluation_key(told) == evaluation_key(plain)
    _, a = config_fingerprint(told.model_dump(mode="json"))
    _, b = config_fingerprint(plain.model_dump(mode="json"))
    assert a["task.teacher_instruction"] == "Razona en español." and a != b
