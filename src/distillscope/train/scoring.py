"""From an ``ObjectiveConfig`` to a call of the pure objective it names, on either path.

A model's forward gives :class:`Scores`: the completion logits ``[B, T, V]`` (the plain path,
small vocabularies and the reference) or the final hidden states ``[B, T, H]`` and the LM-head
weight ``[V, H]`` (the fused path, the default above
:data:`~distillscope.objectives.registry.FUSED_MIN_VOCAB` tokens: no ``[B, T, V]`` tensor
exists, docs/method.md §2 Memory). The kind's entry in
:data:`distillscope.objectives.OBJECTIVES` says which function to call on each path; the
diagnostics read per-token log-probs, which both paths give, so their metrics agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from distillscope.config import ObjectiveConfig
from distillscope.objectives import (
    OBJECTIVES,
    draw_from_hidden,
    fused_divergence,
    inverse_cdf_draw,
    opd_from_logprobs,
    sampled_token_loss,
    token_logprobs_at_temperatures,
    token_logprobs_from_hidden,
)
from distillscope.objectives.divergences import check_options
from distillscope.objectives.registry import FUSED_MIN_VOCAB
from distillscope.objectives.topk import (
    student_folded_from_hidden,
    student_folded_from_logits,
    teacher_topk_from_hidden,
    teacher_topk_from_logits,
)
from distillscope.rollout import Rollouts, tempered_logprobs

_DIRECTION = {"forward_sampled": "forward", "reverse_sampled": "reverse"}


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


@dataclass
class Scores:
    """One model's scores of the completion positions: logits, or hidden states + LM head."""

    logits_B_T_V: torch.Tensor | None = None
    hidden_B_T_H: torch.Tensor | None = None
    head_V_H: torch.Tensor | None = None

    @property
    def fused(self) -> bool:
        return self.logits_B_T_V is None

    def token_logprobs(
        self, cfg: ObjectiveConfig, r: Rollouts, temperature: float, vocab_size: int, tokens=None
    ) -> torch.Tensor:
        """log softmax(z / τ)[y] (fp32) of ``tokens`` (default: the completion), 0 where masked.

        Differentiable in grad mode; on the fused path chunk by chunk from hidden states.
        """
        tokens_B_T = r.completion_B_T if tokens is None else tokens
        mask_B_T = r.completion_mask_B_T
        if self.fused:
            return token_logprobs_from_hidden(
                self.hidden_B_T_H,
                self.head_V_H,
                tokens_B_T.masked_fill(mask_B_T == 0, 0),
                mask_B_T,
                temperature=temperature,
                vocab_size=vocab_size,
                memory_budget_mb=cfg.memory_budget_mb,
                chunk_size=cfg.chunk_size or None,
            )
        logp_B_T_V = tempered_logprobs(self.logits_B_T_V[..., :vocab_size], temperature)
        index_B_T_1 = tokens_B_T.masked_fill(mask_B_T == 0, 0)[..., None]
        logp_B_T = logp_B_T_V.gather(-1, index_B_T_1).squeeze(-1)
        return logp_B_T.masked_fill(mask_B_T == 0, 0.0)

    @torch.no_grad()
    def token_logprobs_at(
        self, cfg: ObjectiveConfig, r: Rollouts, temperatures: tuple[float, ...], vocab_size: int
    ) -> list[torch.Tensor]:
        """The completion's log-probs at each temperature (one head pass on the fused path)."""
        if not self.fused:
            by_tau = {
                tau: self.token_logprobs(cfg, r, tau, vocab_size) for tau in set(temperatures)
            }
            return [by_tau[tau] for tau in temperatures]
        return token_logprobs_at_temperatures(
            self.hidden_B_T_H,
            self.head_V_H,
            r.completion_B_T.masked_fill(r.completion_mask_B_T == 0, 0),
            r.completion_mask_B_T,
            temperatures,
            vocab_size=vocab_size,
            memory_budget_mb=cfg.memory_budget_mb,
            chunk_size=cfg.chunk_size or None,
        )

    def folded(
        self, cfg: ObjectiveConfig, r: Rollouts, ids_B_T_K: torch.Tensor, vocab_size: int
    ) -> torch.Tensor:
        """Log-probs at the student temperature folded onto ``ids`` + a tail bin (differentiable;
        :mod:`distillscope.objectives.topk`)."""
        tau = cfg.student_temperature
        if not self.fused:
            return student_folded_from_logits(self.logits_B_T_V, ids_B_T_K, tau, vocab_size)
        return student_folded_from_hidden(
            self.hidden_B_T_H,
            self.head_V_H,
            ids_B_T_K,
            r.completion_mask_B_T,
            tau,
            vocab_size=vocab_size,
            memory_budget_mb=cfg.memory_budget_mb,
            chunk_size=cfg.chunk_size or None,
        )

    @torch.no_grad()
    def draw(
        self,
        cfg: ObjectiveConfig,
        r: Rollouts,
        uniforms_B_T: torch.Tensor,
        temperature: float,
        vocab_size: int,
    ) -> torch.Tensor:
        """One token per completion position, by inverse CDF from ``uniforms_B_T``."""
        mask_B_T = r.completion_mask_B_T
        if self.fused:
            return draw_from_hidden(
                self.hidden_B_T_H,
                self.head_V_H,
                mask_B_T,
                uniforms_B_T,
                temperature=temperature,
                vocab_size=vocab_size,
                memory_budget_mb=cfg.memory_budget_mb,
                chunk_size=cfg.chunk_size or None,
            )
        logp_B_T_V = tempered_logprobs(self.logits_B_T_V[..., :vocab_size], temperature)
        tokens_N = inverse_cdf_draw(logp_B_T_V.flatten(0, 1), uniforms_B_T.flatten())
        return tokens_N.view(mask_B_T.shape).masked_fill(mask_B_T == 0, 0)


