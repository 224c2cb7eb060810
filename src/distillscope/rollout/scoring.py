"""A model's scores of the completion positions, on either path, with their own chunk settings.

A model's forward gives one of two classes with the same methods: :class:`LogitScores`, the
completion logits ``[B, T, V]`` (the plain path, small vocabularies and the reference), or
:class:`HiddenScores`, the final hidden states ``[B, T, H]`` and the LM-head weight ``[V, H]``
with their :class:`~distillscope.objectives.ChunkSpec` (the fused path, the default above
:data:`~distillscope.objectives.registry.FUSED_MIN_VOCAB` tokens: no ``[B, T, V]`` tensor
exists, docs/method.md §2 Memory). A teacher reduced to its top k is a :class:`TeacherTopK`.
:class:`ScorePath`, built once per run, decides which class a forward gives. Each class gives
per-token log-probs, so the diagnostics do not depend on the path; :func:`divergence_between`
takes a full-vocabulary divergence between a student's and a teacher's scores on whichever
path they are, and returns the completion's log-probs when its pass gathered them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from distillscope.objectives import ChunkSpec, DivergenceOptions
from distillscope.objectives.divergences import Divergence, divergence_loss, tempered_log_softmax
from distillscope.objectives.fused import TokenLogprobs, fused_divergence
from distillscope.objectives.fused_tokens import (
    draw_from_hidden,
    inverse_cdf_draw,
    token_logprobs_at_temperatures,
    token_logprobs_from_hidden,
)
from distillscope.objectives.topk import (
    student_folded_from_hidden,
    student_folded_from_logits,
    teacher_topk_from_hidden,
    teacher_topk_from_logits,
)
from distillscope.rollout.fast_score import scores_exactly, sequence_hidden
from distillscope.rollout.rollouts import Rollouts


def completion_logits(model: torch.nn.Module, r: Rollouts, role: str) -> torch.Tensor:
    """Logits ``[B, T, V]`` of ``model`` at the positions that predict the completion tokens."""
    ids_B_S, mask_B_S, pos_B_S = r.sequence(role)
    sl = r.completion_logits_slice(role)
    if scores_exactly(model, ids_B_S.shape[1]):
        head = model.get_output_embeddings()
        hidden_B_T_H = sequence_hidden(model, ids_B_S, mask_B_S, pos_B_S, sl.start)
        return F.linear(hidden_B_T_H[:, : sl.stop - sl.start], head.weight, head.bias)
    logits_B_S_V = model(input_ids=ids_B_S, attention_mask=mask_B_S, position_ids=pos_B_S).logits
    return logits_B_S_V[:, sl]


def completion_hidden(model: torch.nn.Module, r: Rollouts, role: str) -> torch.Tensor:
    """Final hidden states ``[B, T, H]`` predicting the completion (the decoder body only).

    The fused objectives apply the LM head chunk by chunk, so full logits never exist. For the
    Llama family (:func:`~distillscope.rollout.fast_score.scores_exactly`) the body runs on the
    real tokens only (:func:`~distillscope.rollout.fast_score.sequence_hidden`; 0 at padding).
    """
    ids_B_S, mask_B_S, pos_B_S = r.sequence(role)
    sl = r.completion_logits_slice(role)
    if scores_exactly(model, ids_B_S.shape[1]):
        return sequence_hidden(model, ids_B_S, mask_B_S, pos_B_S, sl.start)[:, : sl.stop - sl.start]
    out = model.model(input_ids=ids_B_S, attention_mask=mask_B_S, position_ids=pos_B_S)
    return out.last_hidden_state[:, sl]


def _masked_tokens(r: Rollouts) -> torch.Tensor:
    """The completion tokens, 0 where masked (padding ids may lie outside the vocabulary)."""
    return r.completion_B_T.masked_fill(r.completion_mask_B_T == 0, 0)


@dataclass(frozen=True)
class LogitScores:
    """A model's completion logits ``[B, T, V']``, of which the first ``vocab_size`` count."""

    logits_B_T_V: torch.Tensor
    vocab_size: int
    CACHE_FORM = "logits"  # what a rollout-cache key calls this form

    def token_logprobs(
        self, tokens_B_T: torch.Tensor, mask_B_T: torch.Tensor, temperature: float
    ) -> torch.Tensor:
        """log softmax(z / τ)[y] (fp32) of ``tokens_B_T``, 0 where masked; differentiable."""
        logp_B_T_V = tempered_log_softmax(self.logits_B_T_V, temperature, self.vocab_size)
        index_B_T_1 = tokens_B_T.masked_fill(mask_B_T == 0, 0)[..., None]
        logp_B_T = logp_B_T_V.gather(-1, index_B_T_1).squeeze(-1)
        return logp_B_T.masked_fill(mask_B_T == 0, 0.0)

    @torch.no_grad()
    def loss_t_and_t1_logprobs(self, r: Rollouts, temperature: float) -> list[torch.Tensor]:
        """The completion's log-probs at ``temperature`` and at 1.0 (the diagnostics)."""
        tokens_B_T, mask_B_T = r.completion_B_T, r.completion_mask_B_T
        by_tau = {tau: self.token_logprobs(tokens_B_T, mask_B_T, tau) for tau in {temperature, 1.0}}
        return [by_tau[temperature], by_tau[1.0]]

    def folded(
        self, ids_B_T_K: torch.Tensor, mask_B_T: torch.Tensor, temperature: float
    ) -> torch.Tensor:
        """Log-probs folded onto ``ids`` + a tail bin (differentiable;
        :mod:`~distillscope.objectives.topk`)."""
        return student_folded_from_logits(
            self.logits_B_T_V, ids_B_T_K, temperature, self.vocab_size
        )

    @torch.no_grad()
    def draw(
        self, mask_B_T: torch.Tensor, uniforms_B_T: torch.Tensor, temperature: float
    ) -> torch.Tensor:
        """One token per completion position, by inverse CDF from ``uniforms_B_T``."""
        logp_B_T_V = tempered_log_softmax(self.logits_B_T_V, temperature, self.vocab_size)
        tokens_N = inverse_cdf_draw(logp_B_T_V.flatten(0, 1), uniforms_B_T.flatten())
        return tokens_N.view(mask_B_T.shape).masked_fill(mask_B_T == 0, 0)

    @torch.no_grad()
    def topk(self, k: int, r: Rollouts, temperature: float) -> TeacherTopK:
        """These (teacher) scores reduced to their top ``k`` tokens at ``temperature``."""
        ids, folded = teacher_topk_from_logits(self.logits_B_T_V, k, temperature, self.vocab_size)
        return TeacherTopK(ids, folded, *self.loss_t_and_t1_logprobs(r, temperature))

    def to(self, device: torch.device | str) -> LogitScores:
        return replace(self, logits_B_T_V=self.logits_B_T_V.to(device))

    def cloned_to(self, device: torch.device | str) -> LogitScores:
        """A copy on ``device`` that may enter autograd (made outside inference mode)."""
        return replace(self, logits_B_T_V=self.logits_B_T_V.clone().to(device))

    def cache_tensors(self) -> dict[str, torch.Tensor]:
        """What the rollout cache stores of these scores (see :meth:`from_cache`)."""
        return {"": self.logits_B_T_V}

    @classmethod
    def from_cache(cls, tensors: dict[str, torch.Tensor], path: ScorePath, head_V_H=None):
        return cls(tensors[""], path.vocab_size)


