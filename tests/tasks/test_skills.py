import random

import pytest

from distillscope.tasks.base import make_split
from distillscope.tasks.skills import SkillTask, skill_suite


def test_suite_has_five_exact_match_skills():
    suite = skill_suite()
    assert [t.name for t in suite] == [
        "skill-add",
        "skill-sub",
        "skill-mul",
        "skill-sort",
        "skill-rev",
    ]
    rng = random.Random(0)
    for task in suite:
        for _ in range(50):
            p = task.sample(rng)
            assert task.score(p, p.answer) == 1.0
            assert task.score(p, p.answer + " ") == 1.0
            assert task.score(p, p.answer + "0") == 0.0


def test_skill_answers_are_right():
    add = make_split(SkillTask("add"), 1, 20)
    for p in add:
        a, b = map(int, p.prompt[4:-1].split(","))
        assert int(p.answer) == a + b
    for p in make_split(SkillTask("sort"), 1, 20):
        xs = p.prompt[5:-1].split(",")
        assert p.answer == ",".join(sorted(xs))
    for p in make_split(SkillTask("rev"), 1, 20):
        assert p.answer == p.prompt[4:-1][::-1]


def test_unknown_skill_is_rejected():
    with pytest.raises(ValueError, match="add"):
        SkillTask("divide")
