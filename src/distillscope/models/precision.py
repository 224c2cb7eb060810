"""Numeric precision of training: fp32 master weights with bf16 autocast (docs/method.md §6).

The student's weights, gradients and AdamW state stay in ``model.dtype`` (fp32 by default), so
small updates are not rounded away; the forwards run under ``torch.autocast`` in bf16 on CUDA
(``model.autocast: auto``), and every softmax of the objectives is fp32 whatever the matmul
dtype. A bf16/fp16 student is trained only with ``model.low_precision_weights: true`` (the
config records it, the report labels it). On CPU nothing is autocast unless asked.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

import torch


class PrecisionSettings(Protocol):
    """What precision reads of ``model.*`` (:class:`distillscope.config.ModelConfig` is one)."""

    @property
    def autocast(self) -> str: ...

    @property
    def device(self) -> str: ...


def autocast_dtype(cfg: PrecisionSettings) -> torch.dtype | None:
    """bf16 when the forwards are autocast (``model.autocast``; auto = on CUDA), else None."""
    if cfg.autocast == "off":
        return None
    if cfg.autocast == "bfloat16" or torch.device(cfg.device).type == "cuda":
        return torch.bfloat16
    return None


def forward_precision(cfg: PrecisionSettings) -> contextlib.AbstractContextManager:
    """The context the training forwards run in: ``torch.autocast`` or nothing."""
    dtype = autocast_dtype(cfg)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(cfg.device).type, dtype=dtype)
