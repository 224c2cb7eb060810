"""Study specs over the tiny random pair (see tests/conftest.py), an mcq task file of n rows, and a
forgetting suite whose dataset is neither cached nor reachable."""

import functools
import json
from pathlib import Path

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


OFFLINE_DATASET = "nobody-cached/this-suite"


def write_mcq(path: Path, n: int) -> Path:
    """``n`` four-option questions (answer A) as an mcq task file."""
    rows = [
        {"id": f"q{i}", "question": f"Which is {i}?", "options": [str(i), "x", "y", "z"]}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps({**r, "answer": "A"}) + "\n" for r in rows))
    return path


@pytest.fixture
def offline_suite(tmp_path, monkeypatch) -> Path:
    """A local lm-eval task reading an uncached hub dataset; the hub offline, caches empty."""
    pytest.importorskip("lm_eval")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tasks = tmp_path / "lm-tasks"
    tasks.mkdir()
    (tasks / "remote_mc.yaml").write_text(
        f"task: remote_mc\ndataset_path: {OFFLINE_DATASET}\ntest_split: test\n"
        "output_type: multiple_choice\ndoc_to_text: q\ndoc_to_choice: c\ndoc_to_target: 0\n"
    )
    return tasks
