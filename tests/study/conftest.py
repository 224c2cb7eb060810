"""Study specs over the tiny random pair (see tests/conftest.py)."""

import functools

import pytest

from distillscope.study.spec import StudySpec


def _tiny_study(tiny_pair, axes, *, steps=3, checkpoint_every=2, name="main", **eval_over):
    """A study of ``axes`` (one experiment ``name``) on the tiny pair, with a small evaluation."""
    teacher, student = tiny_pair
    evaluation = {
        "items": 4,
        "coverage_items": 2,
        "coverage_samples": 2,
        "skill_items": 2,
        "harder_task": None,
        **eval_over,
    }
    return StudySpec.model_validate(
        {
            "name": "tiny",
            "base": {
                "model": {"teacher": str(teacher), "student": str(student)},
                "task": {"max_new_tokens": 6},
                "rollout": {"prompts_per_step": 4},
                "optim": {"steps": steps, "warmup_steps": 1, "lr": 1e-3},
                "checkpoint_every": checkpoint_every,
                "eval": evaluation,
            },
            "experiments": [{"name": name, "axes": axes}],
        }
    )


@pytest.fixture
def tiny_study(tiny_pair):
    """``tiny_study(axes, steps=…, checkpoint_every=…, name=…, **eval_settings)`` → StudySpec."""
    return functools.partial(_tiny_study, tiny_pair)
