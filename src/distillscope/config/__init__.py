"""One typed config tree: every run — from the CLI, a preset or a study grid — is a ``RunConfig``.

Each field carries a one-line description; ``distillscope config`` lists every field with its
type, default and that text (:func:`config_fields`).
Unknown keys and bad values are rejected on load with a message that names the field and the
allowed values (``load_run_config``).
"""

from __future__ import annotations

import copy
import difflib
import json
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)

from distillscope.objectives.options import (
    DEFAULT_MEMORY_BUDGET_MB,
    ChunkSpec,
    DivergenceOptions,
    OPDOptions,
    Reduction,
    Regulation,
)
from distillscope.objectives.registry import FUSED_MIN_VOCAB, OBJECTIVES
from distillscope.policy_registry import POLICY_NAMES, ROLLOUT_POLICIES, SPECTRUM_TEMPERATURES
from distillscope.safeyaml import YamlError, clip, load_yaml, load_yaml_file, quote

_OPD = OPDOptions()  # the OPD fields' defaults


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the field and what is allowed."""


def _not_bool(value: Any) -> Any:
    # YAML reads `true` as a bool and pydantic would read it as 1.0; a number must be a number.
    if isinstance(value, bool):
        raise ValueError("must be a number, not a boolean")
    return value


#: Integers are strict (``optim.steps: true`` is an error, not 1); floats accept numeric strings
#: (YAML 1.1 reads ``5e-5`` as a string) but never booleans, NaN or infinity.
Int = Annotated[int, Strict()]
Float = Annotated[float, BeforeValidator(_not_bool), Field(allow_inf_nan=False)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def _ignored(self, section: str, reads: dict[str, bool], setting: str) -> None:
        """Refuse fields the chosen ``setting`` ignores when set explicitly to a non-default."""
        for name, used in reads.items():
            if used or name not in self.model_fields_set:
                continue
            value = getattr(self, name)
            if value != type(self).model_fields[name].default:
                raise ValueError(
                    f"{section}.{name}={quote(value, 40)} is ignored under {setting}; remove it"
                )


class LoraConfig(_Section):
    """LoRA adapters on the student (peft): only the adapters train; ``RUN/student/`` holds the
    adapters merged into the base weights (docs/scaling.md "LoRA students")."""

    r: Int = Field(8, ge=1, description="rank of each adapter's update B·A")
    alpha: Float = Field(16.0, gt=0, description="scale numerator: the update is (alpha / r)·B·A")
    dropout: Float = Field(
        0.0, ge=0, lt=1, description="dropout on the adapters' input (0 = resumes bit for bit)"
    )
    target_modules: list[str] = Field(
        ["q_proj", "k_proj", "v_proj", "o_proj"],
        min_length=1,
        description="names of the student's linear layers that get an adapter",
    )

    def preflight(self) -> None:
        """Refuse, before anything runs, a LoRA run without peft (one line naming the extra)."""
        import importlib.util

        if importlib.util.find_spec("peft") is None:
            raise ConfigError(LORA_MISSING)


#: The one line a run with ``model.lora`` fails with when peft is not installed.
LORA_MISSING = "model.lora needs peft, which is not installed: pip install 'distillscope[lora]'"


class TeacherServerConfig(_Section):
    timeout_s: Float = Field(60.0, gt=0, description="seconds one request may take")
    retries: Int = Field(3, ge=0, description="retries of a failed request (exponential backoff)")
    backoff_s: Float = Field(0.5, ge=0, description="first retry's wait; each later one doubles")
    api_key_env: str | None = Field(
        None, description="environment variable holding the server's API key; null = none"
    )


def served_url(spec: str) -> bool:
    """Whether a ``model.teacher`` value names a server (``http://`` or ``https://``)."""
    return spec.startswith(("http://", "https://"))


def _check_server_url(url: str) -> None:
    """ValueError unless a served teacher's URL is http(s) with a host and no credentials,
    query or fragment."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "model.teacher: a server URL must not carry credentials; use "
            "model.teacher_server.api_key_env"
        )
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        raise ValueError(f"model.teacher: {quote(url, 60)} has a bad port") from None
    if not parts.hostname or parts.query or parts.fragment:
        raise ValueError(
            f"model.teacher: {quote(url, 60)} is not a server URL (http(s)://HOST:PORT/v1)"
        )


class ModelConfig(_Section):
    teacher: str = Field(
        "testbed:teacher",
        description="teacher HF directory, testbed:teacher, or an OpenAI-compatible server's "
        "URL (http://HOST:PORT/v1: top-k prompt log-probs; docs/scaling.md)",
    )
    student: str = Field("testbed:student", description="student HF directory, or testbed:student")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="student weights dtype (training keeps fp32 softmax either way)"
    )
    teacher_dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="teacher weights dtype (inference only)"
    )
    device: str = Field("cpu", description="torch device of the student, e.g. cpu or cuda:0")
    teacher_device: str | None = Field(
        None, description="torch device of the teacher, e.g. cuda:1; null = model.device"
    )
    autocast: Literal["auto", "bfloat16", "off"] = Field(
        "auto",
        description="bf16 autocast around forwards (weights stay in model.dtype); auto = on CUDA",
    )
    low_precision_weights: bool = Field(
        False,
        description="accept training a bf16/fp16 student without fp32 master weights (labelled)",
    )
    gradient_checkpointing: bool = Field(
        False, description="recompute the student's layer activations in backward (less memory)"
    )
    allow_pickle: bool = Field(False, description="allow loading pickled .bin weights")
    trust_remote_code: bool = Field(False, description="let transformers run model code")
    lora: LoraConfig | None = Field(
        None,
        description="LoRA adapters {r, alpha, dropout, target_modules} train instead of every "
        "weight (extra lora); null = full fine-tuning",
    )
    teacher_server: TeacherServerConfig | None = Field(
        None, description="a served teacher's connection settings; null = the defaults"
    )

    @model_validator(mode="after")
    def _served(self) -> ModelConfig:
        # checked here, not in a field validator, so that the error never echoes the URL
        served = served_url(self.teacher)
        if served:
            _check_server_url(self.teacher)
        reads = {"teacher_dtype": not served, "teacher_device": not served}
        setting = f"a {'served' if served else 'local'} model.teacher"
        self._ignored("model", {**reads, "teacher_server": served}, setting)
        return self

    def server(self) -> TeacherServerConfig:
        """The served teacher's connection settings (the defaults when unset)."""
        return self.teacher_server or TeacherServerConfig()


class DatasetConfig(_Section):
    """Where a dataset task's rows come from (docs/tasks.md, "Dataset tasks")."""

    path: str = Field(
        description="hub id (org/name), a save_to_disk or data-file directory, a JSONL/Parquet file"
    )
    name: str | None = Field(
        None, description="the dataset's configuration (subset); null = default"
    )
    split: str | None = Field(
        None, description="split expression (train, test[:500], train+test); null = every split"
    )
    revision: str | None = Field(None, description="hub commit, tag or branch; null = latest")


class TaskConfig(_Section):
    name: str = Field("tb-countdown3", description="training task (see distillscope.tasks)")
    file: Path | None = Field(
        None, description="dataset tasks: a local JSONL/Parquet file of rows (mcq, math, …)"
    )
    dataset: DatasetConfig | None = Field(
        None,
        description="dataset tasks: {path, name, split, revision} of the rows; null = task.file "
        "or the task's default dataset",
    )
    fields: dict[str, str] | None = Field(
        None, description="dataset tasks: schema field → dataset column; null = the defaults"
    )
    prompt_format: Literal["testbed", "chat"] = Field(
        "testbed", description="compact testbed prompts or the models' chat template"
    )
    teacher_style_flag: bool = Field(
        False, description="teacher reads the style-flagged prompt, student the plain one"
    )
    teacher_instruction: str | None = Field(
        None,
        description="chat format: text only the teacher reads, added to its system message "
        "(e.g. Reason in Spanish.); null = none",
    )
    max_new_tokens: Int = Field(40, ge=1, description="completion length limit (tokens)")
    eval_fraction: Float = Field(
        0.2, gt=0, lt=1, description="dataset tasks without a split column: share held out"
    )

    @field_validator("dataset", mode="before")
    @classmethod
    def _dataset_path(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str) else value  # task.dataset=org/name

    @model_validator(mode="after")
    def _fixed_split(self) -> TaskConfig:
        from distillscope.tasks.hub_tasks import DATASET_TASKS

        if self.eval_fraction != 0.2 and self.name not in DATASET_TASKS:
            raise ValueError(
                f"task.eval_fraction={self.eval_fraction} applies to dataset tasks "
                f"({', '.join(DATASET_TASKS)}); {clip(self.name, 60)} uses the fixed split its "
                "testbed was built on: remove it"
            )
        return self

    @model_validator(mode="after")
    def _rows_only_for_dataset_tasks(self) -> TaskConfig:
        from distillscope.tasks.hub_tasks import DATASET_TASKS, check_fields

        task = DATASET_TASKS.get(self.name)
        for key in ("file", "dataset", "fields"):
            if getattr(self, key) is not None and task is None:
                raise ValueError(
                    f"task.{key} is read only by dataset tasks ({', '.join(DATASET_TASKS)}), not "
                    f"by task.name={clip(self.name, 60)}; remove task.{key}"
                )
        if task is None:
            return self
        if self.file is not None and self.dataset is not None:
            raise ValueError(f"task.name={self.name} reads task.file or task.dataset; keep one")
        if task.needs_chat and self.prompt_format != "chat":
            raise ValueError(
                f"task.name={self.name} needs task.prompt_format=chat: its prompts are written "
                "for a chat model's template, which testbed models do not read"
            )
        check_fields(self.name, self.fields)
        return self

    @model_validator(mode="after")
    def _instruction_in_chat(self) -> TaskConfig:
        if self.teacher_instruction is None:
            return self
        if not self.teacher_instruction.strip():
            raise ValueError("task.teacher_instruction is empty; write the text or use null")
        if self.prompt_format != "chat":
            raise ValueError(
                "task.teacher_instruction needs task.prompt_format=chat (testbed models read the "
                "glyph flag: use task.teacher_style_flag)"
            )
        return self


class RolloutConfig(_Section):
    # The registry's names (distillscope.policy_registry): a Literal built from them keeps
    # pydantic's one-line error and the `distillscope config` listing of the allowed values.
    policy: Literal[POLICY_NAMES] = Field(
        "student",
        description="who writes the trajectories: "
        + ", ".join(f"{k.name} ({k.summary})" for k in ROLLOUT_POLICIES.values()),
    )
    lam: Float = Field(1.0, ge=-2.0, le=2.0, description="λ of the spectrum policy (−1 T, +1 S)")
    spectrum_temperatures: Literal[tuple(SPECTRUM_TEMPERATURES)] = Field(
        "paper",
        description="spectrum: paper = both models sampled at student_temperature (1.0, [P]); "
        "policies = each at its pure policy's (teacher at teacher_temperature), so λ = −1 is "
        "OffPD and λ = +1 OnPD, token for token",
    )
    student_temperature: Float = Field(1.0, gt=0, description="student sampling temperature")
    teacher_temperature: Float = Field(0.5, gt=0, description="teacher sampling temperature")
    top_p: Float = Field(1.0, gt=0, le=1, description="nucleus sampling threshold")
    p_student: Float = Field(0.5, ge=0, le=1, description="mix: share of student-written rows")
    top_k: Int = Field(5, ge=1, description="interleave: teacher top-k that accepts a token")
    prompts_per_step: Int = Field(32, ge=1, description="distinct prompts per optimizer step")
    rollouts_per_prompt: Int = Field(1, ge=1, description="completions sampled per prompt")
    cache_teacher_rollouts: bool = Field(
        False, description="off-policy: share cached teacher rollouts and their teacher scores"
    )
    engine: Literal["builtin", "vllm"] = Field(
        "builtin",
        description="who decodes: builtin sampler, or vLLM (pure policies; distillscope[vllm])",
    )
    engine_is_correction: bool = Field(
        False,
        description="vllm: weight each token's loss by min(π_train / π_engine, engine_is_cap)",
    )
    engine_is_cap: Float = Field(
        2.0, gt=0, description="vllm: cap C of the truncated importance weight"
    )

    @model_validator(mode="after")
    def _engine(self) -> RolloutConfig:
        # vLLM decodes one model at a time with its own sampler: the pure policies, untruncated
        # (the trainer recomputes ρ = π at the sampling temperature); the rest stay builtin.
        if self.engine == "vllm" and self.policy not in ("student", "teacher"):
            raise ValueError(
                f"rollout.policy={self.policy} needs rollout.engine=builtin (vllm samples the "
                "pure policies student and teacher)"
            )
        if self.engine == "vllm" and self.top_p < 1:
            raise ValueError("rollout.top_p < 1 needs rollout.engine=builtin")
        reads = {"engine_is_correction": self.engine == "vllm"}
        reads["engine_is_cap"] = reads["engine_is_correction"] and self.engine_is_correction
        setting = f"rollout.engine={self.engine}, engine_is_correction={self.engine_is_correction}"
        self._ignored("rollout", reads, setting)
        return self

    @model_validator(mode="after")
    def _reads(self) -> RolloutConfig:
        # A policy-specific field is refused under a policy that does not read it (the
        # registry's options; spectrum reads teacher_temperature only with `policies`
        # temperatures, under `paper` it samples both models at the student temperature).
        options = ROLLOUT_POLICIES[self.policy].reads(self)
        specific = {name for k in ROLLOUT_POLICIES.values() for name in k.all_options()}
        reads = {name: name in options for name in type(self).model_fields if name in specific}
        self._ignored("rollout", reads, f"rollout.policy={self.policy}")
        return self


class ObjectiveConfig(_Section):
    kind: str = Field(
        "forward_kl",
        description="the token-level loss the student minimises (objectives.OBJECTIVES)",
    )
    student_temperature: Float = Field(1.0, gt=0, description="student temperature in the loss")
    teacher_temperature: Float = Field(
        0.5,
        gt=0,
        description="teacher temperature in the loss; opd: 1.0 in the advantage unless set with "
        "tempered_teacher",
    )
    reduction: Reduction = Field(
        "seq_mean",
        description="per-sequence mean (docs/method.md §1), pooled token mean, or sum",
    )
    beta: Float = Field(0.5, ge=0, le=1, description="jsd: generalised JSD β")
    alpha: Float = Field(0.5, ge=0, le=1, description="mixture: weight of forward KL")
    path: Literal["auto", "fused", "plain"] = Field(
        "auto",
        description="loss from hidden states chunk by chunk (fused) or from full logits (plain); "
        f"auto = fused when the vocabulary exceeds {FUSED_MIN_VOCAB:,} tokens or chunk_size > 0",
    )
    memory_budget_mb: Float = Field(
        DEFAULT_MEMORY_BUDGET_MB,
        gt=0,
        description="fused path: MB for one chunk's (rows × V) buffers",
    )
    chunk_size: Int = Field(
        0, ge=0, description="fused path: rows per chunk, overriding memory_budget_mb; 0 = budget"
    )
    teacher_topk: Int = Field(
        0,
        ge=0,
        description="full-vocabulary kinds: the teacher keeps its k most likely tokens plus one "
        "tail bin and the divergence is taken over those k + 1 bins (changes the objective: a "
        "lower bound of the full one; cached for shared rollouts at any vocabulary); 0 = off",
    )
    regulation: Regulation = Field(_OPD.regulation, description="opd: advantage shaping g")
    clip_min: Float = Field(_OPD.clip_min, description="opd hard_clip lower bound")
    clip_max: Float = Field(_OPD.clip_max, description="opd hard_clip upper bound")
    eps_low: Float = Field(_OPD.eps_low, ge=0, description="opd importance-ratio clip (low)")
    eps_high: Float = Field(_OPD.eps_high, ge=0, description="opd importance-ratio clip (high)")
    updates_per_batch: Int = Field(
        _OPD.updates_per_batch,
        ge=1,
        description="opd: optimizer steps per rollout batch (PPO epochs; > 1 lets the ratio clip "
        "act)",
    )
    tempered_teacher: bool = Field(
        _OPD.tempered_teacher,
        description="opd: opt in to the advantage's teacher at teacher_temperature ≠ 1",
    )

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in OBJECTIVES:
            raise ValueError(f"must be one of {', '.join(OBJECTIVES)}")
        return kind

    @model_validator(mode="before")
    @classmethod
    def _opd_teacher_at_one(cls, data: Any) -> Any:
        # OPD's advantage takes the teacher at 1.0 unless the config names a temperature: the
        # resolved config then shows the temperature the advantage used (docs/method.md §4).
        if isinstance(data, dict) and data.get("kind") == "opd":
            return {"teacher_temperature": 1.0, **data}
        return data

    @model_validator(mode="after")
    def _opd_tempered_teacher(self) -> ObjectiveConfig:
        if self.kind != "opd" or (self.teacher_temperature != 1.0) == self.tempered_teacher:
            return self
        if self.tempered_teacher:
            raise ValueError(
                "objective.tempered_teacher=true needs objective.teacher_temperature ≠ 1; "
                "set the temperature or remove tempered_teacher"
            )
        raise ValueError(
            f"objective.teacher_temperature={self.teacher_temperature} tempers OPD's teacher in "
            "the advantage (1.0 by default); remove it or set objective.tempered_teacher=true"
        )

    @model_validator(mode="after")
    def _reads(self) -> ObjectiveConfig:
        # What each kind reads comes from its registry entry: a field some kind reads only
        # (β, α, the OPD options) is refused under the others; teacher_topk needs a
        # full-vocabulary kind.
        kind = OBJECTIVES[self.kind]
        kind_only = dict.fromkeys(name for k in OBJECTIVES.values() for name in k.options)
        reads = {name: name in kind.options for name in kind_only}
        reads["teacher_topk"] = kind.full_vocabulary
        self._ignored("objective", reads, f"objective.kind={self.kind}")
        fused_only = {"memory_budget_mb": self.path != "plain", "chunk_size": self.path != "plain"}
        self._ignored("objective", fused_only, "objective.path=plain")
        return self

    def divergence_options(self) -> DivergenceOptions:
        """The loss temperatures, reduction, β and α, as the divergences take them."""
        return DivergenceOptions(
            student_temperature=self.student_temperature,
            teacher_temperature=self.teacher_temperature,
            reduction=self.reduction,
            beta=self.beta,
            alpha=self.alpha,
        )

    def opd_options(self) -> OPDOptions:
        """What only OPD reads: the regulation and trust region :mod:`distillscope.objectives.opd`
        takes, the updates per rollout batch (the loop) and the tempered-teacher opt-in."""
        return OPDOptions(
            regulation=self.regulation,
            clip_min=self.clip_min,
            clip_max=self.clip_max,
            eps_low=self.eps_low,
            eps_high=self.eps_high,
            updates_per_batch=self.updates_per_batch,
            tempered_teacher=self.tempered_teacher,
        )

    def chunks(self) -> ChunkSpec:
        """Rows per chunk of the fused path: ``chunk_size`` if > 0, else the memory budget."""
        return ChunkSpec(memory_budget_mb=self.memory_budget_mb, chunk_size=self.chunk_size or None)


class OptimConfig(_Section):
    steps: Int = Field(
        150,
        ge=1,
        description="rollout batches (optimizer steps = steps × objective.updates_per_batch)",
    )
    lr: Float = Field(1e-5, gt=0, description="peak learning rate (constant after warm-up)")
    warmup_steps: Int = Field(10, ge=0, description="linear warm-up steps (rollout batches)")
    betas: tuple[Float, Float] = Field((0.9, 0.999), description="AdamW betas")
    eps: Float = Field(1e-8, gt=0, description="AdamW epsilon")
    weight_decay: Float = Field(0.0, ge=0, description="AdamW weight decay")
    grad_clip: Float | None = Field(
        1.0, gt=0, description="global grad-norm clip (> 0); null = off"
    )
    grad_accum: Int = Field(1, ge=1, description="micro-batches per optimizer step")

    @field_validator("betas")
    @classmethod
    def _betas_in_range(cls, betas: tuple[float, float]) -> tuple[float, float]:
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError("AdamW betas must lie in [0, 1)")
        return betas


#: [P]'s forgetting suite (docs/method.md §8) as lm-eval names it, with the items [P] scored:
#: MMLU-Pro 14 subjects × 200 (a limit applies to each task of a group), TruthfulQA-MC1, IFEval,
#: HumanEval-Instruct (all 164), EQ-Bench (all 171), BBQ and ToxiGen.
PAPER_FORGETTING_LIMITS: dict[str, int] = {
    "mmlu_pro": 200,
    "truthfulqa_mc1": 200,
    "ifeval": 200,
    "humaneval_instruct": 164,
    "eq_bench": 171,
    "bbq": 200,
    "toxigen": 200,
}
#: The one line a run with ``eval.forgetting`` fails with when the harness is not installed.
HARNESS_MISSING = (
    "eval.forgetting runs lm-evaluation-harness, which is not installed: "
    "pip install 'distillscope[lmeval]'"
)
PositiveInt = Annotated[int, Strict(), Field(ge=1)]


#: lm-eval task names (substrings) whose scoring executes model-written code.
CODE_EXECUTING_TASKS = ("humaneval", "mbpp")


class ForgettingConfig(_Section):
    """Forgetting on standard benchmarks: lm-evaluation-harness scores the untrained and the
    trained student on the same tasks (:mod:`distillscope.eval.forgetting`, extra ``lmeval``)."""

    harness: Literal["lm-eval"] = Field(
        "lm-eval", description="the harness that runs the tasks: lm-evaluation-harness"
    )
    tasks: list[str] = Field(
        default_factory=lambda: list(PAPER_FORGETTING_LIMITS),
        min_length=1,
        description="lm-eval task or group names (a group scores the mean of its tasks)",
    )
    limit: PositiveInt | dict[str, PositiveInt] | None = Field(
        default_factory=lambda: dict(PAPER_FORGETTING_LIMITS),
        description="items per task (per task of a group): N, or {task: N} (unnamed tasks: "
        "all); null = all; default = [P]'s counts for [P]'s tasks",
    )
    batch_size: PositiveInt | Literal["auto"] = Field(
        "auto", description="the harness's batch size; auto = the largest that fits"
    )
    include_path: Path | None = Field(
        None, description="a directory of your own lm-eval task YAMLs; null = lm-eval's tasks"
    )
    num_fewshot: Annotated[int, Strict(), Field(ge=0)] | None = Field(
        None, description="few-shot examples for every task; null = each task's own"
    )
    device: str | None = Field(
        None, description="torch device the harness loads the student on; null = model.device"
    )
    confirm_run_unsafe_code: bool = Field(
        False,
        description="let tasks that execute the model's code (humaneval_instruct) run it on "
        "this machine; false refuses them",
    )

    @model_validator(mode="before")
    @classmethod
    def _paper_limits_of_the_tasks(cls, data: Any) -> Any:
        # The default limit names [P]'s tasks: narrowed to the tasks chosen, so that the resolved
        # config shows the limit each task ran with.
        if isinstance(data, dict) and "limit" not in data and isinstance(data.get("tasks"), list):
            chosen = {t: n for t, n in PAPER_FORGETTING_LIMITS.items() if t in data["tasks"]}
            return {**data, "limit": chosen}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> ForgettingConfig:
        twice = sorted({t for t in self.tasks if self.tasks.count(t) > 1})
        if twice:
            raise ValueError(f"eval.forgetting.tasks lists {quote(twice[0], 60)} twice")
        runs_code = [t for t in self.tasks if any(c in t for c in CODE_EXECUTING_TASKS)]
        if runs_code and not self.confirm_run_unsafe_code:
            raise ValueError(
                f"eval.forgetting.tasks holds {quote(runs_code[0], 60)}, which executes the "
                "model's code on this machine: set eval.forgetting.confirm_run_unsafe_code=true "
                "to allow it, or drop the task"
            )
        if isinstance(self.limit, dict):
            unknown = [t for t in self.limit if t not in self.tasks]
            if unknown:
                raise ValueError(
                    f"eval.forgetting.limit names {quote(unknown[0], 60)}, which is not in "
                    "eval.forgetting.tasks; add it there or remove its limit"
                )
        d = self.device
        if d is not None and not (
            d in ("cpu", "cuda", "mps") or (d.startswith("cuda:") and d[5:].isdigit())
        ):
            raise ValueError(
                f"eval.forgetting.device: {quote(d, 60)} is not a device (cpu, cuda, cuda:N, mps)"
            )
        return self

    def limit_of(self, task: str) -> int | None:
        """The items ``task`` is scored on (None: all of them)."""
        return self.limit.get(task) if isinstance(self.limit, dict) else self.limit

    def preflight(self) -> None:
        """Refuse, before anything runs, a harness that is not installed or a missing
        ``include_path`` (one line each; no import of the harness, which takes seconds)."""
        import importlib.util

        if any(importlib.util.find_spec(m) is None for m in ("lm_eval", "accelerate")):
            raise ConfigError(HARNESS_MISSING)
        if self.include_path is not None and not Path(self.include_path).is_dir():
            raise FileNotFoundError(
                f"eval.forgetting.include_path {self.include_path} is not a directory"
            )


class EvalConfig(_Section):
    items: Int = Field(200, ge=1, description="held-out items for accuracy (1 sample each)")
    temperature: Float = Field(0.5, gt=0, description="accuracy sampling temperature")
    coverage_items: Int = Field(100, ge=0, description="items for pass@k; 0 = skip")
    coverage_samples: Int = Field(10, ge=1, description="samples per item for pass@k")
    coverage_temperature: Float = Field(1.0, gt=0, description="pass@k sampling temperature")
    harder_task: str | None = Field("tb-countdown3-hard", description="transfer task; null = skip")
    harder_temperature: Float = Field(0.5, gt=0, description="harder-task sampling temperature")
    skill_items: Int = Field(100, ge=0, description="items per skill for forgetting; 0 = skip")
    forgetting: ForgettingConfig | None = Field(
        None,
        description="forgetting on lm-eval benchmarks instead of the skill suite (extra lmeval): "
        "{harness: lm-eval} = [P]'s seven; null = off",
    )
    eval_seed: Int = Field(43, description="seed of the held-out split")
    style: bool = Field(False, description="measure the share of answers in the teacher's style")
    style_language: str | None = Field(
        None,
        description="chat format: the teacher's language as an ISO 639-1 code (es); the style "
        "share counts answers identified as it (extra lang); testbed: null (glyph styles)",
    )
    samples_per_block: Int = Field(
        20, ge=0, description="items per evaluation block written to samples.jsonl; 0 = none"
    )
    memory_budget_mb: Float = Field(
        2048.0,
        gt=0,
        description="evaluation batches hold at most this much KV cache and logits (≤ 256 rows)",
    )
    profile_steps: list[Annotated[int, Strict(), Field(ge=0)]] = Field(
        default_factory=list,
        description="steps before whose update per-position profiles are taken (optim.steps: "
        "after the last); [] = none",
    )
    profile_prompts: Int = Field(16, ge=1, description="fixed training prompts per profile")
    profile_bins: Int = Field(8, ge=1, description="completion-position bins of a profile")

    @field_validator("style_language")
    @classmethod
    def _known_language(cls, code: str | None) -> str | None:
        from distillscope.tasks.language import LANGUAGE_CODES

        if code is None or code.lower() in LANGUAGE_CODES:
            return None if code is None else code.lower()
        close = difflib.get_close_matches(code.lower(), LANGUAGE_CODES, n=3, cutoff=0.5)
        hint = f", e.g. {', '.join(close)}" if close else " (es, fr, de …)"
        raise ValueError(f"must be the ISO 639-1 code of a language lingua identifies{hint}")

    @model_validator(mode="after")
    def _language_for_style(self) -> EvalConfig:
        if self.style_language is not None and not self.style:
            raise ValueError(
                f"eval.style_language={self.style_language} is read only with eval.style=true; "
                "set eval.style=true or remove it"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _harness_replaces_skills(cls, data: Any) -> Any:
        # With the harness on, the skill suite is off unless named, so the resolved config shows
        # the one source of eval/forgetting_pp.
        if isinstance(data, dict) and data.get("forgetting") is not None:
            return {"skill_items": 0, **data}
        return data

    @model_validator(mode="after")
    def _one_forgetting(self) -> EvalConfig:
        if self.forgetting is not None and self.skill_items > 0:
            raise ValueError(
                f"eval.forgetting and eval.skill_items={self.skill_items} both write "
                "eval/forgetting_pp; set eval.skill_items: 0 or remove eval.forgetting"
            )
        return self


class RLVRConfig(_Section):
    """How an RLVR run trains: GRPO with the DAPO loss from a distilled checkpoint (docs/method.md
    §8). A run with this section starts from the student its ``parent`` run exported; the rest
    of its config is the parent's, so its table row carries the distillation cell it came from.
    Defaults are the testbed's (BENCHMARKS.md "The RLVR stage"); the published values for real
    models are in presets/paper-llama.yaml."""

    parent: str = Field(description="run id of the distilled run whose student/ it starts from")
    task: str = Field("tb-countdown3-hard", description="RLVR task: trained and evaluated on it")
    steps: Int = Field(60, ge=1, description="GRPO steps (one rollout batch and update each)")
    prompts_per_step: Int = Field(8, ge=1, description="distinct prompts per step")
    group_size: Int = Field(8, ge=2, description="completions per prompt (G)")
    lr: Float = Field(5e-5, gt=0, description="peak learning rate (cosine decay after warm-up)")
    warmup_fraction: Float = Field(0.1, ge=0, lt=1, description="share of steps warming up")
    temperature: Float = Field(1.0, gt=0, description="sampling (and loss) temperature")
    top_p: Float = Field(0.95, gt=0, le=1, description="nucleus sampling threshold")
    eps_low: Float = Field(0.2, ge=0, lt=1, description="importance-ratio clip below 1")
    eps_high: Float = Field(0.28, ge=0, description="importance-ratio clip above 1 (clip-higher)")
    reward_correct: Float = Field(2.0, gt=0, description="reward of a verified answer (else 0)")
    grad_clip: Float | None = Field(1.0, gt=0, description="global grad-norm clip; null = off")
    max_new_tokens: Int | None = Field(
        None, ge=1, description="completion length limit; null = task.max_new_tokens"
    )


#: Experiment trackers a run can log to beside ``metrics.jsonl``.
TRACKERS = ("tensorboard", "wandb")
#: The one line a run fails with when a tracker's package is not installed.
TRACKER_MISSING = (
    "log.trackers names {name}, which is not installed: pip install 'distillscope[{name}]'"
)


class LogConfig(_Section):
    """Experiment trackers that receive each row of ``metrics.jsonl`` (same keys) as it is
    written (docs/scaling.md "Trackers")."""

    trackers: list[Literal[TRACKERS]] = Field(
        min_length=1, description="tensorboard and/or wandb (W&B offline unless WANDB_MODE says)"
    )
    wandb_project: str = Field("distillscope", description="W&B project of the run")

    def preflight(self) -> None:
        """Refuse, before anything runs, a tracker whose package is not installed (one line
        naming its extra)."""
        import importlib.util

        for name in self.trackers:
            if importlib.util.find_spec(name) is None:
                raise ConfigError(TRACKER_MISSING.format(name=name))


class RunConfig(_Section):
    name: str = Field("run", description="a label for this run")
    seed: Int = Field(42, description="seeds data order, sampling and evaluation draws")
    model: ModelConfig = ModelConfig()
    task: TaskConfig = TaskConfig()
    rollout: RolloutConfig = RolloutConfig()
    objective: ObjectiveConfig = ObjectiveConfig()
    optim: OptimConfig = OptimConfig()
    eval: EvalConfig = EvalConfig()
    checkpoint_every: Int = Field(50, ge=0, description="steps between checkpoints; 0 = none")
    log: LogConfig | None = Field(
        None,
        description="trackers beside metrics.jsonl {trackers: [tensorboard, wandb], "
        "wandb_project}; null = metrics.jsonl only",
    )
    rlvr: RLVRConfig | None = Field(
        None, description="an RLVR run's training (set by a study's rlvr stage); null = distill"
    )

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        o = self.objective
        kind = OBJECTIVES[o.kind]
        if self.model.dtype != "float32" and not self.model.low_precision_weights:
            raise ValueError(
                f"model.dtype={self.model.dtype} trains the student without fp32 master weights "
                "(small updates vanish); keep model.dtype=float32 (bf16 autocast runs on CUDA) "
                "or set model.low_precision_weights=true"
            )
        if kind.needs_student_rollouts and self.rollout.policy != "student":
            raise ValueError(
                f"objective.kind={o.kind} needs rollout.policy=student (a policy gradient)"
            )
        if self.objective.clip_min >= self.objective.clip_max:
            raise ValueError("objective.clip_min must be below objective.clip_max")
        late = [s for s in self.eval.profile_steps if s > self.optim.steps]
        if late:
            raise ValueError(
                f"eval.profile_steps holds {late[0]}, past optim.steps={self.optim.steps} "
                "(profile steps lie in 0…optim.steps)"
            )
        return self

    @model_validator(mode="after")
    def _served_teacher(self) -> RunConfig:
        # A served teacher answers top-k prompt log-probs at temperature 1 of given tokens:
        # it scores student-written rollouts and nothing else (docs/scaling.md).
        if not served_url(self.model.teacher):
            return self
        o, served = self.objective, "model.teacher is a server"
        if not o.teacher_topk:
            raise ValueError(f"{served}: set objective.teacher_topk (the top-k log-probs it sends)")
        if o.teacher_temperature != 1.0:
            raise ValueError(
                f"{served}: its prompt log-probs are at temperature 1; set "
                "objective.teacher_temperature=1.0"
            )
        if self.rollout.policy != "student":
            raise ValueError(
                f"{served}: rollout.policy={self.rollout.policy} needs the teacher to write "
                "rollouts; use rollout.policy=student or a local teacher"
            )
        if self.eval.profile_steps:
            raise ValueError(f"{served}: eval.profile_steps needs a local teacher; remove it")
        return self

    @model_validator(mode="after")
    def _style_detector(self) -> RunConfig:
        # The style share's detector follows the prompt format: testbed models write the glyph
        # styles (tasks.verify.detect_style), chat models a language (tasks.language).
        e, chat = self.eval, self.task.prompt_format == "chat"
        if e.style and chat and e.style_language is None:
            raise ValueError(
                "eval.style=true with task.prompt_format=chat needs eval.style_language, the "
                "language the teacher is told to reason in (e.g. es)"
            )
        if e.style_language is not None and not chat:
            raise ValueError(
                f"eval.style_language={e.style_language} applies to task.prompt_format=chat; "
                "testbed runs tell the glyph styles apart: remove it"
            )
        return self


def _format_error(err: ValidationError, source: str) -> str:
    # Every piece that can carry user input is bounded (safeyaml.quote/clip), so the message
    # stays one line of at most ~300 characters after the source, whatever the input held.
    first = err.errors()[0]
    where = clip(".".join(str(p) for p in first["loc"]), 40) or "(top level)"
    msg = clip(first["msg"].removeprefix("Value error, "), 160)
    if first["type"] == "extra_forbidden":
        return f"{source}: unknown field {quote(where)}{_did_you_mean(first['loc'])}"
    if not first["loc"] or isinstance(first.get("input"), dict):
        return f"{source}: {msg}"  # a cross-field rule: its message already names the fields
    return f"{source}: {where}: {msg} (got {quote(first.get('input'), 100)})"


def _did_you_mean(loc: tuple) -> str:
    """``; did you mean 'optim.lr'?`` for a mistyped key, from the fields of its section."""
    model: type[BaseModel] = RunConfig
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return ""
        model = annotation
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1, cutoff=0.6)
    if not close:
        return ""
    return f"; did you mean {quote('.'.join([*map(str, loc[:-1]), close[0]]))}?"


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
            data = load_yaml_file(p, "config file")
        except YamlError as err:
            raise ConfigError(str(err)) from None
        if data is None or data == {}:
            raise ConfigError(f"{p} is empty; write at least one setting, or omit the file")
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: top level must be a mapping of sections")
    return run_config_from_dict(apply_overrides(data, list(overrides)), source)


def config_fields(
    model: type[BaseModel] = RunConfig, prefix: str = ""
) -> list[tuple[str, str, str, str]]:
    """``(dotted name, type or allowed values, default, description)`` of every leaf field."""
    rows = []
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            rows += config_fields(kind, f"{prefix}{name}.")
            continue
        if get_origin(kind) is Literal:
            shown = " | ".join(str(a) for a in get_args(kind))
        else:
            shown = str(kind) if get_origin(kind) else getattr(kind, "__name__", str(kind))
            shown = shown.replace("pathlib.", "").replace("typing.", "")
        rows.append((f"{prefix}{name}", shown, _shown_default(info), info.description or ""))
    return rows


def _shown_default(info: Any) -> str:
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
    for added in ("dataset", "fields"):  # added later, null by default: earlier keys stay valid
        if task[added] is None:
            del task[added]
    evaluation = {k: v for k, v in d["eval"].items() if not k.startswith("profile_")}
    if evaluation["style_language"] is None:  # added later: earlier keys stay valid
        del evaluation["style_language"]
    if evaluation["forgetting"] is None:  # added later: earlier keys stay valid
        del evaluation["forgetting"]
    key = {"model": model, "task": task, "eval": evaluation, "seed": d["seed"]}
    return json.dumps(key, sort_keys=True)
