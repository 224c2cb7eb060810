"""The run-config fields that hold a local path, and a stored config's relative paths read from
the directory they were typed in.

A run directory records the directory its command ran in (``fingerprint.json``'s ``cwd``,
:func:`~distillscope.store.claim_run`). Its ``config.yaml`` keeps each path as typed — the run's
fingerprint and its study's run id hash the typed text, so every directory an earlier version
wrote still matches — and a command that reads the stored config later (``eval RUN`` from
another directory) reads each relative path from the recorded directory (:func:`rebased`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distillscope.config.load import run_config_from_dict
from distillscope.config.run import RunConfig

#: Dotted fields whose value may be a local path (a model or cache directory, a task file, a
#: directory of lm-eval tasks); ``.*``: every value of the mapping. A value that names no local
#: path (``testbed:…``, a server URL, a hub id) is left as it is.
PATH_FIELDS = (
    "model.teacher",
    "model.student",
    "model.teacher_cache",
    "model.teachers.*",
    "task.file",
    "task.dataset.path",
    "eval.forgetting.include_path",
)


def rebased(cfg: RunConfig, base: Path | None) -> RunConfig:
    """``cfg`` with each relative path of :data:`PATH_FIELDS` that names something under
    ``base`` (the directory the run's command ran in) made absolute there; ``cfg`` itself when
    ``base`` is None or no path moves. A relative path that names nothing under ``base`` (a
    hub id, a file since removed) is kept, so its error names it as it was written."""
    if base is None:
        return cfg
    data = cfg.model_dump(mode="json")
    moved = False
    for dotted in PATH_FIELDS:
        for holder, key in _slots(data, dotted.split(".")):
            value = holder[key]
            if isinstance(value, str) and _relative_path(value) and (base / value).exists():
                holder[key] = str((base / value).resolve())
                moved = True
    return run_config_from_dict(data, f"config read from {base}") if moved else cfg


def _slots(node: Any, parts: list[str]) -> list[tuple[dict, str]]:
    """``(mapping, key)`` of every value at ``parts`` under ``node`` (``*``: each key)."""
    if not isinstance(node, dict):
        return []
    head, rest = parts[0], parts[1:]
    keys = list(node) if head == "*" else [head] if head in node else []
    if not rest:
        return [(node, k) for k in keys if node[k] is not None]
    return [slot for k in keys for slot in _slots(node[k], rest)]


def _relative_path(value: str) -> bool:
    """Whether ``value`` reads as a relative local path (not a URL, not ``testbed:…``)."""
    return bool(value) and ":" not in value.split("/")[0] and not Path(value).is_absolute()
