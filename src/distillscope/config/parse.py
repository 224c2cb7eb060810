"""From YAML and overrides to a ``RunConfig`` and back: one-line errors that name the field, the
``distillscope config`` listing, the resolved YAML every run writes, the check of this machine's
devices, and the key a run's evaluation is cached under."""

from __future__ import annotations

import copy
import difflib
import json
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from distillscope.config.paths import Resolution, resolve_at, resolve_config_data
from distillscope.config.run import RunConfig
from distillscope.config.section import ConfigError
from distillscope.safeyaml import YamlError, clip, load_yaml, load_yaml_file, quote
from distillscope.store_versions import EVALUATION_KEY_ADDED, without_added

#: The longest rule message shown whole. Every piece of a message that can carry user input is
#: bounded where it is quoted (safeyaml.quote/clip, ≤ 100 characters each), so a rule's message,
#: advice included, stays below this; the clip only guards the line against a runaway message.
MESSAGE_LIMIT = 400


def _format_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    where = clip(".".join(str(p) for p in first["loc"]), 40) or "(top level)"
    msg = clip(first["msg"].removeprefix("Value error, "), MESSAGE_LIMIT)
    if first["type"] == "extra_forbidden":
        return f"{source}: unknown field {quote(where)}{did_you_mean(first['loc'])}"
    if not first["loc"] or isinstance(first.get("input"), dict):
        return f"{source}: {msg}"  # a cross-field rule: its message already names the fields
    return f"{source}: {where}: {msg} (got {quote(first.get('input'), 100)})"


def did_you_mean(loc: tuple, model: type[BaseModel] = RunConfig) -> str:
    """``; did you mean 'optim.lr'?`` for a mistyped key at ``loc`` (a validation error's
    location under ``model``; list indexes skipped), from the fields of its section."""
    names = [str(p) for p in loc if not isinstance(p, int)]
    for part in names[:-1]:
        field = model.model_fields.get(part)
        section = _section_of(getattr(field, "annotation", None))
        if section is None:
            return ""
        model = section
    close = difflib.get_close_matches(names[-1], list(model.model_fields), n=1, cutoff=0.6)
    if not close:
        return ""
    return f"; did you mean {quote('.'.join([*map(str, loc[:-1]), close[0]]))}?"


