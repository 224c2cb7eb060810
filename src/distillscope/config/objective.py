"""``objective`` and ``optim``: the token-level loss the student minimises (the kinds of
:mod:`distillscope.objectives.registry`) and the AdamW steps that minimise it.

A divergence's weights (jsd's β, the mixture's α) are :class:`~distillscope.objectives.Weight` s
that its registry entry names; their ``objective.*`` fields are generated from
:data:`~distillscope.objectives.registry.WEIGHTS` between the loss settings and the path, where
they sat when they were written by hand: a run id hashes the dumped config in field order
(``study.spec.run_id``), so the order stays (tests/study/test_study_spec.py pins it).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, create_model, field_validator, model_validator

from distillscope.config.section import Float, Int, _Section
from distillscope.objectives.options import (
    DEFAULT_MEMORY_BUDGET_MB,
    ChunkSpec,
    DivergenceOptions,
    OPDOptions,
    Reduction,
    Regulation,
)
from distillscope.objectives.registry import FUSED_MIN_VOCAB, OBJECTIVES, WEIGHTS

_OPD = OPDOptions()  # the OPD fields' defaults


class _LossSettings(_Section):
    """The objective's first fields: the kind, the loss temperatures and the reduction."""

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


#: the loss settings, then one field per declared divergence weight (registry ``WEIGHTS``)
_WeightedLoss = create_model(
    "_WeightedLoss",
    __base__=_LossSettings,
    __module__=__name__,
    **{
        name: (Float, Field(w.default, ge=0, le=1, description=f"{kind}: {w.description}"))
        for name, (kind, w) in WEIGHTS.items()
    },
)


class ObjectiveConfig(_WeightedLoss):
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
        # (its weights, the OPD options) is refused under the others; teacher_topk needs a
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
        """The loss temperatures, the reduction and every declared weight, as the divergences
        take them."""
        return DivergenceOptions(
            student_temperature=self.student_temperature,
            teacher_temperature=self.teacher_temperature,
            reduction=self.reduction,
            weights={name: getattr(self, name) for name in WEIGHTS},
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
