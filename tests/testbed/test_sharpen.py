import random
from dataclasses import replace

import torch
from transformers import LlamaForCausalLM

from distillscope.tasks.catalogue import COUNTDOWN_3_TB
from distillscope.tasks.countdown import to_alt_style
from distillscope.tasks.split import draw_training, is_held_out, problem_identity
from distillscope.testbed import sharpen as sharpen_mod
from distillscope.testbed.build import train_model
from distillscope.testbed.recipe import DEFAULT_RECIPE, SharpenSpec
from distillscope.testbed.sharpen import collect_verified, round_problems, sharpen
from distillscope.testbed.tokenizer import build_tokenizer

SPEC = SharpenSpec(
    rounds=1,
    problems=6,
    samples=2,
    temperature=0.7,
    steps=2,
    batch_size=4,
    lr=1e-3,
    replay=0.5,
    seed=3,
)


def fake_sampler(model, tokenizer, prompts, **kw):
    """Answer every other sample correctly in the requested style, the rest wrongly."""
    out = []
    for i, prompt in enumerate(prompts):
        flagged = prompt.startswith("alt ")
        body = prompt.removeprefix("alt ")
        nums = [int(x) for x in body[3 : body.index(" to ")].split(",")]
        target = int(body[body.index(" to ") + 4 : -1])
        sol = next(p for p in _solutions(nums, target))
        text = to_alt_style(sol) if flagged else sol
        out.append(text if i % 2 == 0 else "1+1=3")
    return out


def _solutions(nums, target):
    from distillscope.tasks.countdown import format_steps, solutions

    return [format_steps(s) for s in solutions(nums, target)]


def test_collect_keeps_only_verified_answers_in_the_requested_style(monkeypatch):
    monkeypatch.setattr(sharpen_mod, "sample_completions", fake_sampler)
    kept, rate = collect_verified(None, None, SPEC, 0)
    assert rate == 0.5 and len(kept) == SPEC.problems
    problems = round_problems(SPEC, 0)
    for (prompt, text), p in zip(kept, problems, strict=True):
        assert COUNTDOWN_3_TB.score(p, text) == 1.0
        assert (prompt.startswith("alt ") and ">" in text) or ("=" in text)


def test_sharpen_fine_tunes_on_the_kept_answers(monkeypatch):
    monkeypatch.setattr(sharpen_mod, "sample_completions", fake_sampler)
    tok = build_tokenizer()
    torch.manual_seed(0)
    model = LlamaForCausalLM(DEFAULT_RECIPE.student.llama_config(len(tok), tok))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    sharpen(model, tok, SPEC, DEFAULT_RECIPE.teacher_train.mixture, train_model, lambda m: None)
    moved = sum(int(not torch.equal(before[k], v)) for k, v in model.state_dict().items())
    assert moved > 0 and not model.training


def test_round_problems_are_seeded_training_items_with_the_wide_share():
    assert [p.prompt for p in round_problems(SPEC, 0)] == [
        p.prompt for p in round_problems(SPEC, 0)
    ]
    rng = random.Random("sharpen/3/0")  # wide_share 0: the testbed task only
    expected = []
    for _ in range(SPEC.problems):
        rng.random()
        expected.append(draw_training(COUNTDOWN_3_TB, rng).prompt)
    assert [p.prompt for p in round_problems(SPEC, 0)] == expected
    wide = replace(SPEC, problems=400, wide_share=0.5)
    problems = round_problems(wide, 1)
    big = [p for p in problems if max(p.answer["numbers"]) > 10]
    assert 100 < len(big) < 300  # operands 11..20 exist only in the wide task
    assert not any(is_held_out(problem_identity(p)) for p in problems)


def test_sharpening_resumed_after_a_round_equals_one_pass(monkeypatch):
    monkeypatch.setattr(sharpen_mod, "sample_completions", fake_sampler)
    tok = build_tokenizer()
    spec = replace(SPEC, rounds=2)
    mix = DEFAULT_RECIPE.teacher_train.mixture

    def fresh() -> LlamaForCausalLM:
        torch.manual_seed(0)
        return LlamaForCausalLM(DEFAULT_RECIPE.student.llama_config(len(tok), tok))

    one_pass, done = fresh(), []
    sharpen(one_pass, tok, spec, mix, train_model, lambda m: None, round_done=done.append)
    assert done == [0, 1]
    resumed = fresh()
    sharpen(resumed, tok, replace(spec, rounds=1), mix, train_model, lambda m: None)
    sharpen(resumed, tok, spec, mix, train_model, lambda m: None, start_round=1)
    resumed_state = resumed.state_dict()
    for k, a in one_pass.state_dict().items():
        b = resumed_state[k]
        assert torch.equal(a, b), k
