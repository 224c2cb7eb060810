"""Every pretraining source of the testbed recipe: encodable, solved, and never held out."""

import random
import re

from distillscope.tasks.countdown import apply_op
from distillscope.tasks.split import countdown_identity, is_held_out
from distillscope.tasks.verify import check_countdown
from distillscope.testbed.recipe import DEFAULT_RECIPE, SOURCES
from distillscope.testbed.tokenizer import encode_checked

_PROMPT = re.compile(r"(?:alt )?cd ([\d,]+) to (\d+):")


def test_every_source_draws_encodable_examples():
    rng = random.Random(0)
    for draw in SOURCES.values():
        for _ in range(50):
            prompt, completion = draw(rng)
            encode_checked(prompt), encode_checked(completion)  # raises on a foreign character
    for train in (DEFAULT_RECIPE.teacher_train, DEFAULT_RECIPE.student_train):
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
