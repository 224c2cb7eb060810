"""Deprecated: renamed to :mod:`distillscope.study.run_one` (alias kept one release)."""

import sys
import warnings

import distillscope.study.run_one as _module

warnings.warn(
    "distillscope.study.run is deprecated; import distillscope.study.run_one instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _module
