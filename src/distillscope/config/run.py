"""``RunConfig``, the whole tree: the sections of the other modules, an RLVR run's training, the
trackers, and the rules that span sections (fp32 master weights, a served teacher, the style
detector)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from distillscope.config.eval import EvalConfig
from distillscope.config.model import ModelConfig, served_url
from distillscope.config.objective import ObjectiveConfig, OptimConfig
from distillscope.config.rollout import RolloutConfig
from distillscope.config.section import ConfigError, Float, Int, _Section
from distillscope.config.task import TaskConfig, real_run_defaults
from distillscope.objectives.registry import OBJECTIVES


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

    @model_validator(mode="before")
    @classmethod
    def _real_run_defaults(cls, data: Any) -> Any:
        return real_run_defaults(data)  # a task that is not the testbed's: no testbed defaults

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
