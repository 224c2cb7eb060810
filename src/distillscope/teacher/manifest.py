"""A teacher cache's manifest: what it was built for, and the check a reading run passes first.

``distillscope teacher-cache build`` (:mod:`distillscope.train.cache_build`) writes
``DIR/manifest.json`` beside
the rollout cache's entries (:class:`~distillscope.rollout.RolloutCache`): the format, the
teacher's fingerprint, the identity of the run settings the entries depend on
(:func:`cache_identity`: task and split, sampling settings, k, the micro-batching), the seeds and
steps covered, and every shard's bytes and sha256. A run with ``model.teacher_cache: DIR`` is
checked before anything is written (:func:`check_teacher_cache`): each mismatch, a missing or
corrupt shard, is one line naming the field or the file. Torch-free, as the preflight is.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

from distillscope.config import RunConfig
from distillscope.models.locate import resolve_model_path

MANIFEST = "manifest.json"
FORMAT = "distillscope-teacher-cache/1"
#: A teacher file at most this large is hashed whole; a larger one by its size, its first and
#: its last :data:`_EDGE` bytes (a model's weights differ there: embeddings, final norm, head).
_WHOLE = 16 << 20
_EDGE = 4 << 20


#: Identity entries that name a file or directory: recorded as the build typed them (the
#: entries' keys hold that text, :func:`keyed_as_built`), shown in errors, never compared — the
#: content fingerprints beside them are (``teacher_fingerprint``, ``task.file_sha256``), so
#: ``models/teacher``, ``./models/teacher``, its absolute path or a copy elsewhere are one.
PATH_ENTRIES = ("model.teacher", "task.file")


class TeacherCacheError(ValueError):
    """A teacher cache that does not fit the run, or is damaged: one line naming what."""


def teacher_fingerprint(spec: str) -> str:
    """sha256 over a teacher directory's file names and sizes, the bytes of every file up to
    16 MiB and the first and last 4 MiB of larger ones (weights): another checkpoint differs
    there, and a 15 GB teacher is fingerprinted in milliseconds."""
    files = sorted(p for p in resolve_model_path(spec).iterdir() if p.is_file())
    return _fingerprint(tuple(files), tuple(_stat(p) for p in files))


@cache
def _fingerprint(files: tuple[Path, ...], stats: tuple) -> str:
    """:func:`teacher_fingerprint` of ``files``, once per process while their ``stats`` (sizes,
    times) hold: a study checks every run against one teacher."""
    h = hashlib.sha256()
    for path in files:
        size = path.stat().st_size
        h.update(f"{path.name}\0{size}\0".encode())
        with path.open("rb") as fh:
            if size <= _WHOLE:
                h.update(fh.read())
            else:
                h.update(fh.read(_EDGE))
                fh.seek(size - _EDGE)
                h.update(fh.read(_EDGE))
    return h.hexdigest()


def cache_identity(cfg: RunConfig) -> dict[str, Any]:
    """What a cache's entries depend on besides the seed and the step, by config field: the
    teacher (its resolved directory, shown, and its fingerprint, compared; :data:`PATH_ENTRIES`),
    the task and its split (every ``task`` field, the task file's resolved path and sha256), the
    sampling settings, the top k and its loss temperature, and the micro-batching and device
    the scores were computed under (the rollout cache's key, teacher/scorer.py)."""
    m, r, o = cfg.model, cfg.rollout, cfg.objective
    task = {f"task.{k}": v for k, v in cfg.task.model_dump(mode="json").items()}
    file = cfg.task.file
    return {
        "model.teacher": str(m.teacher),
        "teacher_fingerprint": teacher_fingerprint(m.teacher),
        "model.teacher_dtype": m.teacher_dtype,
        "model.device": str(m.device),
        **task,
        "task.file_sha256": _file_sha256(Path(file)) if file else None,
        "rollout.policy": r.policy,
        "rollout.engine": r.engine,
        "rollout.teacher_temperature": r.teacher_temperature,
        "rollout.top_p": r.top_p,
        "rollout.prompts_per_step": r.prompts_per_step,
        "rollout.rollouts_per_prompt": r.rollouts_per_prompt,
        "objective.teacher_topk": o.teacher_topk,
        "objective.teacher_temperature": o.teacher_temperature,
        "optim.grad_accum": cfg.optim.grad_accum,
    }


#: Each content fingerprint entry: the path entry it fingerprints, and what of it it hashes.
_CONTENT_OF = {
    "teacher_fingerprint": ("model.teacher", "files"),
    "task.file_sha256": ("task.file", "bytes"),
}


def teacher_dir(spec: str) -> str:
    """A teacher's directory as a manifest records it (``teacher_dir``): absolute (a shipped
    ``testbed:`` model by its name), so that a routed run naming the cache finds the teacher
    from any directory."""
    return spec if spec.startswith("testbed:") else str(Path(spec).resolve())


def keyed_as_built(cfg: RunConfig) -> RunConfig:
    """``cfg`` with ``model.teacher`` and ``task.file`` as the build of its
    ``model.teacher_cache`` typed them: the entries' keys hold that text, and the content behind
    both was checked to be the same (:func:`check_teacher_cache`). ``cfg`` itself without a
    cache. For keys only: the copy is not validated again."""
    if cfg.model.teacher_cache is None:
        return cfg
    identity = read_manifest(Path(cfg.model.teacher_cache))["identity"]
    file = identity.get("task.file")
    model = cfg.model.model_copy(update={"teacher": identity["model.teacher"]})
    task = cfg.task.model_copy(update={"file": None if file is None else Path(file)})
    return cfg.model_copy(update={"model": model, "task": task})


def shard_table(root: Path) -> dict[str, dict[str, Any]]:
    """Every file of a built cache but the manifest: name → ``{"bytes", "sha256"}``."""
    return {
        p.name: {"bytes": p.stat().st_size, "sha256": _file_sha256(p)}
        for p in sorted(root.iterdir())
        if p.is_file() and p.name != MANIFEST
    }


def check_teacher_cache(cfg: RunConfig) -> dict[str, Any]:
    """The manifest of ``cfg.model.teacher_cache``, or TeacherCacheError: not off-policy with a
    top k, no manifest, a field that differs from the build, a seed or step it does not cover,
    a shard missing, truncated or corrupt. Shards are hashed once per process."""
    root = Path(cfg.model.teacher_cache)
    where = f"model.teacher_cache {root}"
    if cfg.rollout.policy != "teacher" or not cfg.objective.teacher_topk:
        raise TeacherCacheError(
            f"{where}: a cached teacher serves off-policy runs of a top-k teacher "
            "(rollout.policy=teacher, objective.teacher_topk ≥ 1)"
        )
    manifest = read_manifest(root)
    built, ours = manifest["identity"], cache_identity(cfg)
    for name in sorted((set(built) | set(ours)) - set(PATH_ENTRIES)):
        if built.get(name) != ours.get(name):
            differs = ""
            if name in _CONTENT_OF:  # a fingerprint differs: name the files by their paths
                name, what = _CONTENT_OF[name]
                differs = f" (its {what} differ)"
            shown = (_shown(built.get(name)), _shown(ours.get(name)) + differs)
            raise TeacherCacheError(
                f"{where}: built for {name}={shown[0]}, this run has {shown[1]}; build a cache "
                "for this run's settings"
            )
    if cfg.seed not in manifest["seeds"]:
        raise TeacherCacheError(f"{where}: covers seeds {manifest['seeds']}, not seed {cfg.seed}")
    if cfg.optim.steps > manifest["steps"]:
        raise TeacherCacheError(
            f"{where}: covers steps 0…{manifest['steps'] - 1}, this run has "
            f"optim.steps={cfg.optim.steps}"
        )
    shards = manifest["shards"]
    stats = tuple(_stat(root / name) for name in sorted(shards))
    _verified(root, json.dumps(shards, sort_keys=True), stats)
    return manifest


def read_manifest(root: Path) -> dict[str, Any]:
    """``root/manifest.json`` of the current format, or TeacherCacheError in one line."""
    path = root / MANIFEST
    if not path.is_file():
        what = "does not exist" if not root.exists() else "has no manifest.json"
        raise TeacherCacheError(
            f"model.teacher_cache {root} {what} (distillscope teacher-cache build writes one)"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise TeacherCacheError(f"{path} is not JSON; the cache is corrupt") from None
    keys = ("format", "identity", "seeds", "steps", "shards")
    if not isinstance(manifest, dict) or any(k not in manifest for k in keys):
        raise TeacherCacheError(f"{path} lacks one of {', '.join(keys)}; the cache is corrupt")
    if manifest["format"] != FORMAT:
        raise TeacherCacheError(
            f"{path}: format {manifest['format']!r}, this version reads {FORMAT}"
        )
    return manifest


def _stat(path: Path) -> tuple[int, int] | None:
    """A shard's size and modification time (None when missing): a changed file is hashed
    again."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


@cache
def _verified(root: Path, shards_json: str, stats: tuple) -> None:
    """TeacherCacheError unless every listed shard is there with its bytes and sha256
    (memoised on ``stats``, the shards' sizes and times)."""
    for name, want in json.loads(shards_json).items():
        path = root / name
        if not path.is_file():
            raise TeacherCacheError(f"teacher cache shard {path} is missing; rebuild the cache")
        if path.stat().st_size != want["bytes"] or _file_sha256(path) != want["sha256"]:
            raise TeacherCacheError(
                f"teacher cache shard {path} is corrupt (its sha256 differs from the manifest's); "
                "rebuild the cache"
            )


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"
