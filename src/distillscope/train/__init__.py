"""Training: the distillation loop and its checkpoints (train then evaluate: ``study.run_one``).

The names below load from their submodules on first use (:mod:`distillscope.lazy`):
``preflight`` and ``preflight_all`` check a run's inputs without importing torch.
"""

from typing import TYPE_CHECKING

from distillscope.lazy import lazy_exports

if TYPE_CHECKING:
    # The public names, one list: editors read these imports, lazy_exports parses them.
    from distillscope.train.checks import preflight, preflight_all  # noqa: F401
    from distillscope.train.loop import DivergedError, distill, lr_at  # noqa: F401

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
