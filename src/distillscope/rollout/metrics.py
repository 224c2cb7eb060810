"""Deprecated: renamed to :mod:`distillscope.rollout.diagnostics` (alias kept one release)."""

import sys
import warnings

import distillscope.rollout.diagnostics as _module

warnings.warn(
    "distillscope.rollout.metrics is deprecated; import distillscope.rollout.diagnostics instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _module
