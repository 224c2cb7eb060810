"""The testbed recipe: model shapes, training schedules and data mixtures of both models.

:data:`DEFAULT_RECIPE` is what ``distillscope testbed build`` trains; :data:`SOURCES` names the
example drawers a mixture weights. Kept apart from :mod:`.build` and :mod:`.sharpen` so that both
read it without importing each other.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from transformers import LlamaConfig

from distillscope.tasks.base import styled
from distillscope.tasks.catalogue import COUNTDOWN_3_TB, COUNTDOWN_4_TB, TB_MAX_TARGET
from distillscope.tasks.countdown import SMALL_POOL, CountdownTask, apply_op, to_alt_style
from distillscope.tasks.skills import skill_suite
from distillscope.tasks.split import draw_training


@dataclass
class SharpenSpec:
    """One expert-iteration schedule.

    Attributes:
        rounds: sample-then-fine-tune rounds.
        problems: fresh Countdown-3 training problems per round (half with the style flag).
        samples: answers sampled per problem.
        temperature: sampling temperature of the rounds.
        steps, batch_size, lr: fine-tuning per round (constant LR after 20 warm-up steps).
        replay: share of each batch drawn from the pretraining mixture.
        seed: seeds problems, sampling and batches.
        wide_share: share of each round's problems drawn from :data:`COUNTDOWN_3_WIDE`
            instead of the testbed's Countdown-3 (its training partition either way).
    """

    rounds: int
    problems: int
    samples: int
    temperature: float
    steps: int
    batch_size: int
    lr: float
    replay: float
    seed: int
    wide_share: float = 0.0


@dataclass
class ModelSpec:
    """Shape of a testbed Llama model."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int

    def llama_config(self, vocab_size: int, tokenizer) -> LlamaConfig:
        return LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_attention_heads,
            max_position_embeddings=128,
            tie_word_embeddings=True,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )


@dataclass
class TrainSpec:
    """How one testbed model is trained: steps, batch, LR schedule and the data mixture.

    ``mixture`` maps a source name (see :data:`SOURCES`) to its sampling weight.
    """

    steps: int
    batch_size: int
    lr: float
    seed: int
    mixture: dict[str, float]
    warmup: int = 100
    min_lr_ratio: float = 0.1


@dataclass
class Recipe:
    """Shapes and training of both testbed models; ``teacher_sharpen``: expert iteration;
    ``student_base``: the student's base phase, continued pretraining after ``student_train``
    that gives it latent capability on the task and the teacher's style in its support."""

    teacher: ModelSpec
    student: ModelSpec
    teacher_train: TrainSpec
    student_train: TrainSpec
    teacher_sharpen: SharpenSpec | None = None
    student_base: TrainSpec | None = None


def _countdown(task, alt: bool) -> Callable[[random.Random], tuple[str, str]]:
    def draw(rng: random.Random) -> tuple[str, str]:
        p = draw_training(task, rng)  # never a held-out evaluation item
        sol = p.meta["solution"]
        return (styled(p.prompt), to_alt_style(sol)) if alt else (p.prompt, sol)

    return draw


def _flagged_plain(task) -> Callable[[random.Random], tuple[str, str]]:
    """Style-flagged prompts answered in the *plain* style: with :func:`_countdown` ``alt=True``
    beside it in a mixture, their weights set how often the flag is obeyed."""

    def draw(rng: random.Random) -> tuple[str, str]:
        p = draw_training(task, rng)
        return styled(p.prompt), p.meta["solution"]

    return draw


def _skill(task) -> Callable[[random.Random], tuple[str, str]]:
    # The skill suite measures retention of what the student knows (forgetting), so its items
    # are drawn from the whole skill space, as the forgetting evaluation draws them.
    def draw(rng: random.Random) -> tuple[str, str]:
        p = task.sample(rng)
        return p.prompt, p.answer

    return draw


#: Countdown-3 over operands 1..20 (targets ≤ 100): 16,292 problems instead of the testbed
#: task's 2,915, so the teacher cannot pass by recall and must learn to solve. Its problems with
#: operands ≤ 10 *are* testbed Countdown-3 problems (same canonical identity), so they are drawn
#: from the training partition like every other source.
COUNTDOWN_3_WIDE = CountdownTask(
    "tb-countdown3-wide", 3, tuple(range(1, 21)), max_target=TB_MAX_TARGET
)

#: Countdown-3 over two-digit operands 11..30 (targets ≤ 100; 9,318 problems): the search the
#: task asks for, on numbers no testbed problem uses (testbed operands are 1..10), so it shares
#: no identity with any testbed item. The student practises the task's search here and meets
#: the testbed's own numbers only through distillation.
COUNTDOWN_3_FAR = CountdownTask(
    "tb-countdown3-far", 3, tuple(range(11, 31)), max_target=TB_MAX_TARGET
)

#: 2-operand Countdown: one equation (``cd 7,8 to 56:`` → ``7*8=56``), an ingredient of the
#: student's pretraining; a source only, not a registered task.
COUNTDOWN_2_TB = CountdownTask("tb-countdown2", 2, SMALL_POOL, max_target=TB_MAX_TARGET)


