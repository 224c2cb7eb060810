"""Training: the distillation loop and its checkpoints (train then evaluate: ``study.run``).

Names load from their submodules on first use (:mod:`distillscope.lazy`): ``preflight`` and
``preflight_all`` check a run's inputs without importing torch.
"""

from distillscope.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {"loop": ("DivergedError", "distill", "lr_at"), "checks": ("preflight", "preflight_all")},
)
