"""Training: the distillation loop and its checkpoints (train then evaluate: ``study.run_one``).

The package re-exports its torch-free names only: ``preflight`` and ``preflight_all`` check a
run's inputs without importing torch. The loop is imported from its module,
``from distillscope.train.loop import distill``.
"""

from distillscope.train.run_checks import preflight, preflight_all

__all__ = ["preflight", "preflight_all"]
