"""Every older layout of a run directory, and how this version reads it: the one home of history.

A run directory records the schema version it was written with (``schema_version`` in its
``fingerprint.json``); one written before the version was recorded reads as version 1.

- **1** — distillscope 0.1.0 up to commit ee21ac4 (2026-12-02): no recorded version. While it
  was current, the config gained the fields of :data:`ADDED_FIELDS`, each at a default that
  reproduces how runs behaved before it; a directory of version 1 may have been written with or
  without any of them.
- **2** — commit 3a1d9e1 (2026-12-02) up to this one: ``fingerprint.json`` records
  ``schema_version`` and every config field the code that wrote it knew. The config gained the
  fields of version 3 while 2 was current (f891133, ae62e2c, 0fdaf9e), so a directory of version
  2 may record any of them or none: the fields its ``fingerprint.json`` records tell which.
- **3** — commit 0fe0b38 (2026-12-06) up to this one: every field of :data:`ADDED_FIELDS` is
  recorded. A local path (:data:`PATH_FIELDS`) was kept as typed: a relative one was read from
  the command's directory.
- **4** — a local path is resolved once, when its file or command line is read (a path in a file
  from the file's directory, one on the command line from the current directory), and stored
  absolute in ``config.yaml``, ``fingerprint.json`` and the study's ``study.yaml``.

The rules, each entry annotated with the schema version from which directories always hold it
(``Added.version``; an older directory needs the entry):

- a run's fingerprint (:func:`skipped_fields`): a field a directory's version may lack, and its
  ``fingerprint.json`` does not record, is left out at its default, so the directory still
  matches the config that wrote it;
- run ids (:func:`added_at_default`, read by ``study.spec.run_id``): a name never changes, so an id
  leaves out every added field at its default, whatever the version;
- keys of the shared rollout cache and of a run's evaluation (:func:`without_added`): an entry
  added later is left out at its default, so the entries an older study wrote are still found;
- a path a directory of version 3 or older holds relative, as typed, compares equal to its
  resolved form (:func:`same_path`): in a run's fingerprint (:func:`as_recorded_paths`) and in
  a study's ``study.yaml`` and run ids (``study.legacy``). An older study's rollout-cache and
  evaluation keys hold such paths as typed and are not found: a resumed run computes the
  teacher's rollouts again (the same rollouts; nothing finished is run again);
- a directory of any version moved with its files: an absolute path it holds that names nothing
  any more compares equal to the moved one when the two end in the path below the directory its
  command ran in (:func:`moved_path`); its study's ids are kept by the paths as typed
  (``study.legacy``).

Adding a config field: give it a default that reproduces earlier runs, raise
:data:`SCHEMA_VERSION` by one with a line above, and add its entry here with the new version.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the version this code writes
SCHEMA_VERSION = 4

#: The first version whose directories hold every local path resolved (absolute).
RESOLVED_PATHS_VERSION = 4

#: Dotted run-config fields whose value may be a local path (a model or cache directory, a task
#: file, a directory of lm-eval tasks); ``*``: every value of the mapping. Kept here because
#: version 4 resolves them (config.paths reads them from here).
PATH_FIELDS = (
    "model.teacher",
    "model.student",
    "model.teacher_cache",
    "model.teachers.*",
    "task.file",
    "task.dataset.path",
    "eval.forgetting.include_path",
)


@dataclass(frozen=True)
class Added:
    """A field added after directories existed: its default (how runs behaved before it) and the
    first schema version whose directories always hold it (older ones need this entry)."""

    default: Any
    version: int


#: Config fields (dotted; a bare name is a whole section, null by default) added after run
#: directories existed, with the commit that added each.
ADDED_FIELDS: dict[str, Added] = {
    "objective.teacher_topk": Added(0, 2),  # f91e290, top-k teachers
    "objective.updates_per_batch": Added(1, 2),  # d893da7, OPD's updates per rollout batch
    "objective.tempered_teacher": Added(False, 2),  # d893da7
    "rollout.spectrum_temperatures": Added("paper", 2),  # 011f766
    "eval.profile_steps": Added([], 2),  # df91cdf, per-position profiles
    "eval.profile_prompts": Added(16, 2),  # df91cdf
    "eval.profile_bins": Added(8, 2),  # df91cdf
    "rlvr": Added(None, 2),  # 5671838, RLVR runs only
    "task.teacher_instruction": Added(None, 2),  # d63e44a, chat-format style runs
    "eval.style_language": Added(None, 2),  # d63e44a, the language their style share counts
    "eval.forgetting": Added(None, 2),  # 28d287c, lm-eval forgetting runs only
    "task.dataset": Added(None, 2),  # 07eda58, dataset tasks: their rows' source
    "task.fields": Added(None, 2),  # 07eda58, and column mapping
    "model.lora": Added(None, 2),  # 3ec8bda, LoRA students (full fine-tuning before)
    "log": Added(None, 2),  # 3ec8bda, experiment trackers beside metrics.jsonl
    "model.teacher_server": Added(None, 2),  # e837c32, a served teacher's connection
    "rollout.engine": Added("builtin", 2),  # 1a07c4e, vLLM rollouts
    "rollout.engine_is_correction": Added(False, 2),  # 1a07c4e, their importance correction
    "rollout.engine_is_cap": Added(2.0, 2),  # 1a07c4e
    "rollout.engine_gpu_memory": Added(0.3, 2),  # 28f7a9a, a colocated engine's GPU share
    # f891133, several samples per evaluation item ([P]: one)
    "eval.samples_per_item": Added(1, 3),
    "eval.harder_samples_per_item": Added(1, 3),
    "eval.skill_samples_per_item": Added(1, 3),
    "model.teacher_cache": Added(None, 3),  # ae62e2c, a teacher cache built once, read as teacher
    "model.teachers": Added(None, 3),  # 0fdaf9e, several teachers routed per prompt (one before)
    "model.route": Added(None, 3),  # 0fdaf9e, their routing
}

#: Entries of a teacher-rollout cache key added after caches existed (teacher/scorer.py).
TEACHER_KEY_ADDED: dict[str, Added] = {
    "instruction": Added(None, 2),  # 8232175, the teacher-only instruction
    "engine": Added("builtin", 2),  # 593dbfb, an engine other than the builtin sampler
}

#: Entries of a run's evaluation key added after keys existed (config.load.evaluation_key).
EVALUATION_KEY_ADDED: dict[str, Added] = {
    "task.dataset": ADDED_FIELDS["task.dataset"],
    "task.fields": ADDED_FIELDS["task.fields"],
    "eval.style_language": ADDED_FIELDS["eval.style_language"],
    "eval.forgetting": ADDED_FIELDS["eval.forgetting"],
    "eval.samples_per_item": ADDED_FIELDS["eval.samples_per_item"],
    "eval.harder_samples_per_item": ADDED_FIELDS["eval.harder_samples_per_item"],
    "eval.skill_samples_per_item": ADDED_FIELDS["eval.skill_samples_per_item"],
    "model.route": ADDED_FIELDS["model.route"],  # eval/teacher/<name>/accuracy reads it
}


class SchemaVersionError(ValueError):
    """A run directory written by a newer distillscope than this one."""


def schema_version(recorded: dict[str, Any], where: object) -> int:
    """The schema version of a ``fingerprint.json`` (``recorded``; 1 when it names none);
    :class:`SchemaVersionError` naming ``where`` when this version cannot read it."""
    version = recorded.get("schema_version", 1)
    if type(version) is not int or not 1 <= version <= SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} was written with schema version {version!r}; this distillscope reads "
            f"versions 1 to {SCHEMA_VERSION}: upgrade it, or choose another directory"
        )
    return version


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"optim": {"lr": 1e-4}}`` → ``{"optim.lr": 1e-4}``."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _at_default(flat: dict[str, Any], added: dict[str, Added], before: int | None) -> set[str]:
    """The keys of ``added`` that ``flat`` holds at their default, of those a directory of
    version ``before`` may lack (all of them when ``before`` is None)."""
    return {
        k
        for k, a in added.items()
        if (before is None or before < a.version) and k in flat and flat[k] == a.default
    }


def skipped_fields(
    config: dict[str, Any], version: int, recorded: Collection[str] | None = None
) -> set[str]:
    """The fields of ``config`` (a resolved config, nested) a fingerprint of a directory of
    ``version`` leaves out: those :data:`ADDED_FIELDS` it may lack, at their default, unless
    ``recorded`` (the fields its ``fingerprint.json`` records, when known) holds them — code of
    that version written after the field was added recorded it."""
    skipped = _at_default(flatten(config), ADDED_FIELDS, version)
    return skipped if recorded is None else skipped - set(recorded)


def added_at_default(config: dict[str, Any]) -> set[str]:
    """Every :data:`ADDED_FIELDS` entry ``config`` holds at its default (run ids leave them out,
    so an id never changes)."""
    return _at_default(flatten(config), ADDED_FIELDS, None)


def without_added(key: dict[str, Any], added: dict[str, Added]) -> dict[str, Any]:
    """``key`` (nested one level at most, dotted names in ``added``) without the entries of
    ``added`` at their default: a key written before they existed is still found."""
    drop = _at_default(flatten(key), added, None)
    out = {}
    for name, value in key.items():
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if f"{name}.{k}" not in drop}
        if name not in drop:
            out[name] = value
    return out


def path_fields_below(parts: list[str] | tuple[str, ...]) -> list[list[str]]:
    """What is left of each :data:`PATH_FIELDS` field below the dotted config location
    ``parts`` (``[]``: ``parts`` is the field; ``*`` matches any key)."""
    out = []
    for field in PATH_FIELDS:
        pattern = field.split(".")
        head = pattern[: len(parts)]
        if len(head) == len(parts) and all(p in ("*", k) for p, k in zip(head, parts, strict=True)):
            out.append(pattern[len(parts) :])
    return out


def is_path_field(dotted: str) -> bool:
    """Whether the flat config key ``dotted`` (``model.teachers.a``) is a :data:`PATH_FIELDS`
    field."""
    return [] in path_fields_below(dotted.split("."))


def same_path(stored: Any, resolved: Any, cwd: Path | None = None) -> bool:
    """Whether ``stored`` — a path as a directory of version 3 or older holds it, possibly
    relative as typed — names ``resolved`` (its version-4 form, absolute).

    A relative path was read from the directory its command ran in, which the directory need
    not record and which may have moved with the study: it names ``resolved`` when ``resolved``
    ends with it (``data/x.jsonl`` names ``/home/u/project/data/x.jsonl``); one that climbs
    (``../x``) when it leads there from ``cwd`` (the recorded directory, else this process's).
    """
    if stored == resolved:
        return True
    if not isinstance(stored, str) or not isinstance(resolved, str) or not stored:
        return False
    if ":" in stored.split("/")[0] or not os.path.isabs(resolved):
        return False  # testbed:…, a URL: never a path
    typed = Path(stored).expanduser()
    if typed.is_absolute():
        return os.path.normpath(typed) == os.path.normpath(resolved)
    tail = Path(os.path.normpath(typed)).parts
    if tail[0] == "..":
        base = cwd if cwd is not None else Path.cwd()
        return os.path.normpath(base / typed) == os.path.normpath(resolved)
    return Path(os.path.normpath(resolved)).parts[-len(tail) :] == tail


def moved_path(stored: Any, resolved: Any, cwd: Path | None) -> bool:
    """Whether ``stored`` — an absolute path a directory of version 4 or later holds, which
    names nothing any more — names ``resolved``: it lay below ``cwd`` (the directory its command
    ran in, recorded) and the path below ``cwd`` ends ``resolved`` (:func:`same_path`'s rule
    for a path typed from there): the directory moved with its files."""
    if cwd is None or not isinstance(stored, str) or os.path.exists(stored):
        return False
    below = path_below(stored, cwd)
    return below is not None and same_path(below, resolved)


def path_below(path: str, base: Path) -> str | None:
    """``path`` relative to ``base`` when it is an absolute path strictly below it; else None."""
    if not os.path.isabs(path):
        return None
    try:
        below = Path(path).relative_to(base)
    except ValueError:
        return None
    return str(below) if below.parts else None


def as_recorded_paths(
    fields: dict[str, Any], version: int, recorded: dict[str, Any] | None, cwd: Path | None = None
) -> dict[str, Any]:
    """``fields`` (a config's flat fields, paths resolved) with each path put back as
    ``recorded`` (its ``fingerprint.json`` fields) holds it when it names the same path, so the
    fingerprint matches: a directory of ``version`` < 4 holds it as typed (:func:`same_path`);
    one of any version may have moved since, its files with it (:func:`moved_path`)."""
    if not recorded:
        return fields
    out = dict(fields)
    for key, value in fields.items():
        if not is_path_field(key) or key not in recorded or recorded[key] == value:
            continue
        old = version < RESOLVED_PATHS_VERSION and same_path(recorded[key], value, cwd)
        if old or moved_path(recorded[key], value, cwd):
            out[key] = recorded[key]
    return out
