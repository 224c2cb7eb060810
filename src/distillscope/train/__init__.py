"""Training: the distillation loop and the run directory it writes."""

from distillscope.train.distill import DivergedError, distill, lr_at
from distillscope.train.run import run_one

__all__ = ["DivergedError", "distill", "lr_at", "run_one"]
