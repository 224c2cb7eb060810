"""fp32 master weights with bf16 autocast: the decisions, checked on CPU (no GPU needed)."""

from __future__ import annotations

import pytest
import torch

from distillscope.config import ConfigError, ModelConfig, run_config_from_dict
from distillscope.models.precision import autocast_dtype, forward_precision

from .conftest import random_rollouts, step_cfg, tiny_llama, train_step


@pytest.mark.parametrize(
    "device,autocast,want",
    [
        ("cuda", "auto", torch.bfloat16),
        ("cuda:1", "auto", torch.bfloat16),
        ("cpu", "auto", None),
        ("cuda", "off", None),
        ("cpu", "bfloat16", torch.bfloat16),
    ],
)
def test_autocast_is_bf16_on_cuda_by_default_and_off_on_cpu(device, autocast, want):
    assert autocast_dtype(ModelConfig(device=device, autocast=autocast)) is want


def test_a_low_precision_student_must_be_asked_for_by_name():
    with pytest.raises(ConfigError, match="model.dtype=bfloat16 trains the student without fp32"):
        run_config_from_dict({"model": {"dtype": "bfloat16"}})
    cfg = run_config_from_dict({"model": {"dtype": "bfloat16", "low_precision_weights": True}})
    assert cfg.model.low_precision_weights
    assert run_config_from_dict({"model": {"teacher_dtype": "bfloat16"}}).model.dtype == "float32"


@pytest.mark.parametrize("path", ["plain", "fused"])
def test_autocast_step_keeps_fp32_weights_and_gradients(path):
    student, teacher = tiny_llama(40, 16, seed=1, dtype=torch.float32), tiny_llama(40, 16, seed=2)
    teacher = teacher.float()
    cfg = step_cfg(**{"model.autocast": "bfloat16", "objective.path": path})
    with forward_precision(cfg.model):  # the forwards really run in bf16
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16 and torch.is_autocast_enabled(
            "cpu"
        )
    row = train_step(cfg, random_rollouts(4, 40, seed=0), student, teacher, 40)
    assert torch.isfinite(torch.tensor(row["train/loss"]))  # neither NaN nor ±inf
    for p in student.parameters():
        assert p.dtype == torch.float32 and p.grad is not None and p.grad.dtype == torch.float32
