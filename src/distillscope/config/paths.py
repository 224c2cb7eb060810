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

from distillscope.config.run import RunConfig
from distillscope.config.section import ConfigError
from distillscope.safeyaml import quote
from distillscope.store_versions import PATH_FIELDS, path_below, path_fields_below

__all__ = [
    "PATH_FIELDS",
    "Resolution",
    "path_slots",
    "rebased",
    "relocations",
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
    #: absolute paths that name nothing, by where they are now (:func:`relocations`)
    moved: dict[str, str] = field(default_factory=dict)

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
    if log is not None and value in log.moved:
        return log.moved[value]  # a stored path whose study moved (relocations)
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


def relocations(typed: dict[str, str], start: Path) -> dict[str, str]:
    """Where each path of a moved study now is: ``typed`` maps the resolved (absolute) paths a
    stored ``study.yaml`` holds to their typed forms (``typed_paths``); each one that names
    nothing any more and was typed relative is read from the nearest directory at or above
    ``start`` (the study directory now) that holds it. A study directory moved with its files,
    or a project moved as a whole, so finds its files again; a path typed absolute, or found
    nowhere, is left for the run's checks to name."""
    out = {}
    for resolved, form in typed.items():
        if not isinstance(form, str) or not _relative_path(form):
            continue  # typed absolute, or not a path (testbed:…, a URL)
        if not os.path.isabs(resolved) or os.path.exists(resolved):
            continue
        for base in (start.resolve(), *start.resolve().parents):
            here = os.path.normpath(base / Path(form).expanduser())
            if os.path.exists(here):
                out[resolved] = here
                break
    return out


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


def rebased(cfg: RunConfig, base: Path | None, run: Path | None = None) -> RunConfig:
    """``cfg`` — a run directory's stored config — with its paths read as the directory now
    finds them; ``cfg`` itself when ``base`` is None or no path moves.

    ``base`` is the directory the run's command ran in (``fingerprint.json``'s ``cwd``). A
    relative path (schema version 3 or older kept them as typed) that names something under
    ``base`` is made absolute there. An absolute path below ``base`` that names nothing any
    more (the directory moved with its files, version 4) is looked for below the nearest
    directory at or above ``run`` (the run directory now) that holds it (:func:`relocations`).
    A path found nowhere is kept, so its error names it as it was written."""
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
        elif run is not None and (below := path_below(value, base)) is not None:
            found = relocations({value: below}, run).get(value)
            holder[keys[-1]] = found or value
            moved = moved or found is not None
    # only path text changed, to paths that exist: what validated validates again
    return RunConfig.model_validate(data) if moved else cfg


def _relative_path(value: str) -> bool:
    """Whether ``value`` reads as a relative local path (not a URL, not ``testbed:…``)."""
    return bool(value) and ":" not in value.split("/")[0] and not Path(value).is_absolute()