@dataclass(frozen=True)
class HiddenScores:
    """A model's final hidden states ``[B, T, H]`` and LM-head weight ``[V', H]``: the loss
    projects them chunk by chunk (``chunks``), so the ``[B, T, V]`` logits never exist."""

    hidden_B_T_H: torch.Tensor
    head_V_H: torch.Tensor
    vocab_size: int
    chunks: ChunkSpec
    CACHE_FORM = "hidden"

    def token_logprobs(
        self, tokens_B_T: torch.Tensor, mask_B_T: torch.Tensor, temperature: float
    ) -> torch.Tensor:
        """log softmax(h Wᵀ / τ)[y] (fp32) of ``tokens_B_T``, 0 where masked; differentiable."""
        return token_logprobs_from_hidden(
            self.hidden_B_T_H,
            self.head_V_H,
            tokens_B_T.masked_fill(mask_B_T == 0, 0),
            mask_B_T,
            temperature=temperature,
            vocab_size=self.vocab_size,
            chunks=self.chunks,
        )

    @torch.no_grad()
    def loss_t_and_t1_logprobs(self, r: Rollouts, temperature: float) -> list[torch.Tensor]:
        """The completion's log-probs at ``temperature`` and at 1.0, from one head pass."""
        return token_logprobs_at_temperatures(
            self.hidden_B_T_H,
            self.head_V_H,
            _masked_tokens(r),
            r.completion_mask_B_T,
            (temperature, 1.0),
            vocab_size=self.vocab_size,
            chunks=self.chunks,
        )

    def folded(
        self, ids_B_T_K: torch.Tensor, mask_B_T: torch.Tensor, temperature: float
    ) -> torch.Tensor:
        """Log-probs folded onto ``ids`` + a tail bin, chunk by chunk (differentiable)."""
        return student_folded_from_hidden(
            self.hidden_B_T_H,
            self.head_V_H,
            ids_B_T_K,
            mask_B_T,
            temperature,
            vocab_size=self.vocab_size,
            chunks=self.chunks,
        )

    @torch.no_grad()
    def draw(
        self, mask_B_T: torch.Tensor, uniforms_B_T: torch.Tensor, temperature: float
    ) -> torch.Tensor:
        """One token per completion position, by inverse CDF from ``uniforms_B_T``."""
        return draw_from_hidden(
            self.hidden_B_T_H,
            self.head_V_H,
            mask_B_T,
            uniforms_B_T,
            temperature=temperature,
            vocab_size=self.vocab_size,
            chunks=self.chunks,
        )

    @torch.no_grad()
    def topk(self, k: int, r: Rollouts, temperature: float) -> TeacherTopK:
        """These (teacher) scores reduced to their top ``k`` tokens: one head pass gives the top
        k and the completion's log-probs."""
        return TeacherTopK(
            *teacher_topk_from_hidden(
                self.hidden_B_T_H,
                self.head_V_H,
                r.completion_mask_B_T,
                k,
                temperature,
                vocab_size=self.vocab_size,
                chunks=self.chunks,
                tokens_B_T=_masked_tokens(r),
            )
        )

    def to(self, device: torch.device | str) -> HiddenScores:
        return replace(
            self, hidden_B_T_H=self.hidden_B_T_H.to(device), head_V_H=self.head_V_H.to(device)
        )

    def cloned_to(self, device: torch.device | str) -> HiddenScores:
        """A copy on ``device`` that may enter autograd; the head is the model's own weight."""
        return replace(
            self,
            hidden_B_T_H=self.hidden_B_T_H.clone().to(device),
            head_V_H=self.head_V_H.to(device),
        )

    def cache_tensors(self) -> dict[str, torch.Tensor]:
        """What the rollout cache stores: the hidden states (the head is the teacher's own)."""
        return {"": self.hidden_B_T_H}

    @classmethod
    def from_cache(cls, tensors: dict[str, torch.Tensor], path: ScorePath, head_V_H=None):
        return cls(tensors[""], head_V_H, path.vocab_size, path.chunks)


