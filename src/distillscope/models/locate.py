"""Where a config's model name points (the shipped testbed or a local directory), and whether
that directory holds what loading needs — checked without torch, before any model loads.

Importing it (as importing :mod:`distillscope.models` does) sets ``HF_HUB_OFFLINE`` and
``TRANSFORMERS_OFFLINE`` unless the environment says otherwise: nothing is ever downloaded."""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers imports huggingface_hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: The shipped testbed's model directories (``testbed/weights/<role>``: package data, found by
#: path so that loading a model never imports the testbed builder).
TESTBED_WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "testbed" / "weights"
TESTBED_ROLES = ("teacher", "student", "teacher-small")


def testbed_path(role: str) -> Path:
    """Directory of a shipped testbed model (``teacher``, ``student``, ``teacher-small``)."""
    if role not in TESTBED_ROLES:
        shipped = ", ".join(f"testbed:{r}" for r in TESTBED_ROLES)
        raise ValueError(f"testbed:{role} is not a shipped testbed model; shipped: {shipped}")
    return TESTBED_WEIGHTS_DIR / role


def testbed_info(root: Path = TESTBED_WEIGHTS_DIR) -> dict:
    """The build record (sizes, recipe, build time, measured accuracies) of a testbed directory."""
    path = root / "testbed.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: build the testbed with `distillscope testbed build`"
        )
    return json.loads(path.read_text())


def resolve_model_path(spec: str) -> Path:
    """``testbed:teacher`` → the shipped directory; anything else is a filesystem path."""
    if spec.startswith("testbed:"):
        return testbed_path(spec.split(":", 1)[1])
    return Path(spec).expanduser()


SAFE_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json")
# Files that carry a vocabulary (tokenizer_config.json alone does not).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")


class ModelLoadError(ValueError):
    """A model directory cannot be loaded; the message names the path and what to do."""


def check_model_dir(path: str | os.PathLike, allow_pickle: bool = False) -> Path:
    """Raise :class:`ModelLoadError` unless ``path`` looks like a loadable model directory."""
    root = Path(path)
    if not root.is_dir():
        what = "is not a directory" if root.exists() else "does not exist"
        raise ModelLoadError(f"model directory {root} {what}")
    if not (root / "config.json").is_file():
        raise ModelLoadError(f"model directory {root} has no config.json")
    has_safe = any((root / name).is_file() for name in SAFE_WEIGHTS)
    has_pickled = any((root / name).is_file() for name in PICKLED_WEIGHTS)
    if has_pickled and not has_safe and not allow_pickle:
        raise ModelLoadError(
            f"model directory {root} holds only pickled weights (pytorch_model.bin); "
            "convert to safetensors or pass allow_pickle=True"
        )
    if not has_safe and not has_pickled:
        raise ModelLoadError(
            f"model directory {root} has no weights (expected model.safetensors or "
            "model.safetensors.index.json)"
        )
    if not any((root / name).is_file() for name in TOKENIZER_FILES):
        expected = ", ".join(TOKENIZER_FILES[:-1]) + " or " + TOKENIZER_FILES[-1]
        raise ModelLoadError(f"model directory {root} has no tokenizer (expected {expected})")
    return root
