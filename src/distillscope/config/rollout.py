"""``rollout``: who writes the trajectories (the policies of
:mod:`distillscope.rollout.policy_registry`), at which temperatures, and which engine decodes
them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from distillscope.config.section import Float, Int, _Section
from distillscope.rollout.policy_registry import (
    POLICY_NAMES,
    ROLLOUT_POLICIES,
    SPECTRUM_TEMPERATURES,
)


class RolloutConfig(_Section):
    # The registry's names (distillscope.rollout.policy_registry): a Literal built from them keeps
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
    engine_gpu_memory: Float = Field(
        0.3,
        gt=0,
        le=0.95,
        description="vllm on CUDA: share of the GPU's memory the colocated engine takes (its "
        "weights + KV cache); the rest is training's",
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
        reads["engine_gpu_memory"] = self.engine == "vllm"
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
