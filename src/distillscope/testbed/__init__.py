"""The built-in testbed: tiny Llama teacher and student shipped inside the package.

``testbed:teacher`` / ``testbed:student`` in a config resolve to these directories
(:func:`distillscope.models.resolve_model_path`).
"""

from __future__ import annotations

import json
from pathlib import Path

from distillscope.models.paths import TESTBED_ROLES as ROLES
from distillscope.models.paths import TESTBED_WEIGHTS_DIR as WEIGHTS_DIR
from distillscope.models.paths import testbed_path

__all__ = ["ROLES", "WEIGHTS_DIR", "testbed_info", "testbed_path"]


def testbed_info(root: Path = WEIGHTS_DIR) -> dict:
    """The build record (sizes, recipe, build time, measured accuracies) of a testbed directory."""
    path = root / "testbed.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: build the testbed with `distillscope testbed build`"
        )
    return json.loads(path.read_text())
