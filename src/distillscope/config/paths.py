"""Local paths in configs: resolved once, where they are read, and stored absolute.

A path typed in a file (a run YAML given to ``train``, a study YAML) is read from the file's
directory; one typed on the command line (``task.file=data/x.jsonl``) from the current
directory; a preset's paths are taken as they are. :func:`resolve_config_data` and
:func:`resolve_spec_data` do it for every field of :data:`PATH_FIELDS`, before validation, so
each run's ``config.yaml`` and fingerprint, its study's run ids and every cache key hold the
absolute path, whichever directory a command runs in. Values that name no local path stay as
they are: ``testbed:…``, ``hf:…``, a server URL, a dataset hub id (``org/name`` naming nothing
local). A relative path that names nothing fails once the config has validated, naming the
field, the typed value and the path it was read as (:class:`Resolution`).

A run directory of schema version 3 or older kept its paths as typed and records the directory
its command ran in (``fingerprint.json``'s ``cwd``); :func:`rebased` reads its relative paths
from there (``eval RUN`` from another directory).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distillscope.config.base import ConfigError
from distillscope.config.run import RunConfig
from distillscope.safeyaml import quote
from distillscope.store_versions import PATH_FIELDS, path_fields_below

__all__ = [
    "PATH_FIELDS",
    "Resolution",
    "path_slots",
    "rebased",
    "resolve_config_data",
    "resolve_spec_data",
    "typed_text",
]


@dataclass
class Resolution:
    """What resolving a file's or a command line's paths found: ``typed`` maps each resolved
    path to its typed form (a study keeps it for display: ``StudySpec.typed_paths``);
    ``missing`` holds a line for each relative path that names nothing, raised by
    :meth:`check` once the config has validated (a mistake in another field is named first)."""

    typed: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def check(self) -> None:
        """Raise the first missing path's one-line ConfigError, if any."""
        if self.missing:
            raise ConfigError(self.missing[0])


def typed_text(text: str, typed: dict[str, str]) -> str:
    """``text`` with each resolved path in it as the user typed it (``typed``: resolved → typed,
    a study's ``typed_paths``), for display: ``mcq:/home/me/proj/data/x.jsonl`` →
    ``mcq:data/x.jsonl``; the longest path first, so that a directory never cuts a file's."""
    for resolved in sorted(typed, key=len, reverse=True):
        text = text.replace(resolved, typed[resolved])
    return text


