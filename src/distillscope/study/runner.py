"""Deprecated: renamed to :mod:`distillscope.study.run_study` (alias kept one release)."""

import sys
import warnings

import distillscope.study.run_study as _module

warnings.warn(
    "distillscope.study.runner is deprecated; import distillscope.study.run_study instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _module
