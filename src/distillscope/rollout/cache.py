"""A disk cache of teacher rollouts, and of the teacher's scores of them, shared by off-policy runs
(docs/method.md §3 "Off-policy data reuse").

Teacher rollouts do not depend on the student, so every OffPD run that shares the teacher, the
task, the seed, the step and the sampling settings can read one stored batch instead of
generating it again — the cost argument of [P]. Nor does the teacher's forward pass over them:
its completion outputs (logits when V ≤ :data:`TEACHER_LOGITS_MAX_VOCAB`; final hidden states
on the fused path and a top-k teacher's reduction at any V) are stored bit for bit next to the
rollouts, so a later run
skips the teacher forward and computes the identical loss. Each entry also records how long
making it took, which a run reading it reports as ``time/teacher_saved``.

    cache = RolloutCache(Path("~/.cache/distillscope/rollouts").expanduser())
    key = {"teacher": "testbed-teacher@sha", "task": "countdown3", "seed": 42, "step": 7,
           "policy": "teacher", "temperature": 0.5, "top_p": 1.0, "max_new_tokens": 40,
           "prompts": prompt_digest(ids_B_P, mask_B_P)}
    rollouts, saved_s = cache.fetch(key, lambda: sample_rollouts(...))
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from distillscope.rollout.rollouts import Rollouts

TEACHER_LOGITS_MAX_VOCAB = 4096
"""Largest vocabulary at which a run on the logits path caches the teacher's completion logits
in full (fp32, B·T·V floats: at this V, 16 rows × 24 tokens take 6.3 MB a step); above it that
path caches no teacher scores (hidden states on the fused path and a top-k teacher's reduction
are cached at any V). A storage limit of the cache alone: which path a run takes is decided by
:data:`distillscope.objectives.registry.FUSED_MIN_VOCAB`, an independent threshold that happens
to have the same value."""


class RolloutCache:
    """Rollouts stored under ``root`` as ``<sha256 of the canonical key JSON>.safetensors``.

    Writes are atomic (temporary file in ``root``, then ``os.replace``), so concurrent runs
    that race on one key each leave a complete file and a crash never leaves a partial one.
    Next to each entry, ``<hash>.key.json`` holds the key in readable form and
    ``<hash>.meta.json`` the seconds ``make`` took (``{"make_s": …}``).

    ``frozen``: a cache built once and only read (``distillscope teacher-cache build``): a key
    it does not hold is a :class:`CacheMissError`, never made and written.
    """

    def __init__(self, root: Path | str, frozen: bool = False):
        self.root, self.frozen = Path(root), frozen

    def path_for(self, key: dict[str, Any]) -> Path:
        """Where the rollouts of ``key`` are (or would be) stored."""
        return self.root / f"{key_digest(key)}.safetensors"

    def fetch(self, key: dict[str, Any], make: Callable[[], Rollouts]) -> tuple[Rollouts, float]:
        """``(rollouts, seconds saved)``: the stored rollouts of ``key`` and the seconds making
        them took, or ``make()``'s, stored first, and 0.0 (``make`` runs at most once)."""
        return self._fetch(key, make, Rollouts.save, Rollouts.load)

    def fetch_tensors(
        self, key: dict[str, Any], make: Callable[[], dict[str, torch.Tensor]]
    ) -> tuple[dict[str, torch.Tensor], float]:
        """Like :meth:`fetch` for a dict of tensors (teacher scores), stored bit for bit."""
        return self._fetch(
            key,
            make,
            lambda tensors, path: save_file(
                {k: v.detach().cpu().contiguous() for k, v in tensors.items()}, path
            ),
            load_file,
        )

    def _fetch(self, key, make, save, load):
        """The shared get-or-make: atomic writes of the value, its readable key and its cost."""
        path = self.path_for(key)
        if path.exists():
            meta = path.with_suffix(".meta.json")
            saved = json.loads(meta.read_text())["make_s"] if meta.exists() else 0.0
            return load(path), saved
        if self.frozen:
            where = ", ".join(f"{k} {key[k]}" for k in ("seed", "step") if k in key)
            raise CacheMissError(
                f"{self.root} holds no entry for {where or 'this key'} of this run (built for "
                "other prompts: another task file, prompt format or tokenizer?)"
            )
        t0 = time.perf_counter()
        value = make()
        make_s = time.perf_counter() - t0
        self.root.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, lambda tmp: save(value, tmp))
        for suffix, text in (
            (".key.json", canonical_json(key)),
            (".meta.json", json.dumps({"make_s": make_s})),
        ):
            _atomic_write(
                path.with_suffix(suffix),
                lambda tmp, text=text: Path(tmp).write_text(text + "\n", encoding="utf-8"),
            )
        return value, 0.0


class CacheMissError(ValueError):
    """A frozen cache lacks a key the run asks for (one line naming the seed and step)."""


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
