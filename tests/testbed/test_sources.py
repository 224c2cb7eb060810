"""Every pretraining source of the testbed recipe: encodable, solved, and never held out."""

import random
import re

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
    assert "countdown3-wide" in names
    for name in names:
        wide = 0
        for _ in range(300):
            prompt, completion = SOURCES[name](rng)
            m = _PROMPT.fullmatch(prompt)
            numbers, target = [int(x) for x in m[1].split(",")], int(m[2])
            assert check_countdown(numbers, target, completion), (name, prompt, completion)
            assert not is_held_out(countdown_identity(numbers, target))
            wide += max(numbers) > 10
        assert (wide > 0) == name.startswith("countdown3-wide"), name
