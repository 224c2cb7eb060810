"""Deprecated: renamed to :mod:`distillscope.eval.measures` (alias kept one release)."""

import sys
import warnings

import distillscope.eval.measures as _module

warnings.warn(
    "distillscope.eval.metrics is deprecated; import distillscope.eval.measures instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _module
