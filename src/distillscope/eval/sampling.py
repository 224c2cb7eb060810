"""Deprecated: renamed to :mod:`distillscope.eval.generate` (alias kept one release)."""

import sys
import warnings

import distillscope.eval.generate as _module

warnings.warn(
    "distillscope.eval.sampling is deprecated; import distillscope.eval.generate instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _module
