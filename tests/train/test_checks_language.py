"""A run that counts answers in a language checks lingua's extra before anything runs."""

from __future__ import annotations

import sys

import pytest

from distillscope.config import load_run_config
from distillscope.tasks.language import MISSING_LINGUA
from distillscope.train import preflight, preflight_all

STYLE = [
    "task.name=countdown3",
    "task.prompt_format=chat",
    "task.teacher_instruction=Write your reasoning in Spanish.",
    "eval.style=true",
    "eval.style_language=es",
]


def test_without_lingua_preflight_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "lingua", None)  # `import lingua` raises ImportError
    cfg = load_run_config(None, STYLE)
    for check in (lambda: preflight(cfg), lambda: preflight_all([load_run_config(None), cfg])):
        with pytest.raises(ValueError) as err:
            check()
        assert str(err.value) == MISSING_LINGUA


def test_runs_without_a_language_do_not_need_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "lingua", None)
    preflight_all([load_run_config(None, ["task.teacher_style_flag=true", "eval.style=true"])])
