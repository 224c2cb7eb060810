"""Where a config's model name points: the shipped testbed or a local directory."""

from __future__ import annotations

from pathlib import Path

from distillscope.testbed import testbed_path


def resolve_model_path(spec: str) -> Path:
    """``testbed:teacher`` → the shipped directory; anything else is a filesystem path."""
    if spec.startswith("testbed:"):
        return testbed_path(spec.split(":", 1)[1])
    return Path(spec).expanduser()
