"""Package exports that load on first use (distillscope.lazy)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from distillscope.lazy import lazy_exports


def test_a_name_that_is_also_a_submodule_is_refused():
    # importing train/loop.py sets distillscope.train.loop to the module: an export of that
    # name would then silently be the module instead of the function
    with pytest.raises(ValueError, match=r"\['loop'\] are also submodule names"):
        lazy_exports("distillscope.train", {"loop": ("loop",)})


def test_exports_load_their_module_on_first_use_and_equal_the_originals():
    script = """
import sys
import distillscope.train as train
assert "distillscope.train.loop" not in sys.modules and "torch" not in sys.modules
assert "distill" in dir(train) and "preflight_all" in train.__all__
from distillscope.train import distill
from distillscope.train.loop import distill as original
assert distill is original and "distillscope.train.loop" in sys.modules
try:
    train.no_such_name
except AttributeError as err:
    assert "no_such_name" in str(err)
else:
    raise SystemExit("no AttributeError")
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
