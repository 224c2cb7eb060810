"""A teacher instruction reaches the teacher's rendered chat prompt and never the student's."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from tests.conftest import train_chat_tokenizer

from distillscope.rollout.prompts import PromptEncoder, instructed
from distillscope.tasks import Problem, resolve_task

SPANISH = "Reason in Spanish."


@pytest.fixture(scope="module")
def tokenizer():
    tok = train_chat_tokenizer()  # ChatML, as Qwen2.5 ships it
    tok.pad_token = "<|endoftext|>"  # as load_pair gives a tokenizer without one
    return tok


@pytest.fixture(scope="module")
def countdown():
    task = resolve_task("countdown3", None)
    return task, [task.sample(random.Random(i)) for i in range(3)]


def test_the_instruction_joins_the_teacher_s_system_message(tokenizer, countdown):
    task, problems = countdown
    encoder = PromptEncoder(task, tokenizer, "chat", teacher_instruction=SPANISH)
    assert encoder.teacher_prompt_differs  # one tokenizer, one template: the instruction alone
    student = encoder.texts(problems, "student")
    teacher = encoder.texts(problems, "teacher")
    system = task.chat_messages(problems[0])[0]["content"]
    for s, t in zip(student, teacher, strict=True):
        assert SPANISH not in s
        assert t == s.replace(f"{system}<|im_end|>", f"{system}\n\n{SPANISH}<|im_end|>", 1)
    plain = PromptEncoder(task, tokenizer, "chat")
    assert plain.texts(problems, "student") == student  # the student's prompt is unchanged


def test_the_encoded_prompts_carry_it_for_the_teacher_only(tokenizer, countdown):
    task, problems = countdown
    encoder = PromptEncoder(task, tokenizer, "chat", teacher_instruction=SPANISH)
    s_ids, s_mask = encoder.encode(problems, "student")
    t_ids, t_mask = encoder.encode(problems, "teacher")
    assert t_ids.shape[1] > s_ids.shape[1]
    for row in range(len(problems)):
        student = tokenizer.decode(s_ids[row][s_mask[row].bool()])
        teacher = tokenizer.decode(t_ids[row][t_mask[row].bool()])
        assert SPANISH in teacher and SPANISH not in student


def test_without_a_system_message_the_instruction_becomes_one(tokenizer):
    task = SimpleNamespace(chat_messages=lambda p: [{"role": "user", "content": p.prompt}])
    problem = Problem(prompt="What is 2 + 3?", answer="5")
    encoder = PromptEncoder(task, tokenizer, "chat", teacher_instruction=SPANISH)
    (student,) = encoder.texts([problem], "student")
    (teacher,) = encoder.texts([problem], "teacher")
    assert teacher == f"<|im_start|>system\n{SPANISH}<|im_end|>\n" + student


def test_instructed_appends_or_prepends_and_leaves_the_input_alone():
    user = {"role": "user", "content": "hi"}
    system = {"role": "system", "content": "Be brief."}
    messages = [system, user]
    assert instructed(messages, "X") == [{"role": "system", "content": "Be brief.\n\nX"}, user]
    assert messages == [system, user]
    assert instructed([user], "X") == [{"role": "system", "content": "X"}, user]


def test_the_testbed_format_refuses_an_instruction(tokenizer, countdown):
    task, _ = countdown
    with pytest.raises(ValueError, match="needs the chat prompt format"):
        PromptEncoder(task, tokenizer, "testbed", teacher_instruction=SPANISH)
