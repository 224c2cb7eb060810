"""Numeric settings a user could set to nonsense are refused in one line naming the field.

``optim.lr=0`` would train nothing and report 100% update sparsity, the quantity the lab
studies; a negative or non-finite LR trains away from the objective or diverges at once.
"""

from __future__ import annotations

import pytest

from distillscope.config import ConfigError, load_run_config

BAD_LR = ["0", "0.0", "-0.0", "-1e-5", "-5e-5", ".nan", "nan", ".inf", "inf", "-.inf", "1e400"]


def _refused(override: str) -> str:
    with pytest.raises(ConfigError) as err:
        load_run_config(None, [override])
    message = str(err.value)
    assert "\n" not in message and len(message) < 300, message
    return message


@pytest.mark.parametrize("value", BAD_LR)
def test_a_learning_rate_that_is_not_positive_and_finite_is_refused(value):
    message = _refused(f"optim.lr={value}")
    assert message.startswith("config: optim.lr: "), message
    assert "greater than 0" in message or "finite number" in message, message


def test_a_learning_rate_from_a_file_is_refused_naming_the_file_and_field(tmp_path):
    path = tmp_path / "run.yaml"
    for value in ("0", "-1e-4", ".nan", ".inf"):
        path.write_text(f"optim: {{lr: {value}}}\n")
        with pytest.raises(ConfigError, match=rf"^{path}: optim\.lr: "):
            load_run_config(path)


def test_the_smallest_positive_learning_rates_are_accepted():
    assert load_run_config(None, ["optim.lr=1e-12"]).optim.lr == 1e-12
    assert load_run_config(None, ["optim.lr=5e-5"]).optim.lr == 5e-5


#: field → values that are nonsense for it (each must be refused naming the field).
NONSENSE = {
    "optim.steps": ["0", "-1", "1.5", "true"],
    "optim.warmup_steps": ["-1"],
    "optim.eps": ["0", "-1e-8", ".nan"],
    "optim.weight_decay": ["-0.1", ".inf"],
    "optim.grad_clip": ["0", "-1", ".nan", ".inf"],
    "optim.grad_accum": ["0", "-2"],
    "rollout.student_temperature": ["0", "-1", ".nan"],
    "rollout.teacher_temperature": ["0", ".inf"],
    "rollout.top_p": ["0", "1.5", ".nan"],
    "rollout.p_student": ["-0.1", "1.1"],
    "rollout.lam": ["-2.5", "3", ".nan"],
    "rollout.prompts_per_step": ["0"],
    "rollout.rollouts_per_prompt": ["0"],
    "objective.student_temperature": ["0", "-0.5"],
    "objective.beta": ["-0.1", "1.5"],
    "objective.memory_budget_mb": ["0", "-1"],
    "objective.eps_low": ["-0.1", ".nan"],
    "eval.items": ["0", "-5"],
    "eval.temperature": ["0", ".nan"],
    "eval.coverage_samples": ["0"],
    "eval.coverage_items": ["-1"],
    "eval.samples_per_block": ["-1", "true", "2.5"],
    "task.max_new_tokens": ["0"],
    "task.eval_fraction": ["0", "1", "-0.2", ".nan"],
    "checkpoint_every": ["-1"],
}


@pytest.mark.parametrize(
    ("field", "value"), [(f, v) for f, values in NONSENSE.items() for v in values]
)
def test_nonsense_numeric_settings_are_refused_naming_the_field(field, value):
    message = _refused(f"{field}={value}")
    assert message.startswith(f"config: {field}"), message


def test_betas_outside_the_unit_interval_are_refused():
    for value in ("[0.9, 1.0]", "[-0.1, 0.999]", "[.nan, 0.9]"):
        assert _refused(f"optim.betas={value}").startswith("config: optim.betas"), value
