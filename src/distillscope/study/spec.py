"""Study specifications: a base run config plus experiments whose axes cross into runs.

```yaml
name: quick
description: OnPD vs OffPD × forward vs reverse KL × low vs high LR × 2 seeds
base:                       # any RunConfig fields
  optim: {steps: 150}
experiments:
  - name: main
    overrides: {}           # dotted path → value, applied to this experiment only
    axes:                   # dotted path → list of values, or label → value mapping
      rollout.policy: [student, teacher]
      # a bundle axis: label → several settings that move together (recorded as the label)
      # budget: {p16x1: {rollout.prompts_per_step: 16, rollout.rollouts_per_prompt: 1}}
      objective.kind: [forward_kl, reverse_kl]
      optim.lr: {low: 1.0e-4, high: 1.0e-3}
      seed: [42, 43]
```

Every run gets a stable, filesystem-safe id derived from its experiment and axis settings plus a
short hash of its resolved config, so the same spec always yields the same ids.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from distillscope.config import (
    ConfigError,
    RunConfig,
    apply_overrides,
    parse_override,
    run_config_from_dict,
)
from distillscope.config.parse import MESSAGE_LIMIT, did_you_mean
from distillscope.config.paths import Resolution, relocations, resolve_spec_data, typed_text
from distillscope.labels import label_column
from distillscope.safeyaml import YamlError, clip, load_yaml_file, quote
from distillscope.store_versions import added_at_default, is_path_field

PRESETS_DIR = Path(__file__).resolve().parent.parent / "presets"

#: Axis columns recorded for every run even when the study does not vary them.
RECORDED = (
    "rollout.policy",
    "rollout.lam",
    "rollout.spectrum_temperatures",
    "objective.kind",
    "objective.regulation",
    "objective.teacher_topk",  # a top-k teacher changes the objective: labelled in tables
    "optim.lr",
    "optim.grad_clip",
    "seed",
    "task.name",
    "model.teacher",
    # a routed run's teachers (its model.teacher is the unused default): JSON text in the table
    "model.teachers",
    "model.route",
    "task.teacher_style_flag",
    "task.teacher_instruction",
    "rollout.prompts_per_step",
    "rollout.rollouts_per_prompt",
    "rollout.engine",
)


class Experiment(BaseModel):
    """One sub-grid of a study."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="label of this sub-grid (a results-table column)")
    overrides: dict[str, Any] = Field(default_factory=dict, description="dotted path → value")
    axes: dict[str, list[Any] | dict[str, Any]] = Field(
        default_factory=dict, description="dotted path → values (list) or label → value (mapping)"
    )

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", v):
            raise ValueError("experiment names may use letters, digits, _ . - only")
        if v == "baseline":
            raise ValueError("'baseline' names the study's untrained-student rows; rename it")
        return v

    @field_validator("axes")
    @classmethod
    def _non_empty_axes(cls, axes: dict[str, Any]) -> dict[str, Any]:
        for name, values in axes.items():
            if not values:
                raise ValueError(f"axis {clip(name, 60)} has no values; give at least one")
        return axes


