"""``eval``: what is measured on held-out items — accuracy, pass@k, the harder task, forgetting
(the skill suite or [P]'s lm-eval benchmarks), the teacher's style and per-position profiles."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, Strict, field_validator, model_validator

from distillscope.config.section import ConfigError, Float, Int, _Section
from distillscope.safeyaml import quote

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
    items: Int = Field(200, ge=1, description="held-out items for accuracy")
    temperature: Float = Field(0.5, gt=0, description="accuracy sampling temperature")
    coverage_items: Int = Field(100, ge=0, description="items for pass@k; 0 = skip")
    coverage_samples: Int = Field(10, ge=1, description="samples per item for pass@k")
    coverage_temperature: Float = Field(1.0, gt=0, description="pass@k sampling temperature")
    harder_task: str | None = Field(
        "tb-countdown3-hard",
        description="transfer task; null = skip (other tasks than the testbed's: null unless "
        "named)",
    )
    harder_temperature: Float = Field(0.5, gt=0, description="harder-task sampling temperature")
    skill_items: Int = Field(
        100,
        ge=0,
        description="items per skill of the testbed's suite for forgetting; 0 = skip (other "
        "tasks than the testbed's: 0 unless named)",
    )
    forgetting: ForgettingConfig | None = Field(
        None,
        description="forgetting on lm-eval benchmarks instead of the skill suite (extra lmeval): "
        "{harness: lm-eval} = [P]'s seven; null = off",
    )
    # Samples per item of the one-sample-per-item blocks (docs/outputs.md, "Evaluation samples"):
    # each block's score is its mean over items × samples; 1 is [P]'s protocol.
    samples_per_item: Int = Field(
        1, ge=1, description="samples per held-out item for eval/accuracy; 1 = [P]'s protocol"
    )
    harder_samples_per_item: Int = Field(
        1, ge=1, description="samples per harder-task item for eval/harder_accuracy"
    )
    skill_samples_per_item: Int = Field(
        1, ge=1, description="samples per skill item for the skill suite (forgetting)"
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
