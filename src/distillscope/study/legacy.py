"""A study directory whose run ids hash other path text than this version reads: its run ids.

Two kinds of directory: one of schema version 3 or older, and one of any version moved
elsewhere with its files (or inside a project moved as a whole).

Before version 4 a study's ``study.yaml`` and run configs kept each local path as typed, and a
run id hashes its whole config, so a study with a relative path (``task.file: data/x.jsonl``)
has ids that the same study read now — its paths resolved, absolute — does not give. When the
``study.yaml`` a directory holds is of that kind (it has no ``typed_paths``, which version 4
writes) and plans the same runs, but for paths typed relative that name the resolved ones
(:func:`~distillscope.store_versions.same_path`), the runs keep the ids the directory gave them
and its ``study.yaml`` is left as it is (``study status`` and ``report`` read it): nothing
finished runs again. Each run's config is the resolved one; its fingerprint matches the
directory's by the same rule (:func:`~distillscope.store_versions.as_recorded_paths`).

Since version 4 the ``study.yaml`` holds each path resolved, absolute, and how it was typed
(``typed_paths``). When the directory has moved, a path it holds may name nothing any more; the
study file read now finds it where it moved to (:func:`~distillscope.config.paths.relocations`),
and its ids, which hash the old text, are kept the same way: a stored path that names nothing
counts as its typed form, which names the new one when it ends it
(:func:`~distillscope.store_versions.same_path`).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from distillscope.config import ConfigError, run_config_from_dict
from distillscope.safeyaml import YamlError, load_yaml_file
from distillscope.store import STUDY_SPEC_FILE, flatten
from distillscope.store_versions import is_path_field, same_path
from distillscope.study.spec import PlannedRun, StudySpec, expand

#: The fields of a study spec that are not its runs' configs, compared as they are.
_OUTSIDE_RUNS = ("name", "description", "rlvr", "until_decided")


def legacy_runs(out: Path, spec: StudySpec) -> list[PlannedRun] | None:
    """``spec``'s runs under the ids the older study in ``out`` gave them (module doc); None
    when ``out`` holds no such study or it plans other runs."""
    stored = _stored_spec(out / STUDY_SPEC_FILE)
    if stored is None:
        return None
    typed = stored.typed_paths
    mine, theirs = spec.model_dump(mode="json"), stored.model_dump(mode="json")
    if any(mine[k] != theirs[k] for k in _OUTSIDE_RUNS):
        return None
    try:
        old = expand(stored)
    except ConfigError:
        return None
    new = expand(spec)
    if len(old) != len(new):
        return None
    ids: dict[str, str] = {}
    runs = []
    for was, now in zip(old, new, strict=True):
        now = _renamed(now, ids)
        same = (was.experiment, was.labels) == (now.experiment, now.labels)
        if not same or not _same_settings(was.axes, now.axes, typed):
            return None
        if not _same_settings(
            flatten(was.config.model_dump(mode="json")),
            flatten(now.config.model_dump(mode="json")),
            typed,
        ):
            return None
        ids[now.run_id] = was.run_id
        runs.append(replace(now, run_id=was.run_id))
    return runs if any(a != b for a, b in ids.items()) else None


def _stored_spec(path: Path) -> StudySpec | None:
    """The study ``path`` holds, as it was written (its paths as they were stored), when its
    ids may hash other path text: a version before 4 wrote it (no ``typed_paths``), or a path
    it holds names nothing any more (it moved). None otherwise: its ids are this version's, and
    a resume compares nothing here."""
    if not path.is_file():
        return None
    try:
        data = load_yaml_file(path, "study file")
        if not isinstance(data, dict):
            return None
        typed = data.get("typed_paths")
        if isinstance(typed, dict) and all(os.path.exists(p) for p in typed):
            return None
        return StudySpec.model_validate(data)
    except (YamlError, ValidationError):
        return None


def _renamed(run: PlannedRun, ids: dict[str, str]) -> PlannedRun:
    """An RLVR run of ``run``'s study pointed at its parent's older id."""
    if run.parent is None or run.parent not in ids:
        return run
    data = run.config.model_dump(mode="json")
    data["rlvr"]["parent"] = ids[run.parent]
    config = run_config_from_dict(data, "study rlvr")
    return replace(run, parent=ids[run.parent], config=config)


def _same_settings(old: dict[str, Any], new: dict[str, Any], typed: dict[str, str]) -> bool:
    """Equal dotted settings, a path typed relative naming its resolved form; a stored
    absolute path that names nothing counts as its typed form (``typed``)."""
    if set(old) != set(new):
        return False
    return all(
        old[k] == new[k] or (_path_key(k) and same_path(_as_typed(old[k], typed), new[k]))
        for k in old
    )


def _as_typed(value: Any, typed: dict[str, str]) -> Any:
    """A stored path that names nothing any more (its study moved), as it was typed."""
    if isinstance(value, str) and value in typed and not os.path.exists(value):
        return typed[value]
    return value


def _path_key(key: str) -> bool:
    return is_path_field(key) or is_path_field(f"{key}.path")  # task.dataset as a string