class RLVRStage(BaseModel):
    """The study's RLVR follow-up (docs/method.md §8): one RLVR run per run of an experiment,
    started from the student that run exported, once it is ``done``.

    ```yaml
    rlvr:
      from: main                 # the experiment whose distilled students it trains further
      where: {task.name: countdown3}   # optional: only the parents with these settings
      overrides: {steps: 60}     # fields of the rlvr section (config.RLVRConfig)
    ```
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str = Field("rlvr", description="label of the RLVR runs (their experiment column)")
    source: str = Field(alias="from", description="the experiment whose runs it starts from")
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="rlvr-section field → value (steps, lr, group_size …)"
    )
    where: dict[str, Any] = Field(
        default_factory=dict, description="dotted config path → value the parents must have"
    )

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        return Experiment._safe_name(v)

    @field_validator("overrides")
    @classmethod
    def _no_parent(cls, overrides: dict[str, Any]) -> dict[str, Any]:
        if "parent" in overrides:
            raise ValueError("the stage sets each RLVR run's parent itself; remove 'parent'")
        return overrides


class UntilDecided(BaseModel):
    """Seeds added until the claims are decided (:mod:`distillscope.study.sequential`).

    ```yaml
    until_decided: {max_seeds: 6, block: 2}
    ```

    After each look (the study run and scored), every claim left inconclusive for lack of power
    gets ``block`` more seeds in the experiments it reads, up to ``max_seeds`` per experiment;
    each look tests at α / K, K the most looks the budget allows (docs/studies.md).
    """

    model_config = ConfigDict(extra="forbid")
    max_seeds: int = Field(6, ge=2, description="the most seeds an experiment reaches")
    block: int = Field(2, ge=1, description="seeds added to an experiment per look")
    looks: list[dict[str, list[int]]] = Field(
        default_factory=list,
        description="the seeds each later look added, per experiment (the study writes them)",
    )


class StudySpec(BaseModel):
    """A whole study: a base RunConfig (as a mapping), its experiments, and optional RLVR
    stages, each following one of them (``rlvr``: one stage, or a list of stages with distinct
    names)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field("study", description="name shown in the report")
    description: str = Field("", description="one paragraph shown in the report")
    base: dict[str, Any] = Field(default_factory=dict, description="RunConfig fields")
    experiments: list[Experiment] = Field(min_length=1, description="sub-grids of the study")
    rlvr: RLVRStage | list[RLVRStage] | None = Field(
        None, description="RLVR follow-up of one experiment's runs (or a list of such stages)"
    )
    until_decided: UntilDecided | None = Field(
        None, description="add seeds where claims lack power, look by look (study.sequential)"
    )
    typed_paths: dict[str, str] = Field(
        default_factory=dict,
        description="each local path as the user typed it, by its resolved (absolute) form; the "
        "study writes it (the runs read only the resolved paths)",
    )

    def shown(self, text: str) -> str:
        """``text`` with each resolved path in it as the user typed it (``typed_paths``), for
        display: ``mcq:/home/me/proj/data/x.jsonl`` → ``mcq:data/x.jsonl``."""
        return typed_text(text, self.typed_paths)

    @property
    def stages(self) -> list[RLVRStage]:
        """The RLVR stages, in the order the spec lists them (none without ``rlvr``)."""
        if self.rlvr is None:
            return []
        return self.rlvr if isinstance(self.rlvr, list) else [self.rlvr]

    @model_validator(mode="after")
    def _stage_follows_an_experiment(self) -> StudySpec:
        names = [e.name for e in self.experiments]
        seen: list[str] = []
        for stage in self.stages:
            if stage.source not in names:
                raise ValueError(
                    f"rlvr.from names experiment {clip(stage.source, 60)!r}, which this study "
                    f"does not have (experiments: {names})"
                )
            if stage.name in names:
                raise ValueError(f"rlvr.name {stage.name!r} is also an experiment's name")
            if stage.name in seen:
                raise ValueError(f"rlvr.name {stage.name!r} names two RLVR stages")
            seen.append(stage.name)
        for look in self.until_decided.looks if self.until_decided else []:
            unknown = [e for e in look if e not in names]
            if unknown:
                raise ValueError(
                    f"until_decided.looks names experiment {clip(unknown[0], 60)!r}, which "
                    f"this study does not have (experiments: {names})"
                )
        return self


@dataclass(frozen=True)
class PlannedRun:
    """One run of the grid: its id, experiment, axis settings and resolved config."""

    run_id: str
    experiment: str
    axes: dict[str, Any]
    labels: dict[str, str]
    config: RunConfig = field(compare=False)
    parent: str | None = None  # an RLVR run: the run whose student it starts from


