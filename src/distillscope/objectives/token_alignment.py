"""Objectives for a teacher whose tokenizer is not the student's (docs/scaling.md "A teacher
with another tokenizer"): the student's and the teacher's tokens of one text are aligned
through their character spans, and the loss compares the two next-token distributions at each
student position.

Alignment (:func:`align_spans`, pure Python on offsets). A token's span ``[a, b)`` is the
characters it adds to the decoded completion; an end-of-completion token has the empty span
``[L, L)`` at the text's end. Student token t aligns to teacher token j(t), the last teacher
token whose span starts at or before a_t (the teacher token that holds the student token's first
character): the teacher predicts it from the text up to c_j ≤ a_t. Position t is *exact* when
the two spans are equal and the tokens are a pair of the shared sub-vocabulary (the token
strings both vocabularies hold, :func:`shared_pairs` in ``teacher/cross_tokenizer.py``).

Per position (``[N, V]`` student, ``[N, W]`` teacher log-probs at their loss temperatures,
fp32 log-softmax of :func:`~.divergences.tempered_log_softmax`):

- ULD, Boizard et al. 2024, "Towards Cross-Tokenizer Distillation: the Universal Logit
  Distillation Loss for LLMs" (arXiv:2402.12030, §3): the Wasserstein-1 distance between the two
  distributions under a uniform transport cost, in closed form after sorting,
  ``D_ULD = Σ_i |p_S↓(i) − p_T↓(i)|`` with p↓ the probabilities sorted in descending order and the
  shorter vector padded with zeros to max(V, W) (:func:`uld_distance`). The paper's full loss
  adds the cross-entropy on the text, λ-weighted; kind ``uld`` is the distance alone, so that
  it is an objective of the same kind as the others here (TRL's GOLD trainer likewise weights
  the two). The paper aligns sequences by index; here positions align through offsets (GOLD).
- Token-aligned KL (:func:`shared_kl`) at exact positions: over the M pairs (s_i, t_i) of the
  shared sub-vocabulary, both distributions restricted and renormalised,
  ``p̃_S(i) = p_S(s_i) / Σ_k p_S(s_k)``, ``p̃_T(i) = p_T(t_i) / Σ_k p_T(t_k)``, and
  forward ``Σ_i p̃_T(i) (log p̃_T(i) − log p̃_S(i))`` or reverse
  ``Σ_i p̃_S(i) (log p̃_S(i) − log p̃_T(i))``. With one shared tokenizer the pairs are the whole
  vocabulary, every position is exact and this is the full-vocabulary KL
  (:mod:`.divergences`). Elsewhere the position's loss is D_ULD (the approximation; GOLD's hybrid
  of a KL on matched tokens and ULD on the others).

:func:`cross_tokenizer_loss` reduces either with the run's reduction; its metrics:
``objective/loss``, ``objective/tokens``, ``objective/uld_distance`` (token mean of D_ULD) and
``objective/aligned_exact_share`` (the exact positions' share of the loss tokens).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from distillscope.objectives.divergences import reduce_tokens, tempered_log_softmax
from distillscope.objectives.options import DivergenceOptions

#: the loss at each position: ULD everywhere, or the shared-vocabulary KL where exact
FORMS = ("uld", "forward", "reverse")

Span = tuple[int, int]


def spans_from_ends(ends: list[int]) -> list[Span]:
    """Spans ``[a_t, b_t)`` of tokens whose decoded prefixes have lengths ``ends`` (b_t = the
    length of the text up to and including token t; a_t = b_{t−1}, a_0 = 0). A prefix that
    decodes shorter than the one before (a partial UTF-8 byte) gives an empty span."""
    spans, start = [], 0
    for end in ends:
        end = max(end, start)
        spans.append((start, end))
        start = end
    return spans


@dataclass(frozen=True)
class Alignment:
    """One row's alignment of T student tokens to U teacher tokens (:func:`align_spans`).

    ``teacher_position``: j(t) for each student token; ``same_span``: whether span_t = span_j(t);
    ``owner``: for each teacher token j, the student token in which it ends (module docstring).
    """

    teacher_position: list[int]
    same_span: list[bool]
    owner: list[int]


def align_spans(student: list[Span], teacher: list[Span]) -> Alignment:
    """j(t) = the teacher token of the same span when there is one, else the last teacher
    token with start ≤ a_t (0 when none); same_span where span_j(t) = span_t; owner(j) = the
    first student token t with b_t ≥ d_j (the one holding teacher token j's last character),
    and for an empty teacher span the student token of the same empty span when there is one
    (end of completion meets end of completion)."""
    if not student or not teacher:
        raise ValueError("align_spans needs at least one student and one teacher token")
    starts_t = [c for c, _ in teacher]
    position = [max(bisect.bisect_right(starts_t, a) - 1, 0) for a, _ in student]
    # among teacher tokens that start at a_t, prefer the one whose span equals the student's
    by_span = {span: j for j, span in enumerate(teacher)}
    position = [by_span.get(span, j) for span, j in zip(student, position, strict=True)]
    same = [teacher[j] == span for span, j in zip(student, position, strict=True)]
    ends_s = [b for _, b in student]
    owner = []
    for c, d in teacher:
        t = bisect.bisect_left(ends_s, d)  # first student token ending at or after d
        if c == d:  # an empty span (end of completion): the student token with that span
            t = next((k for k, span in enumerate(student) if span == (c, d)), t)
        owner.append(min(t, len(student) - 1))
    return Alignment(position, same, owner)


def uld_distance(logp_student_N_V: torch.Tensor, logp_teacher_N_W: torch.Tensor) -> torch.Tensor:
    """D_ULD per position ``[N]``: Σ_i |p_S↓(i) − p_T↓(i)|, the sorted probability vectors
    padded with zeros to max(V, W) (Boizard et al. 2024, §3; module docstring).
    Differentiable in the student (the sort's values carry the gradient)."""
    p_s_N_V = logp_student_N_V.exp().sort(dim=-1, descending=True).values
    p_t_N_W = logp_teacher_N_W.exp().sort(dim=-1, descending=True).values
    width = max(p_s_N_V.shape[-1], p_t_N_W.shape[-1])
    p_s_N_X = F.pad(p_s_N_V, (0, width - p_s_N_V.shape[-1]))
    p_t_N_X = F.pad(p_t_N_W, (0, width - p_t_N_W.shape[-1]))
    return (p_s_N_X - p_t_N_X).abs().sum(dim=-1)


def shared_kl(
    logp_student_N_V: torch.Tensor,
    logp_teacher_N_W: torch.Tensor,
    pairs_student_M: torch.Tensor,
    pairs_teacher_M: torch.Tensor,
    form: str,
) -> torch.Tensor:
    """KL on the shared sub-vocabulary per position ``[N]``: both distributions restricted to
    the M pairs (s_i, t_i) and renormalised, then forward Σ p̃_T log(p̃_T / p̃_S) or reverse
    Σ p̃_S log(p̃_S / p̃_T) (``form``; module docstring)."""
    lp_s_N_M = logp_student_N_V.index_select(-1, pairs_student_M)
    lp_t_N_M = logp_teacher_N_W.index_select(-1, pairs_teacher_M)
    lp_s_N_M = lp_s_N_M - lp_s_N_M.logsumexp(dim=-1, keepdim=True)
    lp_t_N_M = lp_t_N_M - lp_t_N_M.logsumexp(dim=-1, keepdim=True)
    if form == "forward":
        return (lp_t_N_M.exp() * (lp_t_N_M - lp_s_N_M)).sum(dim=-1)
    if form == "reverse":
        return (lp_s_N_M.exp() * (lp_s_N_M - lp_t_N_M)).sum(dim=-1)
    raise ValueError(f"shared_kl form must be forward or reverse, got {form!r}")


def cross_tokenizer_loss(
    student_logits_B_T_V: torch.Tensor,
    teacher_logits_B_T_W: torch.Tensor,
    exact_B_T: torch.Tensor,
    pairs_M_2: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    form: str,
    options: DivergenceOptions,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The cross-tokenizer objective on one batch, reduced (module docstring).

    Args:
        student_logits_B_T_V: the student's logits at its completion positions.
        teacher_logits_B_T_W: the teacher's logits at the aligned position j(t) of each student
            position (detached here).
        exact_B_T: True where position t is exact (same span, a shared-vocabulary pair).
        pairs_M_2: the shared sub-vocabulary, rows (student id, teacher id).
        mask_B_T: the loss mask (or per-token weights), as :func:`~.divergences.reduce_tokens`.
        form: ``uld`` (D_ULD everywhere), ``forward`` or ``reverse`` (the shared KL where exact,
            D_ULD elsewhere).
        options: the loss temperatures and the reduction.

    Returns:
        ``(loss, metrics)``: a scalar fp32 loss and the four metrics of the module docstring.
    """
    if form not in FORMS:
        raise ValueError(f"cross_tokenizer_loss form must be one of {', '.join(FORMS)}")
    if student_logits_B_T_V.shape[:-1] != teacher_logits_B_T_W.shape[:-1]:
        raise ValueError(
            f"student logits {tuple(student_logits_B_T_V.shape)} and aligned teacher logits "
            f"{tuple(teacher_logits_B_T_W.shape)} must cover the same (B, T) positions"
        )
    o = options
    logp_s_B_T_V = tempered_log_softmax(student_logits_B_T_V, o.student_temperature)
    logp_t_B_T_W = tempered_log_softmax(teacher_logits_B_T_W.detach(), o.teacher_temperature)
    uld_B_T = uld_distance(logp_s_B_T_V, logp_t_B_T_W)
    per_token_B_T = uld_B_T
    if form != "uld":
        kl_B_T = shared_kl(logp_s_B_T_V, logp_t_B_T_W, pairs_M_2[:, 0], pairs_M_2[:, 1], form)
        per_token_B_T = torch.where(exact_B_T, kl_B_T, uld_B_T)
    loss = reduce_tokens(per_token_B_T, mask_B_T, o.reduction)
    keep_B_T = mask_B_T.bool()
    values = torch.stack(
        [
            loss.detach(),
            reduce_tokens(uld_B_T.detach(), keep_B_T, "token_mean"),
            (exact_B_T & keep_B_T).sum() / keep_B_T.sum().clamp_min(1),  # a ratio of counts
            keep_B_T.sum().float(),
        ]
    ).tolist()  # one device→host transfer
    keys = ("objective/loss", "objective/uld_distance", "objective/aligned_exact_share")
    return loss, {**dict(zip(keys, values[:3], strict=True)), "objective/tokens": values[3]}
