"""One typed config tree: every run — from the CLI, a preset or a study grid — is a ``RunConfig``.

Each field carries a one-line description; the CLI help and the docs show the same text.
Unknown keys and bad values are rejected on load with a message that names the field and the
allowed values (``load_run_config``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from distillscope.safeyaml import YamlError, clip, load_yaml, load_yaml_file, quote


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the field and what is allowed."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Section):
    teacher: str = Field("testbed:teacher", description="teacher HF directory, or testbed:teacher")
    student: str = Field("testbed:student", description="student HF directory, or testbed:student")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="student weights dtype (training keeps fp32 softmax either way)"
    )
    teacher_dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="teacher weights dtype (inference only)"
    )
    device: str = Field("cpu", description="torch device for both models, e.g. cpu or cuda:0")
    allow_pickle: bool = Field(False, description="allow loading pickled .bin weights")
    trust_remote_code: bool = Field(False, description="let transformers run model code")


class TaskConfig(_Section):
    name: str = Field("tb-countdown3", description="training task (see distillscope.tasks)")
    file: Path | None = Field(None, description="JSONL/Parquet for file-backed tasks (mcq, math)")
    prompt_format: Literal["testbed", "chat"] = Field(
        "testbed", description="compact testbed prompts or the models' chat template"
    )
    teacher_style_flag: bool = Field(
        False, description="teacher reads the style-flagged prompt, student the plain one"
    )
    max_new_tokens: int = Field(40, ge=1, description="completion length limit (tokens)")


class RolloutConfig(_Section):
    policy: Literal["student", "teacher", "spectrum", "mix", "interleave"] = Field(
        "student",
        description="who writes the trajectories: student (OnPD), teacher (OffPD), λ-spectrum, "
        "GKD sequence mix, or token interleaving",
    )
    lam: float = Field(1.0, ge=-2.0, le=2.0, description="λ of the spectrum policy (−1 T, +1 S)")
    student_temperature: float = Field(1.0, gt=0, description="student sampling temperature")
    teacher_temperature: float = Field(0.5, gt=0, description="teacher sampling temperature")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling threshold")
    p_student: float = Field(0.5, ge=0, le=1, description="mix: share of student-written rows")
    top_k: int = Field(5, ge=1, description="interleave: teacher top-k that accepts a token")
    prompts_per_step: int = Field(32, ge=1, description="distinct prompts per optimizer step")
    rollouts_per_prompt: int = Field(1, ge=1, description="completions sampled per prompt")
    cache_teacher_rollouts: bool = Field(
        False, description="off-policy: reuse one cached set of teacher rollouts across runs"
    )


class ObjectiveConfig(_Section):
    kind: str = Field(
        "forward_kl",
        description="the token-level loss the student minimises (objectives.OBJECTIVES)",
    )
    student_temperature: float = Field(1.0, gt=0, description="student temperature in the loss")
    teacher_temperature: float = Field(0.5, gt=0, description="teacher temperature in the loss")
    reduction: Literal["seq_mean", "token_mean", "sum"] = Field(
        "seq_mean",
        description="per-sequence mean (docs/method.md §1), pooled token mean, or sum",
    )
    beta: float = Field(0.5, ge=0, le=1, description="jsd: generalised JSD β")
    alpha: float = Field(0.5, ge=0, le=1, description="mixture: weight of forward KL")
    chunk_size: int = Field(0, ge=0, description="chunked full-vocabulary loss; 0 = plain")
    regulation: Literal["none", "hard_clip", "log_compress"] = Field(
        "none", description="opd: advantage shaping g"
    )
    clip_min: float = Field(-3.0, description="opd hard_clip lower bound")
    clip_max: float = Field(3.0, description="opd hard_clip upper bound")
    eps_low: float = Field(0.2, ge=0, description="opd importance-ratio clip (low)")
    eps_high: float = Field(0.2, ge=0, description="opd importance-ratio clip (high)")

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        # Imported here so that reading configs (the report, CLI help) does not load torch.
        from distillscope.objectives.registry import OBJECTIVES

        if kind not in OBJECTIVES:
            raise ValueError(f"must be one of {', '.join(OBJECTIVES)}")
        return kind


class OptimConfig(_Section):
    steps: int = Field(150, ge=1, description="optimizer steps")
    lr: float = Field(1e-5, gt=0, description="peak learning rate (constant after warm-up)")
    warmup_steps: int = Field(10, ge=0, description="linear warm-up steps")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas")
    eps: float = Field(1e-8, gt=0, description="AdamW epsilon")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    grad_clip: float | None = Field(1.0, description="global grad-norm clip; null = off")
    grad_accum: int = Field(1, ge=1, description="micro-batches per optimizer step")


class EvalConfig(_Section):
    items: int = Field(200, ge=1, description="held-out items for accuracy (1 sample each)")
    temperature: float = Field(0.5, gt=0, description="accuracy sampling temperature")
    coverage_items: int = Field(100, ge=0, description="items for pass@k; 0 = skip")
    coverage_samples: int = Field(10, ge=1, description="samples per item for pass@k")
    coverage_temperature: float = Field(1.0, gt=0, description="pass@k sampling temperature")
    harder_task: str | None = Field("tb-countdown4e", description="transfer task; null = skip")
    harder_temperature: float = Field(0.5, gt=0, description="harder-task sampling temperature")
    skill_items: int = Field(100, ge=0, description="items per skill for forgetting; 0 = skip")
    eval_seed: int = Field(43, description="seed of the held-out split")
    style: bool = Field(False, description="measure the share of answers in the teacher's style")


class RunConfig(_Section):
    name: str = Field("run", description="a label for this run")
    seed: int = Field(42, description="seeds data order, sampling and evaluation draws")
    model: ModelConfig = ModelConfig()
    task: TaskConfig = TaskConfig()
    rollout: RolloutConfig = RolloutConfig()
    objective: ObjectiveConfig = ObjectiveConfig()
    optim: OptimConfig = OptimConfig()
    eval: EvalConfig = EvalConfig()
    checkpoint_every: int = Field(50, ge=0, description="steps between checkpoints; 0 = none")

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        from distillscope.objectives.registry import OBJECTIVES

        o = self.objective
        kind = OBJECTIVES[o.kind]
        if kind.needs_student_rollouts and self.rollout.policy != "student":
            raise ValueError(
                f"objective.kind={o.kind} needs rollout.policy=student (a policy gradient)"
            )
        if o.chunk_size > 0 and not kind.chunkable:
            chunkable = ", ".join(k.name for k in OBJECTIVES.values() if k.chunkable)
            raise ValueError(
                f"objective.chunk_size={o.chunk_size} needs a chunkable objective.kind "
                f"({chunkable}), got {o.kind}; set objective.chunk_size=0"
            )
        if self.objective.clip_min >= self.objective.clip_max:
            raise ValueError("objective.clip_min must be below objective.clip_max")
        return self


def _format_error(err: ValidationError, source: str) -> str:
    # Every piece that can carry user input is bounded (safeyaml.quote/clip), so the message
    # stays one line of at most ~300 characters after the source, whatever the input held.
    first = err.errors()[0]
    where = clip(".".join(str(p) for p in first["loc"]), 40) or "(top level)"
    msg = clip(first["msg"].removeprefix("Value error, "), 160)
    if first["type"] == "extra_forbidden":
        return f"{source}: unknown field {quote(where)}"
    if not first["loc"]:  # a cross-field rule: its message already names the fields
        return f"{source}: {msg}"
    return f"{source}: {where}: {msg} (got {quote(first.get('input'), 100)})"


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


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with ``section.field=value`` overrides applied."""
    out = copy.deepcopy(data)
    for item in overrides:
        path, value = parse_override(item)
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                where = f"override {quote(item, 100)}"
                raise ConfigError(f"{where}: {quote(part, 60)} is not a section")
        node[path[-1]] = value
    return out


def run_config_from_dict(data: dict[str, Any], source: str = "config") -> RunConfig:
    """Validate a plain dict as a RunConfig; errors become one-line ``ConfigError``s."""
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, source)) from None


def load_run_config(path: str | Path | None, overrides: list[str] = ()) -> RunConfig:
    """Read a YAML run config (or the defaults when ``path`` is None) and apply overrides."""
    data: dict[str, Any] = {}
    source = "config"
    if path is not None:
        p = Path(path)
        source = str(p)
        try:
            data = load_yaml_file(p, "config file") or {}
        except YamlError as err:
            raise ConfigError(str(err)) from None
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: top level must be a mapping of sections")
    return run_config_from_dict(apply_overrides(data, list(overrides)), source)


def dump_run_config(cfg: RunConfig) -> str:
    """The resolved config as YAML (what every run writes next to its results)."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
