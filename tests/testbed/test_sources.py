"""Every pretraining source of the testbed recipe: encodable, solved, and never held out."""

import random
import re

from distillscope.tasks.countdown import apply_op
from distillscope.tasks.split import countdown_identity, is_held_out
from distillscope.tasks.verify import check_countdown
from distillscope.testbed.recipe import DEFAULT_RECIPE, RECIPES, SOURCES
from distillscope.testbed.tokenizer import encode_checked

_PROMPT = re.compile(r"(?:alt )?cd ([\d,]+) to (\d+):")


def test_every_source_draws_encodable_examples():
    rng = random.Random(0)
    for draw in SOURCES.values():
        for _ in range(50):
            prompt, completion = draw(rng)
            encode_checked(prompt), encode_checked(completion)  # raises on a foreign character
    for train in (
        DEFAULT_RECIPE.teacher_train,
        DEFAULT_RECIPE.student_train,
        RECIPES["regime"].student_base,
    ):
        assert set(train.mixture) <= set(SOURCES)


def test_countdown_sources_are_solved_and_never_held_out():
    rng = random.Random(1)
    names = [n for n in SOURCES if n.startswith("countdown")]
    assert {"countdown2", "countdown3-far", "countdown3-wide"} <= set(names)
    for name in names:
        wide = far = 0
        for _ in range(300):
            prompt, completion = SOURCES[name](rng)
            m = _PROMPT.fullmatch(prompt)
            numbers, target = [int(x) for x in m[1].split(",")], int(m[2])
            assert check_countdown(numbers, target, completion), (name, prompt, completion)
            assert not is_held_out(countdown_identity(numbers, target))
            wide += max(numbers) > 10
            far += min(numbers) > 10
        assert (wide > 0) == name.startswith(("countdown3-wide", "countdown3-far")), name
        assert (far == 300) == (name == "countdown3-far"), name  # no testbed operand at all


def test_single_steps_are_valid_countdown_steps():
    rng = random.Random(2)
    for _ in range(300):
        prompt, completion = SOURCES["step"](rng)
        a, op, b, r = re.fullmatch(r"(\d+)([-+*/])(\d+)=(\d+)", completion).groups()
        assert prompt == f"calc {a}{op}{b}:"
        assert apply_op(int(a), op, int(b)) == int(r)


def test_the_student_never_pretrains_on_testbed_countdown3():
    """[P]'s student lacks only the task: no Countdown-3 over the testbed's numbers, any style."""
    tb3 = {"countdown3", "countdown3-alt", "countdown3-wide", "countdown3-wide-alt"}
    assert not tb3 & set(DEFAULT_RECIPE.student_train.mixture)


def test_the_base_phase_adds_a_small_share_of_the_task_in_both_styles():
    """The student's base phase (issue 43): its pretraining mixture plus testbed Countdown-3 —
    every draw from the training partition (test above) — at under 2% of the examples, of
    which the flagged prompts are answered in the second style 3 times in 8."""
    base, pre = RECIPES["regime"].student_base.mixture, DEFAULT_RECIPE.student_train.mixture
    added = {k: w for k, w in base.items() if k not in pre}
    assert {k: base[k] for k in pre} == pre
    assert set(added) == {"countdown3", "countdown3-alt", "countdown3-flag-plain"}
    assert sum(added.values()) / sum(base.values()) < 0.02
    flagged = added["countdown3-alt"] + added["countdown3-flag-plain"]
    assert added["countdown3-alt"] / flagged == 0.375


def test_flagged_plain_source_asks_for_the_style_and_answers_plainly():
    from distillscope.tasks.base import STYLE_FLAG
    from distillscope.tasks.verify import detect_style

    rng = random.Random(3)
    for _ in range(100):
        prompt, completion = SOURCES["countdown3-flag-plain"](rng)
        assert prompt.startswith(STYLE_FLAG) and detect_style(completion) == "plain"
        prompt, completion = SOURCES["countdown3-alt"](rng)
        assert prompt.startswith(STYLE_FLAG) and detect_style(completion) == "alt"