def preset_names() -> list[str]:
    """The shipped presets' names, sorted: the YAML files of ``presets/`` (none listed by hand)."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def preset_path(name: str) -> Path:
    """The YAML file of the preset ``name``; the error lists the presets that exist."""
    path = PRESETS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"{name}: no such study file or preset (presets: {preset_names()})")
    return path


def list_presets() -> dict[str, str]:
    """Preset name → its one-paragraph description."""
    return {name: load_spec(preset_path(name)).description for name in preset_names()}


def load_spec(source: str | Path, overrides: list[str] = (), stored: bool = False) -> StudySpec:
    """Read a study spec from a YAML path or a preset name (``smoke``, ``quick``, ``paper`` …).

    A file's relative paths are read from its directory (:mod:`distillscope.config.paths`), a
    preset's paths are taken as they are, and ``stored`` (a study directory's ``study.yaml``,
    whose paths were resolved when it was written) takes them as they are too.
    ``overrides`` (``model.teacher=/models/q7b``) apply to every run, see :func:`with_overrides`.
    """
    path = Path(source)
    preset = not path.is_file()
    if preset:
        path = preset_path(str(source))
    log = Resolution()
    spec = _read_spec(path, None if preset or stored else log)
    spec = with_overrides(spec, list(overrides), log) if overrides else spec
    log.check()  # a path naming nothing, once the spec has validated
    return spec


def with_overrides(
    spec: StudySpec, overrides: list[str], log: Resolution | None = None
) -> StudySpec:
    """``spec`` with ``section.field=value`` overrides applied to every run.

    They set the base config and replace the same key in any experiment's ``overrides``; a key
    that is an axis of an experiment is refused (the override would collapse the grid). A bundle
    axis that sets the key keeps its own value for its runs: ``model.teacher=DIR`` sets the
    teacher of every run but those of a bundle naming another one (e.g. the second teacher of
    ``teacher_scale`` in the real-model presets; edit a copy of the study to change it).

    ``overrides`` are typed on the command line: their paths are read from the current
    directory.
    """
    keys = [".".join(parse_override(item)[0]) for item in overrides]
    experiments = []
    for exp in spec.experiments:
        clash = [k for k in keys if k in exp.axes]
        if clash:
            raise ConfigError(
                f"override {clash[0]} is an axis of experiment {exp.name} of study {spec.name}; "
                "copy the study (distillscope presets show NAME) and edit the axis instead"
            )
        mine = {k: v for k, v in exp.overrides.items() if k not in keys}
        experiments.append(exp.model_copy(update={"overrides": mine}))
    log = Resolution() if log is None else log
    base = apply_overrides(spec.base, overrides, paths_from=Path.cwd(), log=log)
    typed = {**spec.typed_paths, **log.typed}
    return spec.model_copy(update={"base": base, "experiments": experiments, "typed_paths": typed})


def _read_spec(path: Path, log: Resolution | None = None) -> StudySpec:
    """The study file at ``path``; with ``log``, its paths read from its directory (what was
    found recorded there); without, as they are (a preset, a stored study.yaml)."""
    try:
        data = load_yaml_file(path, "study file")
        if log is not None and isinstance(data, dict):
            prior = data.get("typed_paths")  # a stored study.yaml given as the study file
            prior = prior if isinstance(prior, dict) else {}
            log.moved = relocations(prior, path.parent)  # its directory moved: its files too
            data = resolve_spec_data(data, path.parent, str(path), log)
            prior = {log.moved.get(k, k): v for k, v in prior.items()}
            data["typed_paths"] = {**prior, **log.typed}
        return StudySpec.model_validate(data)
    except YamlError as err:
        raise ConfigError(str(err)) from None
    except ValidationError as err:
        # a mistyped key first: `experiment:` also leaves `experiments` missing
        errors = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")
        first = errors[0]
        where = clip(".".join(str(p) for p in first["loc"]), 60)
        if first["type"] == "extra_forbidden":
            hint = did_you_mean(first["loc"], StudySpec)
            raise ConfigError(f"{path}: unknown field {quote(where)}{hint}") from None
        msg = clip(first["msg"].removeprefix("Value error, "), MESSAGE_LIMIT)
        got = quote(first.get("input"), 100)
        raise ConfigError(f"{path}: {where}: {msg} (got {got})") from None


def _check_label_columns(spec: StudySpec) -> None:
    """A labelled axis needs a label column that names it alone (see :mod:`distillscope.labels`)."""
    axes = set(RECORDED) | {a for exp in spec.experiments for a in exp.axes}
    for exp in spec.experiments:
        for name, values in exp.axes.items():
            if not isinstance(values, dict) or any(isinstance(v, dict) for v in values.values()):
                continue  # a plain list, or a bundle (recorded as its label, no label column)
            column = label_column(name)
            clash = sorted(a for a in axes if a != name and label_column(a) == column)
            if clash:
                raise ConfigError(
                    f"study {spec.name}, experiment {exp.name}: labelled axis {name!r} shares its "
                    f"last name with {clash[0]!r}; give one of them as a list instead"
                )


def expand(spec: StudySpec) -> list[PlannedRun]:
    """Cross every experiment's axes into runs, validate each config, and give each an id."""
    _check_label_columns(spec)
    runs: list[PlannedRun] = []
    for exp in spec.experiments:
        runs += _expand_experiment(spec, exp)
    # seeds added look by look come after the spec's own runs, so that no baseline id moves
    by_name = {e.name: e for e in spec.experiments}
    for look in spec.until_decided.looks if spec.until_decided else []:
        for name, seeds in look.items():
            exp = by_name[name]
            runs += _expand_experiment(
                spec, exp.model_copy(update={"axes": {**exp.axes, "seed": seeds}})
            )
    for stage in spec.stages:
        runs += rlvr_runs(spec, stage, runs)
    ids = [r.run_id for r in runs]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ConfigError(f"study {spec.name}: runs {sorted(dup)[:3]} are planned twice")
    return runs


