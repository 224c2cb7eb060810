"""Deprecated: renamed to :mod:`distillscope.report.load` (alias kept one release)."""

import sys
import warnings

import distillscope.report.load as _module

warnings.warn(
    "distillscope.report.study is deprecated; import distillscope.report.load instead",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _module