@dataclass(frozen=True)
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
    CACHE_FORM = "topk"

    def loss_t_and_t1_logprobs(self, r: Rollouts, temperature: float) -> list[torch.Tensor]:
        """The completion's exact log-probs, recorded before the teacher was reduced."""
        return [self.token_loss_t_B_T, self.token_t1_B_T]

    def to(self, device: torch.device | str) -> TeacherTopK:
        return TeacherTopK(*(getattr(self, name).to(device) for name in self.TENSORS))

    def cache_tensors(self) -> dict[str, torch.Tensor]:
        return {f"/{name}": getattr(self, name) for name in self.TENSORS}

    @classmethod
    def from_cache(cls, tensors: dict[str, torch.Tensor], path: ScorePath, head_V_H=None):
        return cls(*(tensors[f"/{name}"] for name in cls.TENSORS))


Scores = LogitScores | HiddenScores
TeacherScores = LogitScores | HiddenScores | TeacherTopK


@dataclass(frozen=True)
class ScorePath:
    """How the step scores a model's completion: logits (plain) or hidden states + LM head
    (fused, chunked by ``chunks``), over the shared vocabulary of ``vocab_size`` tokens."""

    fused: bool
    chunks: ChunkSpec
    vocab_size: int

    def scores(self, model: torch.nn.Module, r: Rollouts, role: str) -> Scores:
        """``model``'s scores of the completion of ``r`` (differentiable in grad mode)."""
        if not self.fused:
            return LogitScores(completion_logits(model, r, role), self.vocab_size)
        head_V_H = model.get_output_embeddings().weight
        # Autocast leaves bf16 hidden states; the objective casts per chunk, in the head's dtype.
        hidden_B_T_H = completion_hidden(model, r, role).to(head_V_H.dtype)
        return HiddenScores(hidden_B_T_H, head_V_H, self.vocab_size, self.chunks)


