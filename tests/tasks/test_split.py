import random

import pytest

from distillscope.tasks import Problem, split
from distillscope.tasks.catalogue import (
    COUNTDOWN_3,
    COUNTDOWN_3_TB,
    COUNTDOWN_4_TB,
    COUNTDOWN_4E_TB,
)
from distillscope.tasks.split import (
    EVAL_FRACTION,
    countdown_identity,
    draw_training,
    held_out_problems,
    is_held_out,
    overlap,
    problem_identity,
    training_problems_from,
)


def test_countdown_identity_ignores_operand_order_and_task():
    assert countdown_identity([5, 1, 3], 15) == countdown_identity([1, 3, 5], 15)
    p = COUNTDOWN_3_TB.sample(random.Random(0))
    nums, target = p.answer["numbers"], p.answer["target"]
    assert problem_identity(p) == countdown_identity(reversed(nums), target)


def test_text_identity_is_normalised_and_ignores_the_style_flag():
    a = Problem(prompt="alt  Add 2,  3:", answer=5)
    b = Problem(prompt="add 2, 3:", answer=5)
    assert problem_identity(a) == problem_identity(b)


def test_partition_share_is_close_to_the_fraction():
    ids = [f"item-{i}" for i in range(20_000)]
    share = sum(is_held_out(i) for i in ids) / len(ids)
    assert abs(share - EVAL_FRACTION) < 0.01
    assert all(is_held_out(i) == is_held_out(i) for i in ids[:100])  # stable


@pytest.mark.parametrize("task", [COUNTDOWN_3_TB, COUNTDOWN_3, COUNTDOWN_4E_TB])
def test_held_out_items_are_distinct_and_never_drawn_for_training(task):
    evals = held_out_problems(task, 43, 200)
    assert len({problem_identity(p) for p in evals}) == 200
    assert overlap(evals, training_problems_from(task, 42, 5000)) == 0


def test_harder_variant_items_are_absent_from_countdown4_training():
    # tb-countdown4e and tb-countdown4 share the Countdown identity space
    evals = held_out_problems(COUNTDOWN_4E_TB, 43, 200)
    assert overlap(evals, training_problems_from(COUNTDOWN_4_TB, 42, 5000)) == 0


def test_draw_training_redraws_held_out_items():
    rng = random.Random(1)
    assert not any(
        is_held_out(problem_identity(draw_training(COUNTDOWN_3_TB, rng))) for _ in range(500)
    )


def test_too_many_held_out_items_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(split, "_MAX_MISSES", 2_000)  # give up sooner than the default
    with pytest.raises(ValueError, match="distinct held-out problems"):
        held_out_problems(COUNTDOWN_3_TB, 43, 5_000)
