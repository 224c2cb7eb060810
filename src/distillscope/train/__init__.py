"""Training: the distillation loop and its checkpoints (train then evaluate: ``study.run``)."""

from distillscope.train.distill import DivergedError, distill, lr_at
from distillscope.train.setup import preflight, preflight_all

__all__ = ["DivergedError", "distill", "lr_at", "preflight", "preflight_all"]