def path_slots(value: Any, parts: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The keys into ``value`` of every string at or under it that sits at a field of
    :data:`PATH_FIELDS`, ``value`` being what dotted ``parts`` of a run config hold (the whole
    config for ``()``; ``task.dataset`` given as a string is its path)."""
    return [keys for rest in path_fields_below(parts) for keys in _walk(value, rest)]


def _walk(node: Any, rest: list[str], keys: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(node, str):
        return [keys] if not rest or rest == ["path"] else []
    if not rest or not isinstance(node, dict):
        return []
    names = list(node) if rest[0] == "*" else [rest[0]] if rest[0] in node else []
    return [k for name in names for k in _walk(node[name], rest[1:], (*keys, name))]


def resolve_value(name: str, value: str, base: Path, where: str, log: Resolution | None) -> str:
    """``value`` of field ``name`` read from ``base`` (module doc): absolute and normalized when
    it is a relative path, else as it is. ``log`` (when given) records the typed form, and the
    error when it names nothing (else it is raised here)."""
    if not value or ":" in value.split("/")[0] or os.path.isabs(value):
        return value  # testbed:…, hf:…, a URL, an absolute path: as typed
    resolved = os.path.normpath(Path(base).resolve() / Path(value).expanduser())
    if not os.path.exists(resolved):
        hub_id = "/" in value and not value.startswith((".", "~"))
        if name.startswith("task.dataset") and hub_id:
            return value  # a hub id (org/name): tasks.hub reads it from the hub
        line = (
            f"{where}: {name} {quote(value, 100)} is read as {resolved}, which does not exist "
            f"({_rule(where)})"
        )
        if log is None:
            raise ConfigError(line)
        log.missing.append(line)
    if log is not None:
        log.typed[resolved] = value
    return resolved


def _rule(where: str) -> str:
    if "command line" in where:
        return "a path on the command line is read from the current directory"
    return "a path in a file is read from the file's directory"


def resolve_at(
    parts: tuple[str, ...], value: Any, base: Path, where: str, log: Resolution | None = None
) -> Any:
    """``value`` (what dotted ``parts`` of a run config hold) with its paths read from ``base``;
    a new object where anything changed, ``value`` itself otherwise."""
    slots = path_slots(value, parts)
    if not slots:
        return value
    if slots == [()]:  # value is the path itself
        return resolve_value(".".join(parts), value, base, where, log)
    out = copy.deepcopy(value)
    for keys in slots:
        holder = out
        for key in keys[:-1]:
            holder = holder[key]
        name = ".".join((*parts, *keys))
        holder[keys[-1]] = resolve_value(name, holder[keys[-1]], base, where, log)
    return out


def resolve_config_data(
    data: dict[str, Any], base: Path, where: str, log: Resolution | None = None
) -> dict[str, Any]:
    """A run config's data (as read from a file, before validation) with every path of
    :data:`PATH_FIELDS` read from ``base`` (the file's directory)."""
    return resolve_at((), data, base, where, log)


def resolve_spec_data(data: Any, base: Path, where: str, log: Resolution) -> Any:
    """A study file's data (before validation) with every path read from ``base`` (its
    directory): in ``base``, in each experiment's ``overrides`` and axis values (bundles
    included); ``log`` collects what :class:`Resolution` holds. Malformed data is returned
    for validation to name."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    if isinstance(data.get("base"), dict):
        out["base"] = resolve_at((), data["base"], base, where, log)
    if isinstance(data.get("experiments"), list):
        out["experiments"] = [_experiment(e, base, where, log) for e in data["experiments"]]
    return out


def _experiment(exp: Any, base: Path, where: str, log: Resolution) -> Any:
    if not isinstance(exp, dict):
        return exp
    out = dict(exp)
    if isinstance(exp.get("overrides"), dict):
        out["overrides"] = _settings(exp["overrides"], base, where, log)
    if isinstance(exp.get("axes"), dict):
        axes = {}
        for name, values in exp["axes"].items():
            if not isinstance(values, list | dict):
                axes[name] = values  # validation names it
                continue
            choices = values.items() if isinstance(values, dict) else enumerate(values)
            resolved = {k: _choice(str(name), v, base, where, log) for k, v in choices}
            axes[name] = resolved if isinstance(values, dict) else list(resolved.values())
        out["axes"] = axes
    return out


def _choice(name: str, value: Any, base: Path, where: str, log: Resolution) -> Any:
    """One value of axis ``name``: a bundle (a mapping of dotted settings) or the axis' value."""
    if isinstance(value, dict):
        return _settings(value, base, where, log)
    return resolve_at(tuple(name.split(".")), value, base, where, log)


def _settings(settings: dict, base: Path, where: str, log: Resolution) -> dict:
    """Dotted path → value settings (an experiment's overrides, a bundle), paths resolved."""
    return {
        k: resolve_at(tuple(str(k).split(".")), v, base, where, log) for k, v in settings.items()
    }


def rebased(cfg: RunConfig, base: Path | None) -> RunConfig:
    """``cfg`` — a stored config of schema version 3 or older, which kept its paths as typed —
    with each relative path of :data:`PATH_FIELDS` that names something under ``base`` (the
    directory the run's command ran in) made absolute there; ``cfg`` itself when ``base`` is
    None or no path moves. A relative path that names nothing under ``base`` (a hub id, a file
    since removed) is kept, so its error names it as it was written."""
    if base is None:
        return cfg
    data = cfg.model_dump(mode="json")
    moved = False
    for keys in path_slots(data):
        holder = data
        for key in keys[:-1]:
            holder = holder[key]
        value = holder[keys[-1]]
        if _relative_path(value) and (base / value).exists():
            holder[keys[-1]] = str((base / value).resolve())
            moved = True
    # only path text changed, to paths that exist: what validated validates again
    return RunConfig.model_validate(data) if moved else cfg


def _relative_path(value: str) -> bool:
    """Whether ``value`` reads as a relative local path (not a URL, not ``testbed:…``)."""
    return bool(value) and ":" not in value.split("/")[0] and not Path(value).is_absolute()
