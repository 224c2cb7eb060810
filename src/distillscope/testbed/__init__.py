"""The built-in testbed: tiny Llama teacher and student shipped inside the package.

``testbed:teacher`` / ``testbed:student`` in a config resolve to these directories
(:func:`distillscope.models.resolve_model_path`).
"""

from __future__ import annotations

import json
from pathlib import Path

WEIGHTS_DIR = Path(__file__).parent / "weights"
ROLES = ("teacher", "student")


def testbed_path(role: str) -> Path:
    """Directory of the shipped testbed ``teacher`` or ``student``."""
    if role not in ROLES:
        raise ValueError(f"testbed role must be one of {ROLES}, got {role!r}")
    return WEIGHTS_DIR / role


def testbed_info(root: Path = WEIGHTS_DIR) -> dict:
    """The build record (sizes, recipe, build time, measured accuracies) of a testbed directory."""
    path = root / "testbed.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: build the testbed with `distillscope testbed build`"
        )
    return json.loads(path.read_text())
