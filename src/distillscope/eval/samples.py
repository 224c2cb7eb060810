"""Deprecated: renamed to :mod:`distillscope.eval.samples_file` (alias kept one release)."""

import sys
import warnings

import distillscope.eval.samples_file as _module

warnings.warn(
    "distillscope.eval.samples is deprecated; import distillscope.eval.samples_file instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _module