def _expand_experiment(spec: StudySpec, exp: Experiment) -> list[PlannedRun]:
    """The runs of one experiment: its axes crossed, each config validated and given an id."""
    runs = []
    names = list(exp.axes)
    choices = [_axis_choices(exp.axes[n]) for n in names]
    for combo in itertools.product(*choices):
        settings: dict[str, Any] = dict(exp.overrides)
        axes: dict[str, Any] = {}
        labels: dict[str, str] = {}
        for name, (label, value) in zip(names, combo, strict=True):
            if isinstance(value, dict):  # a bundle: several settings that move together
                settings.update(value)
                axes[name] = label
                continue
            settings[name] = value
            axes[name] = value
            if label is not None:
                labels[label_column(name)] = label
        dotted = [f"{k}={json.dumps(v)}" for k, v in settings.items()]
        cfg = run_config_from_dict(
            apply_overrides(spec.base, dotted), f"study {spec.name}, experiment {exp.name}"
        )
        runs.append(PlannedRun(run_id(exp.name, axes, cfg), exp.name, axes, labels, cfg))
    return runs


def rlvr_runs(spec: StudySpec, stage: RLVRStage, runs: list[PlannedRun]) -> list[PlannedRun]:
    """One RLVR run per run of ``stage``'s source experiment: the parent's config with the
    stage's ``rlvr`` section, its axes and labels (so its row names the cell it came from)."""
    out = []
    sources = [r for r in runs if r.experiment == stage.source]
    for parent in (r for r in sources if _matches(r.config, stage.where, spec.name)):
        data = parent.config.model_dump(mode="json")
        data["rlvr"] = {**stage.overrides, "parent": parent.run_id}
        cfg = run_config_from_dict(data, f"study {spec.name}, rlvr")
        rid = run_id(stage.name, parent.axes, cfg)
        out.append(PlannedRun(rid, stage.name, parent.axes, parent.labels, cfg, parent.run_id))
    if sources and not out:
        raise ConfigError(
            f"study {spec.name}: rlvr.where {quote(stage.where, 100)} matches none of the "
            f"{len(sources)} runs of experiment {stage.source}"
        )
    return out


def _matches(cfg: RunConfig, where: dict[str, Any], study: str) -> bool:
    """Whether ``cfg`` holds every ``dotted path → value`` of an RLVR stage's ``where``."""
    data = cfg.model_dump(mode="json")
    for dotted, want in where.items():
        value: Any = data
        for part in dotted.split("."):
            if not isinstance(value, dict) or part not in value:
                raise ConfigError(
                    f"study {study}: rlvr.where: {clip(dotted, 60)} is not a run-config field "
                    "(see distillscope config)"
                )
            value = value[part]
        if value != want:
            return False
    return True


def _axis_choices(values: list[Any] | dict[str, Any]) -> list[tuple[str | None, Any]]:
    if isinstance(values, dict):
        return list(values.items())
    return [(None, v) for v in values]


def run_id(experiment: str, axes: dict[str, Any], cfg: RunConfig) -> str:
    """``<experiment>_<axis>-<value>_..._<hash8>``, safe as a directory name on any OS; a
    path's value is its last part (``file-colors.jsonl``: the hash holds the whole path)."""
    parts = [experiment]
    for key, value in axes.items():
        short = key.split(".")[-1]
        if is_path_field(key) and isinstance(value, str) and os.path.isabs(value):
            value = Path(value).name
        parts.append(f"{short}-{value}")
    text = "_".join(parts)
    text = re.sub(r"[^A-Za-z0-9_.+-]", "-", text)[:120]
    exclude: dict[str, Any] = {}
    for dotted in added_at_default(cfg.model_dump(mode="json")):  # an id never changes
        if "." not in dotted:  # a whole section added later, absent (null) by default
            exclude[dotted] = True
            continue
        section, name = dotted.split(".")
        exclude.setdefault(section, set()).add(name)
    digest = hashlib.sha256(cfg.model_dump_json(exclude=exclude).encode()).hexdigest()[:8]
    return f"{text}_{digest}"
