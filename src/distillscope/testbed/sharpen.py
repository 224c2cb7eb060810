"""Expert iteration for the testbed teacher: sample, keep verified answers, fine-tune on them.

After next-token pretraining the teacher knows many valid solution paths but, sampled at
T = 0.5, still commits to paths it cannot finish. Each round draws fresh training problems
(plain and style-flagged prompts), samples several answers per problem, keeps those the verifier
accepts *in the style the prompt asked for*, and fine-tunes on them mixed with replay of the
pretraining mixture (which keeps the skill suite and Countdown-4 intact). This is rejection-
sampling fine-tuning (STaR / RFT); every draw is seeded.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from transformers import LlamaForCausalLM

from distillscope.tasks.base import Problem, styled
from distillscope.tasks.catalogue import COUNTDOWN_3_TB
from distillscope.tasks.split import draw_training
from distillscope.tasks.verify import detect_style
from distillscope.testbed.hf_sampling import sample_completions
from distillscope.testbed.recipe import COUNTDOWN_3_WIDE, SOURCES, SharpenSpec, TrainSpec


def round_problems(spec: SharpenSpec, round_index: int) -> list[Problem]:
    """The fresh training-partition problems of one round (a ``wide_share`` of them wide)."""
    rng = random.Random(f"sharpen/{spec.seed}/{round_index}")
    return [
        draw_training(COUNTDOWN_3_WIDE if rng.random() < spec.wide_share else COUNTDOWN_3_TB, rng)
        for _ in range(spec.problems)
    ]


def collect_verified(
    model: LlamaForCausalLM, tokenizer, spec: SharpenSpec, round_index: int
) -> tuple[list[tuple[str, str]], float]:
    """(prompt, answer) pairs the verifier accepts in the requested style, and the hit rate."""
    problems = round_problems(spec, round_index)
    flags = [i % 2 == 1 for i in range(spec.problems)]
    prompts = [styled(p.prompt) if f else p.prompt for p, f in zip(problems, flags, strict=True)]
    texts = sample_completions(
        model,
        tokenizer,
        [q for q in prompts for _ in range(spec.samples)],
        temperature=spec.temperature,
        batch_size=400,
        seed=spec.seed * 1000 + round_index,
    )
    kept = []
    for i, text in enumerate(texts):
        k = i // spec.samples
        want = "alt" if flags[k] else "plain"
        if COUNTDOWN_3_TB.score(problems[k], text) == 1.0 and detect_style(text) == want:
            kept.append((prompts[k], text.strip()))
    return kept, len(kept) / len(texts)


def sharpen(
    model: LlamaForCausalLM,
    tokenizer,
    spec: SharpenSpec,
    replay_mixture: dict[str, float],
    train: Callable[..., None],
    log: Callable[[str], None],
    probe: Callable[[LlamaForCausalLM], str] | None = None,
    start_round: int = 0,
    round_done: Callable[[int], None] | None = None,
) -> None:
    """Run rounds ``start_round`` … ``spec.rounds − 1`` of collect-then-fine-tune in place.

    ``train`` is :func:`distillscope.testbed.build.train_model` (passed in: build calls sharpen).
    Each round's draws depend only on ``spec`` and its index, so resuming at ``start_round``
    from the model saved after the previous round gives the same weights as one pass;
    ``round_done(r)`` is called after round ``r`` (the build saves the model there).
    """
    for r in range(start_round, spec.rounds):
        model.eval()
        kept, rate = collect_verified(model, tokenizer, spec, r)
        log(f"[sharpen] round {r + 1}: kept {len(kept)} verified answers ({rate:.1%} of samples)")
        if kept:  # else nothing to learn from (e.g. an untrained smoke-test model)
            _fine_tune(model, tokenizer, spec, r, kept, replay_mixture, train, log, probe)
        model.eval()
        if round_done is not None:
            round_done(r)
    model.eval()


def _fine_tune(model, tokenizer, spec, r, kept, replay_mixture, train, log, probe) -> None:
    """Round ``r``'s fine-tuning on the kept answers mixed with replay of the pretraining mix."""
    total = sum(replay_mixture.values())
    mixture = {"verified": 1.0 - spec.replay}
    mixture.update({k: spec.replay * w / total for k, w in replay_mixture.items()})
    sources = {**SOURCES, "verified": lambda rng, kept=kept: rng.choice(kept)}
    round_spec = TrainSpec(
        steps=spec.steps,
        batch_size=spec.batch_size,
        lr=spec.lr,
        seed=spec.seed + r,
        mixture=mixture,
        warmup=20,
        min_lr_ratio=1.0,
    )
    train(model, tokenizer, round_spec, log, probe=probe, probe_every=spec.steps, sources=sources)