def _step(rng: random.Random) -> tuple[str, str]:
    """One Countdown-sized arithmetic step: ``calc 56/8:`` → ``56/8=7`` (+ − × and exact ÷).

    One operand from the Countdown pool, the other an intermediate result up to the testbed's
    target bound, in either order; only valid Countdown steps (positive, exact).
    """
    while True:
        a, b = rng.randint(1, TB_MAX_TARGET), rng.choice(SMALL_POOL)
        if rng.random() < 0.5:
            a, b = b, a
        op = rng.choice("+-*/")
        r = apply_op(a, op, b)
        if r is not None and r <= 10 * TB_MAX_TARGET:
            return f"calc {a}{op}{b}:", f"{a}{op}{b}={r}"


SOURCES: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "countdown2": _countdown(COUNTDOWN_2_TB, alt=False),
    "step": _step,
    "countdown3-far": _countdown(COUNTDOWN_3_FAR, alt=False),
    "countdown3": _countdown(COUNTDOWN_3_TB, alt=False),
    "countdown3-alt": _countdown(COUNTDOWN_3_TB, alt=True),
    "countdown3-flag-plain": _flagged_plain(COUNTDOWN_3_TB),
    "countdown3-wide": _countdown(COUNTDOWN_3_WIDE, alt=False),
    "countdown3-wide-alt": _countdown(COUNTDOWN_3_WIDE, alt=True),
    "countdown4": _countdown(COUNTDOWN_4_TB, alt=False),
    "countdown4-alt": _countdown(COUNTDOWN_4_TB, alt=True),
    **{t.name: _skill(t) for t in skill_suite()},
}

DEFAULT_RECIPE = Recipe(
    teacher=ModelSpec(192, 576, 4, 6),
    student=ModelSpec(128, 384, 4, 4),
    teacher_train=TrainSpec(
        steps=2000,
        batch_size=128,
        lr=1.5e-3,
        seed=11,
        mixture={
            "countdown3": 0.2,
            "countdown3-alt": 0.1,
            "countdown3-wide": 0.25,
            "countdown3-wide-alt": 0.1,
            "countdown4": 0.15,
            "countdown4-alt": 0.05,
            **{t.name: 0.03 for t in skill_suite()},
        },
    ),
    # The student has the abilities and lacks only the task, like [P]'s: skills, single steps,
    # 2- and 4-operand Countdown and Countdown-3's search on two-digit operands, but no
    # Countdown-3 over the testbed's numbers (docs/notes/2026-11-testbed-search.md,
    # "learnability search").
    student_train=TrainSpec(
        steps=2000,
        batch_size=128,
        lr=2e-3,
        seed=12,
        mixture={
            "countdown2": 0.1,
            "step": 0.05,
            "countdown4": 0.1,
            "countdown3-far": 0.3,
            **{t.name: 0.09 for t in skill_suite()},
        },
    ),
    teacher_sharpen=SharpenSpec(
        rounds=2,
        problems=1500,
        samples=4,
        temperature=0.7,
        steps=250,
        batch_size=128,
        lr=3e-4,
        replay=0.4,
        seed=21,
        wide_share=0.5,
    ),
)


#: The student's base phase (issue 43): after its pretraining, a short continued pretraining on
#: the same mixture plus a small share of testbed Countdown-3 from the training partition
#: (latent capability: a few percent accuracy and a pass@32 far above it, as a pretrained 1B
#: model on a task it has seen a little of) and of style-flagged Countdown-3 answered in the
#: second style 3 times in 8 (the style in its support, not its habit).
STUDENT_BASE = TrainSpec(
    steps=100,
    batch_size=128,
    lr=5e-4,
    seed=31,
    mixture={
        **DEFAULT_RECIPE.student_train.mixture,
        "countdown3": 0.008,
        "countdown3-alt": 0.003,
        "countdown3-flag-plain": 0.005,
    },
    warmup=20,
)

#: The recipes ``testbed build --recipe NAME`` builds: ``shipped`` made the shipped weights;
#: ``regime`` adds the student's base phase (docs/testbed.md, "The papers' regime"), a
#: candidate measured but not shipped (its record: bench/records/testbed-regime-2026-12-06).
RECIPES: dict[str, Recipe] = {
    "shipped": DEFAULT_RECIPE,
    "regime": replace(DEFAULT_RECIPE, student_base=STUDENT_BASE),
}


@dataclass
class ExtraTeacher:
    """A further testbed teacher beside :data:`DEFAULT_RECIPE`'s (same tokenizer and student):
    its shape, pretraining and optional sharpening, built by ``testbed build --only NAME``."""

    model: ModelSpec
    train: TrainSpec
    sharpen: SharpenSpec | None = None


#: The shipped teachers beyond ``teacher``, by role name (``testbed:<name>`` in a config).
#: ``teacher-small`` is the modest teacher of the ``teacher_scale`` experiment (claims 18 and
#: 22): hidden 160 instead of 192, 1,200 pretraining steps instead of 2,000 and one sharpening
#: round instead of two, on the teacher's own mixture (both styles, Countdown-4, skills).
EXTRA_TEACHERS: dict[str, ExtraTeacher] = {
    "teacher-small": ExtraTeacher(
        model=ModelSpec(160, 480, 4, 5),
        train=replace(DEFAULT_RECIPE.teacher_train, steps=1200, lr=2e-3, seed=13),
        sharpen=replace(DEFAULT_RECIPE.teacher_sharpen, rounds=1, seed=23),
    ),
}
