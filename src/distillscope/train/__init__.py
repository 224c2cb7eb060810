"""Training: the distillation loop and its checkpoints (train then evaluate: ``study.run``)."""

from distillscope.train.distill import DivergedError, distill, lr_at

__all__ = ["DivergedError", "distill", "lr_at"]
