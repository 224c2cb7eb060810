"""The harder variant (tb-countdown3-hard) shares no problem with any training source.

Its evaluation items are held-out identities of the split (tasks/split.py), and every source
that trains a testbed model or a study's student draws only training-partition identities; for
the student the disjointness holds by construction as well: none of its pretraining sources can
draw a problem of the harder variant's structure at all.
"""

import random
import re

import pytest

from distillscope.eval.evaluate import split_record
from distillscope.tasks import evaluation_problems, training_problems
from distillscope.tasks.catalogue import COUNTDOWN_3_HARD_TB, COUNTDOWN_3_TB
from distillscope.tasks.split import countdown_identity, is_held_out, problem_identity
from distillscope.testbed.recipe import DEFAULT_RECIPE, RECIPES, SOURCES
from distillscope.testbed.sharpen import round_problems

_PROMPT = re.compile(r"(?:alt )?cd ([\d,]+) to (\d+):")
EVAL_SEED = 43  # the presets' eval.eval_seed
HARDER = evaluation_problems(COUNTDOWN_3_HARD_TB, EVAL_SEED, 200)
HARDER_IDS = {problem_identity(p) for p in HARDER}
COUNTDOWN_SOURCES = sorted(n for n in SOURCES if n.startswith("countdown"))


def _parse(prompt: str) -> tuple[list[int], int] | None:
    m = _PROMPT.fullmatch(prompt)
    return ([int(x) for x in m[1].split(",")], int(m[2])) if m else None


def test_harder_items_are_held_out():
    assert len(HARDER_IDS) == 200 and all(is_held_out(i) for i in HARDER_IDS)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_no_pretraining_source_draws_a_harder_item(name):
    rng = random.Random(f"harder/{name}")
    for _ in range(1000):
        parsed = _parse(SOURCES[name](rng)[0])
        if name not in COUNTDOWN_SOURCES:
            assert parsed is None, name  # skills and single steps: not Countdown prompts
            continue
        ident = countdown_identity(*parsed)
        assert ident not in HARDER_IDS and not is_held_out(ident), (name, ident)


def _admitted(name: str, draws: int = 1000) -> int:
    rng = random.Random(f"structure/{name}")
    return sum(COUNTDOWN_3_HARD_TB.admits(*_parse(SOURCES[name](rng)[0])) for _ in range(draws))


def test_the_student_never_pretrained_on_a_problem_of_this_kind():
    student = [n for n in DEFAULT_RECIPE.student_train.mixture if n in COUNTDOWN_SOURCES]
    assert set(student) == {"countdown2", "countdown4", "countdown3-far"}
    # 2 or 4 operands, or three operands all above 10: never one two-digit operand of three
    assert all(_admitted(n) == 0 for n in student)


def test_the_students_base_phase_never_draws_a_problem_of_this_kind():
    """The base phase adds testbed Countdown-3 (operands 1..10, both styles): no two-digit
    operand, so none of its problems has the harder variant's structure either."""
    base = [n for n in RECIPES["regime"].student_base.mixture if n in COUNTDOWN_SOURCES]
    assert set(base) == {
        "countdown2",
        "countdown4",
        "countdown3-far",
        "countdown3",
        "countdown3-alt",
        "countdown3-flag-plain",
    }
    assert all(_admitted(n) == 0 for n in base)


def test_only_the_teachers_wide_sources_hold_the_structure_and_they_are_training_side():
    teacher = [n for n in DEFAULT_RECIPE.teacher_train.mixture if n in COUNTDOWN_SOURCES]
    holding = {n for n in teacher if _admitted(n)}
    assert holding == {"countdown3-wide", "countdown3-wide-alt"}
    # those draws are training-partition identities (test above): the teacher saw problems of
    # the harder variant's kind, never one of its evaluation items


def test_sharpening_rounds_never_draw_a_harder_item():
    spec = DEFAULT_RECIPE.teacher_sharpen
    for r in range(spec.rounds):
        ids = {problem_identity(p) for p in round_problems(spec, r)}
        assert not ids & HARDER_IDS
        assert not any(is_held_out(i) for i in ids)


def test_a_studys_training_pool_and_split_record():
    pool = training_problems(COUNTDOWN_3_TB)  # distillation prompts and teacher-rollout caches
    record = split_record("split/harder", HARDER, pool, COUNTDOWN_3_HARD_TB.name)
    assert record == {"split/harder/eval_items": 200, "split/harder/overlap": 0}
    assert not any(COUNTDOWN_3_HARD_TB.admits(**_answer(p)) for p in pool)


def _answer(p) -> dict:
    return {"numbers": p.answer["numbers"], "target": p.answer["target"]}
