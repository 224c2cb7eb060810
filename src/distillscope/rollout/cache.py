"""A disk cache of teacher rollouts shared by off-policy runs (docs/method.md §3 "Off-policy data
reuse").

Teacher rollouts do not depend on the student, so every OffPD run that shares the teacher, the
task, the seed, the step and the sampling settings can read one stored batch instead of
generating it again — the cost argument of [P].

    cache = RolloutCache(Path("~/.cache/distillscope/rollouts").expanduser())
    key = {"teacher": "testbed-teacher@sha", "task": "countdown3", "seed": 42, "step": 7,
           "policy": "teacher", "temperature": 0.5, "top_p": 1.0, "max_new_tokens": 40,
           "prompts": prompt_digest(ids_B_P, mask_B_P)}
    rollouts = cache.get_or_create(key, lambda: sample_rollouts(...))
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from distillscope.rollout.rollouts import Rollouts


class RolloutCache:
    """Rollouts stored under ``root`` as ``<sha256 of the canonical key JSON>.safetensors``.

    Writes are atomic (temporary file in ``root``, then ``os.replace``), so concurrent runs
    that race on one key each leave a complete file and a crash never leaves a partial one.
    Next to each entry, ``<hash>.key.json`` holds the key in readable form.
    """

    def __init__(self, root: Path | str):
        self.root = Path(root)

    def path_for(self, key: dict[str, Any]) -> Path:
        """Where the rollouts of ``key`` are (or would be) stored."""
        return self.root / f"{key_digest(key)}.safetensors"

    def get_or_create(self, key: dict[str, Any], make: Callable[[], Rollouts]) -> Rollouts:
        """The stored rollouts of ``key``, or ``make()``'s, stored first (``make`` runs once)."""
        path = self.path_for(key)
        if path.exists():
            return Rollouts.load(path)
        rollouts = make()
        self.root.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, rollouts.save)
        _atomic_write(
            path.with_suffix(".key.json"),
            lambda tmp: Path(tmp).write_text(canonical_json(key) + "\n", encoding="utf-8"),
        )
        return rollouts


def canonical_json(key: dict[str, Any]) -> str:
    """Sorted keys, no whitespace, ASCII only, no NaN: one string per key value."""
    try:
        return json.dumps(
            key, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
        )
    except (TypeError, ValueError) as err:
        raise ValueError(f"rollout cache key must be plain JSON (no NaN): {err}") from err


def key_digest(key: dict[str, Any]) -> str:
    """sha256 hex digest of :func:`canonical_json` of ``key``."""
    return hashlib.sha256(canonical_json(key).encode("ascii")).hexdigest()


def prompt_digest(*tensors: torch.Tensor) -> str:
    """sha256 of tensors' dtypes, shapes and values: the prompt batch's part of a cache key."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _atomic_write(path: Path, write: Callable[[str], None]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
