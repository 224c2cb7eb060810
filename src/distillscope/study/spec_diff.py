"""What differs between the study a directory holds and the one asked for.

A study directory keeps its ``study.yaml``; running another spec on it is refused unless
``--overwrite``, and either way the user sees what changed: the spec's differing fields
(dotted, old → new) and the runs — unchanged (their directories resume: a run id is a hash of
its whole config, so an unchanged id is an unchanged run), new, and no longer planned (their
directories stay on disk, outside the results table).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from distillscope.config import ConfigError
from distillscope.safeyaml import YamlError, load_yaml_file
from distillscope.store import STUDY_SPEC_FILE, flatten
from distillscope.study.spec import StudySpec, expand

#: Changed fields named in the one-line message (the rest counted).
SHOWN = 4


@dataclass(frozen=True)
class SpecChange:
    """The differing fields (``name: old → new``) and the run ids by fate."""

    fields: list[str]
    unchanged: list[str]
    new: list[str]
    dropped: list[str]

    def line(self) -> str:
        """One line: the first :data:`SHOWN` fields, then the run counts."""
        more = len(self.fields) - SHOWN
        shown = "; ".join(self.fields[:SHOWN]) + (f"; and {more} more fields" if more > 0 else "")
        return (
            f"changed {shown} — {len(self.unchanged)} runs unchanged (they resume), "
            f"{len(self.new)} new, {len(self.dropped)} no longer planned"
        )


def stored_change(out: Path, spec: StudySpec) -> SpecChange | None:
    """How ``spec`` differs from the study ``out`` holds; None when it holds none or the same."""
    path = out / STUDY_SPEC_FILE
    if not path.is_file():
        return None
    stored = read_stored_spec(path)
    return (
        None
        if _runs_part(stored) == _runs_part(spec.model_dump(mode="json"))
        else (spec_change(stored, spec))
    )


def _runs_part(dump: Any) -> Any:
    """A spec's data but how its paths were typed (``typed_paths``: shown, never run)."""
    return {k: v for k, v in dump.items() if k != "typed_paths"} if isinstance(dump, dict) else dump


def read_stored_spec(spec_path: Path) -> object:
    """The study.yaml a study directory holds, read within safeyaml's limits, with the fields
    a later version added at their defaults (so an older directory resumes)."""
    try:
        stored = load_yaml_file(spec_path, "study file")
    except YamlError as err:
        raise ConfigError(f"{err}; choose another --out to start anew") from None
    try:
        return StudySpec.model_validate(stored).model_dump(mode="json")
    except ValidationError:
        return stored  # not a study this version reads: it differs


def spec_change(stored: Any, spec: StudySpec) -> SpecChange:
    """How ``spec`` differs from ``stored`` (a study.yaml's data, possibly of an older version
    that no longer validates: then every run counts as new)."""
    new_dump = spec.model_dump(mode="json")
    old_flat = flatten(_by_name(stored)) if isinstance(stored, dict) else {}
    new_flat = flatten(_by_name(new_dump))
    fields = [
        f"{k}: {_show(old_flat.get(k, '(absent)'))} → {_show(new_flat.get(k, '(absent)'))}"
        for k in sorted(set(old_flat) | set(new_flat))
        if old_flat.get(k, "(absent)") != new_flat.get(k, "(absent)")
    ]
    try:
        old_ids = {r.run_id for r in expand(StudySpec.model_validate(stored))}
    except (ValidationError, ValueError):
        old_ids = set()
    new_ids = [r.run_id for r in expand(spec)]
    return SpecChange(
        fields,
        [i for i in new_ids if i in old_ids],
        [i for i in new_ids if i not in old_ids],
        sorted(old_ids - set(new_ids)),
    )


def _by_name(tree: Any) -> Any:
    """Lists of named entries (experiments) as dicts by name, so fields diff one by one."""
    if isinstance(tree, dict):
        return {k: _by_name(v) for k, v in tree.items()}
    if isinstance(tree, list) and tree and all(isinstance(v, dict) and "name" in v for v in tree):
        return {str(v["name"]): _by_name(v) for v in tree}
    return tree


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"
