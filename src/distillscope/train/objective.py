"""Deprecated: renamed to :mod:`distillscope.train.step` (alias kept one release); the score
objects it used to hold are in :mod:`distillscope.train.scoring`."""

import sys
import warnings

import distillscope.train.step as _module

warnings.warn(
    "distillscope.train.objective is deprecated; import distillscope.train.step (the objective "
    "per micro-batch) or distillscope.train.scoring (score objects) instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _module
