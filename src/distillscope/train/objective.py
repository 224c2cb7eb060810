"""Deprecated: renamed to :mod:`distillscope.train.scoring` (alias kept one release)."""

import sys
import warnings

import distillscope.train.scoring as _module

warnings.warn(
    "distillscope.train.objective is deprecated; import distillscope.train.scoring instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _module