@dataclass
class TeacherTopK:
    """The teacher's scores reduced to its top k (``objective.teacher_topk``): ids ``[B, T, k]``,
    folded log-probs ``[B, T, k + 1]`` at the loss temperature, and its exact log-probs of the
    completion tokens at the loss temperature and at 1.0 (the diagnostics), ``[B, T]`` each.
    """

    ids_B_T_K: torch.Tensor
    folded_B_T_K1: torch.Tensor
    token_loss_t_B_T: torch.Tensor
    token_t1_B_T: torch.Tensor

    TENSORS = ("ids_B_T_K", "folded_B_T_K1", "token_loss_t_B_T", "token_t1_B_T")

    def tensors(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name) for name in self.TENSORS}

    def to(self, device: torch.device | str) -> TeacherTopK:
        return TeacherTopK(*(getattr(self, name).to(device) for name in self.TENSORS))


@torch.no_grad()
def teacher_topk(
    cfg: ObjectiveConfig, teacher: Scores, r: Rollouts, vocab_size: int
) -> TeacherTopK:
    """The teacher's :class:`Scores` reduced to its top ``cfg.teacher_topk`` tokens."""
    k, tau = cfg.teacher_topk, cfg.teacher_temperature
    if teacher.fused:  # one head pass for the top k and the completion's log-probs
        tokens_B_T = r.completion_B_T.masked_fill(r.completion_mask_B_T == 0, 0)
        return TeacherTopK(
            *teacher_topk_from_hidden(
                teacher.hidden_B_T_H,
                teacher.head_V_H,
                r.completion_mask_B_T,
                k,
                tau,
                vocab_size=vocab_size,
                memory_budget_mb=cfg.memory_budget_mb,
                chunk_size=cfg.chunk_size or None,
                tokens_B_T=tokens_B_T,
            )
        )
    ids, folded = teacher_topk_from_logits(teacher.logits_B_T_V, k, tau, vocab_size)
    loss_t, t1 = teacher.token_logprobs_at(cfg, r, (tau, 1.0), vocab_size)
    return TeacherTopK(ids, folded, loss_t, t1)


def _topk_loss(
    cfg: ObjectiveConfig, student: Scores, teacher: TeacherTopK, r: Rollouts, vocab_size: int
) -> tuple[torch.Tensor, dict[str, float]]:
    """The configured divergence between the folded student and the folded teacher."""
    kind = OBJECTIVES[cfg.kind]
    options = {name: getattr(cfg, name) for name in kind.options}
    options.update(student_temperature=1.0, teacher_temperature=1.0)  # folded at their own τ
    mask_B_T = r.completion_mask_B_T
    folded_B_T_K1 = student.folded(cfg, r, teacher.ids_B_T_K, vocab_size)
    loss, metrics = kind.loss(folded_B_T_K1, teacher.folded_B_T_K1, mask_B_T, **options)
    top_mass_B_T = teacher.folded_B_T_K1[..., :-1].logsumexp(dim=-1).exp()
    keep_B_T = mask_B_T.bool()
    metrics["objective/teacher_topk_mass"] = (
        float(top_mass_B_T[keep_B_T].mean()) if bool(keep_B_T.any()) else 1.0
    )
    return loss, metrics


