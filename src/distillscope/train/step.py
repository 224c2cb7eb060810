"""What one training step computes from the scores: the configured objective, per micro-batch.

:class:`Objective` resolves ``objective.*`` once per run — the kind's registry entry
(:data:`distillscope.objectives.OBJECTIVES`), its typed options and the scoring path;
:func:`objective_loss` feeds the entry's loss from the score objects of
:mod:`distillscope.rollout.scoring` (what it passes depends only on the entry's ``inputs``) and
returns, beside the loss, the completion log-probs its pass gathered, which
:func:`diagnostic_logprobs` passes on instead of scoring again; OPD's later updates of a rollout
batch reuse its first update's advantage (:class:`FixedAdvantage`); with several teachers,
:func:`teacher_losses` gives each one's loss on its rows. The micro-batches are
:func:`~distillscope.rollout.rollouts.micro_batches`'.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from distillscope.config import ObjectiveConfig
from distillscope.objectives import OBJECTIVES, DivergenceOptions, ObjectiveKind, OPDOptions
from distillscope.objectives.divergences import check_options, truncated_is_weight
from distillscope.objectives.fused import TokenLogprobs
from distillscope.objectives.registry import FUSED_MIN_VOCAB
from distillscope.objectives.topk import check_topk
from distillscope.rollout.rollouts import MicroBatch, Rollouts
from distillscope.rollout.scoring import ScorePath, Scores, TeacherScores, divergence_between


def use_fused(cfg: ObjectiveConfig, vocab_size: int) -> bool:
    """Whether the loss is computed from hidden states: ``objective.path``, auto by V."""
    if cfg.path != "auto":
        return cfg.path == "fused"
    return vocab_size > FUSED_MIN_VOCAB or cfg.chunk_size > 0


def micro_batch_share(mask_B_T: torch.Tensor, index_b: torch.Tensor, reduction: str) -> float:
    """Weight of the rows ``index_b``'s own reduced loss in the whole batch's loss.

    loss(batch) = Σ_k share_k · loss(micro-batch k) exactly, for any split of the rows:
    seq_mean: share = S_k / S (rows with ≥ 1 masked token); token_mean: share = N_k / N
    (masked tokens); sum: share = 1. Zero when the batch or micro-batch has nothing to count.
    """
    check_options(reduction)
    if reduction == "sum":
        return 1.0
    m_B_T = mask_B_T.bool()
    counts_B = m_B_T.sum(dim=-1) if reduction == "token_mean" else m_B_T.any(dim=-1)
    total = float(counts_B.sum())
    return float(counts_B[index_b].sum()) / total if total > 0 else 0.0


@dataclass(frozen=True)
class Objective:
    """The configured objective, resolved once per run: the kind's registry entry, its typed
    options, the scoring path and the top-k reduction of the teacher (0 = none)."""

    kind: ObjectiveKind
    options: DivergenceOptions  # loss temperatures, reduction, weights
    opd: OPDOptions
    path: ScorePath
    teacher_topk: int = 0
    #: C of the truncated importance weight on engine-sampled rollouts; None = no weight
    engine_is_cap: float | None = None

    @classmethod
    def from_config(
        cls, cfg: ObjectiveConfig, vocab_size: int, engine_is_cap: float | None = None
    ) -> Objective:
        """The objective of ``cfg`` over ``vocab_size`` tokens; a top k ≥ V is refused.

        ``engine_is_cap`` C weights each token's loss by min(π_train / π_engine, C) on rollouts
        an external engine sampled (:func:`loss_mask`)."""
        if cfg.teacher_topk:
            check_topk(cfg.teacher_topk, vocab_size)
        path = ScorePath(use_fused(cfg, vocab_size), cfg.chunks(), vocab_size)
        return cls(
            OBJECTIVES[cfg.kind],
            cfg.divergence_options(),
            cfg.opd_options(),
            path,
            cfg.teacher_topk,
            engine_is_cap,
        )


def loss_mask(r: Rollouts, engine_is_cap: float | None) -> torch.Tensor:
    """The mask the loss reduces over: the completion mask, times the truncated importance
    weight min(π_train(y) / π_engine(y), C) where an external engine sampled ``r`` and a cap C
    is set (π_train: the trainer's ``logp_behavior_B_T``, π_engine: ``logp_engine_B_T``)."""
    if engine_is_cap is None or r.logp_engine_B_T is None:
        return r.completion_mask_B_T
    weight_B_T = truncated_is_weight(r.logp_behavior_B_T, r.logp_engine_B_T, engine_is_cap)
    return r.completion_mask_B_T * weight_B_T


@dataclass(frozen=True)
class FixedAdvantage:
    """OPD's advantage inputs on a rollout batch, fixed over its ``objective.updates_per_batch``
    updates (PPO: the advantage is the sampling policy's, only the ratio r_t moves).

    log π_T(y_t) and log π_old(y_t) at the loss temperatures, ``[B, T]`` each, as the batch's
    first update scored them (:func:`diagnostic_logprobs`'s ``teacher_loss_t``/``student_loss_t``).
    """

    logp_teacher_B_T: torch.Tensor
    logp_old_B_T: torch.Tensor

    @classmethod
    def from_diagnostics(cls, logp_B_T: dict[str, torch.Tensor]) -> FixedAdvantage:
        """From the whole batch's :func:`diagnostic_logprobs` of the first update."""
        return cls(logp_B_T["teacher_loss_t"], logp_B_T["student_loss_t"])

    def rows(self, index_b: torch.Tensor) -> FixedAdvantage:
        """These rows of the batch (a micro-batch's)."""
        return FixedAdvantage(self.logp_teacher_B_T[index_b], self.logp_old_B_T[index_b])


def objective_loss(
    objective: Objective,
    student: Scores,
    teacher: TeacherScores | None,
    r: Rollouts,
    uniforms_B_T: torch.Tensor | None = None,
    advantage: FixedAdvantage | None = None,
) -> tuple[torch.Tensor, dict[str, float], TokenLogprobs | None]:
    """The objective on one micro-batch: ``(loss, metrics, gathered)``; ``uniforms_B_T`` feeds
    the sampled estimators.

    What the kind's loss reads depends on its entry's ``inputs`` (registry docstring): the two
    models' full scores (:func:`~distillscope.rollout.scoring.divergence_between`: the teacher's
    scores pick the path, or fold the student onto a top-k teacher), per-token log-probs of the
    rollout's own tokens (OPD), or of one token per position drawn from ``draws_from`` (the sampled
    estimators). The teacher is a constant. OPD's advantage Δℓ = log π_T − log π_S is that of this
    forward on a batch's first update (``advantage`` None), else ``advantage``'s (``teacher`` is
    then not read). ``gathered``: the completion's log-probs a fused full-vocabulary pass computed
    on the way (None otherwise), for :func:`diagnostic_logprobs`.
    """
    kind, o, mask_B_T = objective.kind, objective.options, r.completion_mask_B_T
    weight_B_T = loss_mask(r, objective.engine_is_cap)  # the mask the loss reduces over
    if kind.inputs == "logits":
        return divergence_between(kind.load(), student, teacher, weight_B_T, o, r)
    if kind.inputs == "cross_tokenizer":  # the teacher's aligned scores compute the loss
        return *teacher.loss(kind.load(), student, weight_B_T, o), None
    loss = kind.load()
    tau_s, tau_t = o.student_temperature, o.teacher_temperature
    if kind.inputs == "rollout_tokens":  # OPD: advantage log π_T − log π_S of the rollout
        tokens_B_T = r.completion_B_T
        logp_B_T = student.token_logprobs(tokens_B_T, mask_B_T, tau_s)
        if advantage is None:
            logp_teacher_B_T = teacher.token_logprobs(tokens_B_T, mask_B_T, tau_t).detach()
        else:
            logp_teacher_B_T = advantage.logp_teacher_B_T
        return *loss(
            logp_B_T,
            logp_teacher_B_T,
            r.logp_behavior_B_T,
            weight_B_T,
            options=objective.opd,
            reduction=o.reduction,
            logp_student_fixed_B_T=None if advantage is None else advantage.logp_old_B_T,
        ), None
    # drawn tokens: y' ~ π_T or π_S, one per position, by inverse CDF from the step's uniforms
    sampler, tau = (teacher, tau_t) if kind.draws_from == "teacher" else (student, tau_s)
    tokens_B_T = sampler.draw(mask_B_T, uniforms_B_T, tau)
    return *loss(
        student.token_logprobs(tokens_B_T, mask_B_T, tau_s),
        teacher.token_logprobs(tokens_B_T, mask_B_T, tau_t).detach(),
        weight_B_T,
        reduction=o.reduction,
    ), None


@torch.no_grad()
def diagnostic_logprobs(
    objective: Objective,
    student: Scores,
    teacher: TeacherScores,
    r: Rollouts,
    gathered: TokenLogprobs | None = None,
) -> dict[str, torch.Tensor]:
    """Completion-token log-probs the diagnostics read: both models at the loss temperatures
    (k1/k2/k3 and the forward-KL estimators) and at 1.0 (likelihoods), ``[B, T]`` each.

    ``gathered``: what :func:`objective_loss` returned third for these scores and ``r`` (the
    fused pass's own log-probs of the completion, no head pass here); None scores each model.
    """
    if gathered is not None:
        return {
            "student_loss_t": gathered.student_B_T,
            "student_t1": gathered.student_t1_B_T,
            "teacher_loss_t": gathered.teacher_B_T,
            "teacher_t1": gathered.teacher_t1_B_T,
        }
    o = objective.options
    out = {}
    for role, scores, tau in (
        ("student", student, o.student_temperature),
        ("teacher", teacher, o.teacher_temperature),
    ):
        out[f"{role}_loss_t"], out[f"{role}_t1"] = scores.loss_t_and_t1_logprobs(r, tau)
    return out


@torch.no_grad()
def teacher_losses(
    objective: Objective,
    student,
    teacher: TeacherScores | None,
    batch_mask_B_T: torch.Tensor,
    route: list[str],
    micro: MicroBatch,
    uniforms_B_T: torch.Tensor | None = None,
    advantage=None,
) -> dict[str, float]:
    """``teacher/<name>/loss`` of one micro-batch: the objective on its rows routed to
    ``name`` (the others masked), times the micro-batch's share of the loss normaliser of
    ``name``'s rows of the whole batch (``batch_mask_B_T``) — summed over the micro-batches,
    the loss of a batch of ``name``'s rows alone. No gradient; one extra loss per teacher."""
    r, index_b = micro.rollouts, micro.index_b
    reduction, out = objective.options.reduction, {}
    device = batch_mask_B_T.device
    for name in dict.fromkeys(route):
        whole_B = torch.tensor([n == name for n in route], device=device)
        share = micro_batch_share(batch_mask_B_T * whole_B[:, None], index_b, reduction)
        rows_B = whole_B[index_b.to(device)]
        if not bool(rows_B.any()):  # every rank logs every key: 0 where it has no row
            out[f"teacher/{name}/loss"] = 0.0
            continue
        own = replace(r, completion_mask_B_T=r.completion_mask_B_T * rows_B[:, None])
        loss, _, _ = objective_loss(objective, student, teacher, own, uniforms_B_T, advantage)
        out[f"teacher/{name}/loss"] = float(loss) * share
    return out
