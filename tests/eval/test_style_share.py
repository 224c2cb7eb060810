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


def test_the_untrained_student_s_style_support_is_measured_once_by_the_baseline(
    tiny_pair, tmp_path
):
    """Claim 12's regime premise: the baseline of a style study (eval.style) also samples the
    accuracy items at T = 1 with the teacher's style flag in the prompt ("with the flag",
    docs/method.md §9) and writes the style share there; a study without eval.style does not."""
    import json

    from distillscope.config import load_run_config
    from distillscope.eval.evaluate import evaluate
    from distillscope.store import read_eval_items

    teacher, student = tiny_pair
    common = [
        f"model.teacher={teacher}",
        f"model.student={student}",
        "task.max_new_tokens=6",
        "eval.items=4",
        "eval.coverage_items=0",
        "eval.skill_items=0",
        "eval.harder_task=null",
        "eval.temperature=0.5",
    ]
    styled = load_run_config(None, [*common, "task.teacher_style_flag=true", "eval.style=true"])
    blocks: list[str] = []
    out = evaluate(styled, tmp_path / "base", untrained=True, on_block=blocks.append)
    share = out["eval/style_share_t1"]
    assert 0.0 <= share <= 1.0 and "eval/teacher_style_share" in out
    assert any(b.startswith("style_support: 4 items × 1 samples") for b in blocks), blocks
    items = read_eval_items(tmp_path / "base")
    assert (items["block"] == "style_support").sum() == 4
    logged = [json.loads(line) for line in (tmp_path / "base" / "samples.jsonl").open()]
    prompts = {r["block"]: r["prompt"] for r in logged}
    assert prompts["style_support"].startswith("alt "), prompts  # sampled with the flag
    assert not prompts["accuracy"].startswith("alt "), prompts  # the student's own prompt
    plain = evaluate(load_run_config(None, common), tmp_path / "plain", untrained=True)
    assert "eval/style_share_t1" not in plain