def objective_loss(
    cfg: ObjectiveConfig,
    student: Scores,
    teacher: Scores | TeacherTopK,
    rollouts: Rollouts,
    vocab_size: int,
    uniforms_B_T: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The configured objective on one micro-batch; ``uniforms_B_T`` feeds sampled estimators.

    Full-vocabulary kinds call the plain divergence on logits or
    :func:`~distillscope.objectives.fused_divergence` on hidden states; OPD and the sampled
    estimators share one body on per-token log-probs, from logits or from hidden states. A
    :class:`TeacherTopK` teacher (``objective.teacher_topk``) gives the folded divergence.
    """
    if isinstance(teacher, TeacherTopK):
        return _topk_loss(cfg, student, teacher, rollouts, vocab_size)
    kind = OBJECTIVES[cfg.kind]
    options = {name: getattr(cfg, name) for name in kind.options}
    mask_B_T = rollouts.completion_mask_B_T
    if kind.full_vocabulary:
        if not student.fused:
            return kind.loss(
                student.logits_B_T_V,
                teacher.logits_B_T_V,
                mask_B_T,
                vocab_size=vocab_size,
                **options,
            )
        return fused_divergence(
            student.hidden_B_T_H,
            student.head_V_H,
            teacher.hidden_B_T_H,
            teacher.head_V_H,
            mask_B_T,
            divergence=cfg.kind,
            memory_budget_mb=cfg.memory_budget_mb,
            chunk_size=cfg.chunk_size or None,
            vocab_size=vocab_size,
            **options,
        )
    tau_s, tau_t = cfg.student_temperature, cfg.teacher_temperature
    if kind.inputs == "sampled_tokens":  # OPD: advantage log π_T − log π_S of the rollout
        options.pop("student_temperature")
        return opd_from_logprobs(
            student.token_logprobs(cfg, rollouts, tau_s, vocab_size),
            teacher.token_logprobs(cfg, rollouts, tau_t, vocab_size).detach(),
            rollouts.logp_behavior_B_T,
            mask_B_T,
            **options,
        )
    # sampled estimators: y' ~ π_T (forward) or π_S (reverse), one per position
    direction = _DIRECTION[cfg.kind]
    sampler, tau = (teacher, tau_t) if direction == "forward" else (student, tau_s)
    tokens_B_T = sampler.draw(cfg, rollouts, uniforms_B_T, tau, vocab_size)
    return sampled_token_loss(
        student.token_logprobs(cfg, rollouts, tau_s, vocab_size, tokens_B_T),
        teacher.token_logprobs(cfg, rollouts, tau_t, vocab_size, tokens_B_T).detach(),
        mask_B_T,
        direction,
        cfg.reduction,
    )


@torch.no_grad()
def diagnostic_logprobs(
    cfg: ObjectiveConfig,
    student: Scores,
    teacher: Scores | TeacherTopK,
    r: Rollouts,
    vocab_size: int,
) -> dict[str, torch.Tensor]:
    """Completion-token log-probs the diagnostics read: both models at the loss temperatures
    (k1/k2/k3 and the forward-KL estimators) and at 1.0 (likelihoods), ``[B, T]`` each."""
    out = {}
    for role, scores, tau in (
        ("student", student, cfg.student_temperature),
        ("teacher", teacher, cfg.teacher_temperature),
    ):
        if isinstance(scores, TeacherTopK):  # exact, recorded before the teacher was reduced
            loss_t, t1 = scores.token_loss_t_B_T, scores.token_t1_B_T
        else:
            loss_t, t1 = scores.token_logprobs_at(cfg, r, (tau, 1.0), vocab_size)
        out[f"{role}_loss_t"], out[f"{role}_t1"] = loss_t, t1
    return out
