"""``eval/teacher_style_share`` on synthetic accuracy blocks: glyph styles or a language."""

from __future__ import annotations

import pytest

from distillscope.eval.evaluate import _style_share
from distillscope.eval.generate import Samples


def _block(texts: list[str]) -> Samples:
    n = len(texts)
    return Samples([[t] for t in texts], [[0.0]] * n, [[5]] * n, [[False]] * n)


def test_testbed_runs_count_the_alternative_glyph_style():
    block = _block(["3p5>8;8x7>56", "3+5=8,8*7=56", "<answer>2x3>6</answer>", "no answer"])
    assert _style_share(block, None) == {"eval/teacher_style_share": 0.5}


def test_chat_runs_count_answers_reasoned_in_the_language():
    pytest.importorskip("lingua", reason="the optional extra lang is not installed")
    answer = "<answer>3+5=8,8*7=56</answer>"
    block = _block(
        [
            f"<think>Primero sumo tres y cinco para obtener ocho, luego multiplico por siete."
            f"</think> {answer}",
            f"<think>First I add three and five to get eight, then multiply by seven.</think> "
            f"{answer}",
            "Voy a probar otra combinación de los números antes de rendirme.",
            "",  # empty: never the language
            answer,  # equations only: too few letters
        ]
    )
    assert _style_share(block, "es") == {"eval/teacher_style_share": pytest.approx(2 / 5)}
    assert _style_share(block, "en") == {"eval/teacher_style_share": pytest.approx(1 / 5)}