def _section_of(annotation: Any) -> type[BaseModel] | None:
    """The section class a field holds: itself, or inside ``list[…]`` or ``… | None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    inner = [a for a in get_args(annotation) if _section_of(a) is not None]
    return _section_of(inner[0]) if inner else None


def parse_override(item: str) -> tuple[list[str], Any]:
    """``optim.lr=5e-5`` → (["optim", "lr"], "5e-5"); the value is parsed as YAML, never evaluated.

    Numeric strings such as ``5e-5`` (not a float in YAML 1.1) are converted by field validation.
    The value is read with :func:`distillscope.safeyaml.load_yaml`'s limits; malformed YAML
    (``optim.lr=[1,2``, ``name=*foo``) raises a one-line ``ConfigError`` naming the override.
    """
    if "=" not in item:
        raise ConfigError(f"override {quote(item, 100)} must look like section.field=value")
    key, raw = item.split("=", 1)
    if raw.strip() in ("None", "none"):  # Python spelling of YAML's null
        return key.strip().split("."), None
    try:
        value = load_yaml(raw, f"override {quote(item, 100)}")
    except YamlError as err:
        hint = "; quote the value if it is a string" if "not valid YAML" in str(err) else ""
        raise ConfigError(f"{err}{hint}") from None
    return key.strip().split("."), value


def apply_overrides(
    data: dict[str, Any],
    overrides: list[str],
    paths_from: Path | None = None,
    log: Resolution | None = None,
) -> dict[str, Any]:
    """Return a copy of ``data`` with ``section.field=value`` overrides applied; with
    ``paths_from`` (the command line's directory), a path they set is read from there
    (:mod:`distillscope.config.paths`), what was found recorded in ``log``."""
    out = copy.deepcopy(data)
    for item in overrides:
        path, value = parse_override(item)
        if paths_from is not None:
            where = f"override {quote(item, 100)} on the command line"
            value = resolve_at(tuple(path), value, paths_from, where, log)
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                where = f"override {quote(item, 100)}"
                raise ConfigError(f"{where}: {quote(part, 60)} is not a section")
        node[path[-1]] = value
    return out


def run_config_from_dict(
    data: dict[str, Any], source: str = "config", overrides: list[str] = ()
) -> RunConfig:
    """Validate a plain dict as a RunConfig; errors become one-line ``ConfigError``s naming
    ``source``, or the override of ``overrides`` that set the failing field (the command
    line's mistake is not the file's)."""
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, _blamed(err, source, overrides))) from None


def _blamed(err: ValidationError, source: str, overrides: list[str]) -> str:
    """``override 'eval.itmes=5'`` when the first error lies at or under an override's key
    (the last such override: it is the one in force), else ``source``."""
    loc = [str(p) for p in err.errors()[0]["loc"]]
    for item in reversed(list(overrides)):
        key = [k.strip() for k in item.split("=", 1)[0].split(".")]
        message = str(err.errors()[0]["msg"])
        section_rule = loc == key[: len(loc)] and ".".join(key) in message  # e.g. task.name
        if loc and (loc[: len(key)] == key or section_rule):
            return f"override {quote(item, 100)} on the command line"
    return source


def load_run_config(
    path: str | Path | None, overrides: list[str] = (), stored: bool = False
) -> RunConfig:
    """Read a YAML run config (or the defaults when ``path`` is None) and apply overrides.

    Paths are resolved (:mod:`distillscope.config.paths`): the file's from its directory, the
    overrides' from the current one. ``stored``: ``path`` is a run's ``config.yaml``, whose
    paths were resolved when the run was made (schema version 3 or older: kept as typed, read
    by ``config.paths.rebased``), so only the overrides' are."""
    data: dict[str, Any] = {}
    source = "config"
    log = Resolution()
    if path is not None:
        p = Path(path)
        source = str(p)
        try:
            data = load_yaml_file(p, "config file")
        except YamlError as err:
            raise ConfigError(str(err)) from None
        if data is None or data == {}:
            raise ConfigError(f"{p} is empty; write at least one setting, or omit the file")
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: top level must be a mapping of sections")
        if not stored:
            data = resolve_config_data(data, p.parent, source, log)
    # with a file, an override's mistake is named as the command line's, not the file's
    blame = list(overrides) if path is not None else []
    data = apply_overrides(data, list(overrides), paths_from=Path.cwd(), log=log)
    cfg = run_config_from_dict(data, source, blame)
    log.check()  # a path naming nothing, once every other field is right
    return cfg


def config_fields(
    model: type[BaseModel] = RunConfig, prefix: str = ""
) -> list[tuple[str, str, str, str]]:
    """``(dotted name, type or allowed values, default, description)`` of every leaf field.

    A section that is null by default (``model.lora``, ``rlvr``, …) has its own row (type
    ``section | None``) followed by its fields' rows (``model.lora.r``), each with the default it
    takes once the section is given.
    """
    rows = []
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            rows += config_fields(kind, f"{prefix}{name}.")
            continue
        dotted = f"{prefix}{name}"
        shown = allowed_values(dotted) or type_text(kind)
        rows.append((dotted, shown, _shown_default(info), info.description))
        section = _optional_section(kind)
        if section is not None:
            rows += config_fields(section, f"{prefix}{name}.")
    return [(n, k, d, text or "") for n, k, d, text in rows]


def allowed_values(dotted: str) -> str | None:
    """The values a text field accepts, for ``distillscope config``: the names of the registry
    it is checked against (tasks, objectives, languages) or the forms it reads (models,
    devices); None for free text and for the fields whose type says it (``Literal``)."""
    from distillscope.objectives.registry import OBJECTIVES
    from distillscope.tasks.catalogue import TASKS
    from distillscope.tasks.hub_tasks import DATASET_TASKS
    from distillscope.tasks.language import LANGUAGE_CODES

    tasks = " | ".join([*sorted(TASKS), *DATASET_TASKS])
    models = "a model directory | testbed:ROLE (distillscope testbed info)"
    shown = {
        "task.name": tasks,
        "rlvr.task": tasks,
        "eval.harder_task": f"{tasks} | None",
        "objective.kind": " | ".join(OBJECTIVES),
        "eval.style_language": " | ".join(LANGUAGE_CODES) + " | None",
        "model.student": models,
        "model.teacher": f"{models} | http(s)://HOST:PORT/v1",
        "model.device": "cpu | cuda | cuda:N | mps",
        "model.teacher_device": "cpu | cuda | cuda:N | mps | None",
    }
    return shown.get(dotted)


def type_text(kind: Any) -> str:
    """A field's type as a reader writes it: ``float``, ``float | None``, ``tuple[float, float]``,
    ``a | b`` (the values of a ``Literal``), ``section`` for a config section; constraints and
    validators (``Annotated`` metadata) are left to the description."""
    origin, args = get_origin(kind), get_args(kind)
    if origin is Annotated:
        return type_text(args[0])
    if origin is Literal:
        return " | ".join(str(a) for a in args)
    if origin in (Union, UnionType):
        return " | ".join(type_text(a) for a in args)
    if kind is type(None):
        return "None"
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return "section"
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(map(type_text, args))}]"
    return getattr(kind, "__name__", str(kind))