def divergence_between(
    divergence: Divergence,
    student: Scores,
    teacher: TeacherScores,
    weight_B_T: torch.Tensor,
    options: DivergenceOptions,
    r: Rollouts,
) -> tuple[torch.Tensor, dict[str, float], TokenLogprobs | None]:
    """The full-vocabulary ``divergence`` between the student's and the teacher's scores of
    ``r``'s completion, reduced with the weights ``weight_B_T`` (the loss mask).

    The teacher's form picks the path: logits → the plain loss
    (:func:`~distillscope.objectives.divergence_loss`); hidden states → the fused loss
    (:func:`~distillscope.objectives.fused_divergence`), whose head pass also gathers both
    models' log-probs of the completion at their loss temperatures and at 1.0 — returned third,
    so the diagnostics need no head pass of their own (None on the other paths); a top-k teacher
    → the divergence between the student folded onto the teacher's top k + tail bin and the
    folded teacher, both folded at their own loss temperature and so read at 1.0
    (docs/method.md §2).
    """
    if isinstance(teacher, HiddenScores):
        return fused_divergence(
            student.hidden_B_T_H,
            student.head_V_H,
            teacher.hidden_B_T_H,
            teacher.head_V_H,
            weight_B_T,
            divergence=divergence,
            options=options,
            chunks=teacher.chunks,
            vocab_size=teacher.vocab_size,
            tokens_B_T=_masked_tokens(r),
        )
    if isinstance(teacher, LogitScores):
        loss, metrics = divergence_loss(
            student.logits_B_T_V,
            teacher.logits_B_T_V,
            weight_B_T,
            divergence=divergence,
            options=options,
            vocab_size=teacher.vocab_size,
        )
        return loss, metrics, None
    folded_B_T_K1 = student.folded(teacher.ids_B_T_K, weight_B_T, options.student_temperature)
    at_one = replace(options, student_temperature=1.0, teacher_temperature=1.0)
    loss, metrics = divergence_loss(
        folded_B_T_K1, teacher.folded_B_T_K1, weight_B_T, divergence=divergence, options=at_one
    )
    top_mass_B_T = teacher.folded_B_T_K1[..., :-1].logsumexp(dim=-1).exp()
    keep_B_T = weight_B_T.bool()
    metrics["objective/teacher_topk_mass"] = (
        float(top_mass_B_T[keep_B_T].mean()) if bool(keep_B_T.any()) else 1.0
    )
    return loss, metrics, None