def _optional_section(kind: Any) -> type[BaseModel] | None:
    """The section class of a ``Section | None`` field, else None."""
    if get_origin(kind) not in (Union, UnionType):
        return None
    sections = [a for a in get_args(kind) if isinstance(a, type) and issubclass(a, BaseModel)]
    return sections[0] if len(sections) == 1 else None


def _shown_default(info: Any) -> str:
    if info.is_required():  # a field of an optional section that must be given with it
        return "required"
    if info.default_factory is not None:
        return json.dumps(info.default_factory())
    return "null" if info.default is None else json.dumps(info.default, default=str)


def dump_run_config(cfg: RunConfig) -> str:
    """The resolved config as YAML (what every run writes next to its results)."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)


def check_machine(cfg: RunConfig) -> None:
    """Refuse, before anything runs, a device this machine lacks or a dtype its device can't use.

    Kept out of validation so that configs of a GPU study still load (report, status) on a
    laptop; ``train``, ``eval`` and ``study`` call it before the first model loads.
    """
    m = cfg.model
    # "cpu" needs no torch to parse: a study's planning process never imports it
    device = None if m.device == "cpu" else _device(m.device)
    kind = "cpu" if device is None else device.type
    for field, dtype in (("model.dtype", m.dtype), ("model.teacher_dtype", m.teacher_dtype)):
        if dtype == "float16" and kind == "cpu":
            raise ConfigError(f"{field}=float16 does not train on the CPU; use float32 or bfloat16")
    if device is None:
        return
    import torch

    if device.type == "cuda":
        count = torch.cuda.device_count()
        if count == 0:
            raise ConfigError(
                f"model.device={m.device} but this machine has no CUDA device; use model.device=cpu"
            )
        if (device.index or 0) >= count:
            raise ConfigError(f"model.device={m.device} but this machine has {count} CUDA devices")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"model.device={m.device} but MPS is not available; use model.device=cpu")


def _device(name: str):
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        device = None
    if device is None or device.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(
            f"model.device: {quote(name, 60)} is not a device (cpu, cuda, cuda:N, mps)"
        )
    return device


def evaluation_key(cfg: RunConfig) -> str:
    """What a run's evaluation depends on besides its weights: student, task, eval, seed."""
    d = cfg.model_dump(mode="json")
    model = {k: v for k, v in d["model"].items() if not k.startswith("teacher")}
    teacher_only = ("teacher_style_flag", "teacher_instruction")
    task = {k: v for k, v in d["task"].items() if k not in teacher_only}
    evaluation = {k: v for k, v in d["eval"].items() if not k.startswith("profile_")}
    key = {"model": model, "task": task, "eval": evaluation, "seed": d["seed"]}
    # entries added later are left out at their default: earlier keys stay valid
    return json.dumps(without_added(key, EVALUATION_KEY_ADDED), sort_keys=True)
