"""A teacher whose tokenizer is not the student's (``objective.kind`` uld, aligned_forward_kl or
aligned_reverse_kl; docs/scaling.md "A teacher with another tokenizer").

Each side scores the other's text after re-tokenising it:

- OnPD (``rollout.policy=student``): the student samples in its tokens; :meth:`score` decodes
  each completion, re-tokenises the text with the teacher's tokenizer, runs the teacher on its
  own prompt ⧺ that completion, and returns its logits at the position aligned to each student
  position (:class:`AlignedTeacher`, alignment by character spans,
  :func:`~distillscope.objectives.token_alignment.align_spans`);
- OffPD (``rollout.policy=teacher``): the teacher samples in its own tokens from its own prompt
  (:meth:`rollouts`); the text is re-tokenised for the student, which trains on it, and the
  teacher's scores come as for OnPD (the teacher scores the student's tokens of its text).

The teacher's prompt is encoded by its own tokenizer (:class:`CrossTokenizerPrompts`). The
shared sub-vocabulary (:func:`shared_pairs`) is built once per run. A token's span comes from
decoding the prefix that ends with it (:func:`decoded_ends`: O(T²) token decodes per row, in
the tokenizers' Rust decoder). Memory: the teacher's logits of one micro-batch ``[B, U, W]``
(U its tokens of the completion) and the aligned copy ``[B, T, W]`` (fp32), besides the
student's ``[B, T, V]``: this path has no fused, chunked form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from distillscope.config import RunConfig
from distillscope.models import resolve_model_path
from distillscope.models.load import ModelPair, load_model, pair_options
from distillscope.models.precision import forward_precision
from distillscope.models.vocab import stop_token_ids
from distillscope.objectives.divergences import tempered_log_softmax
from distillscope.objectives.options import DivergenceOptions
from distillscope.objectives.token_alignment import align_spans, spans_from_ends
from distillscope.rollout.policy_registry import ROLLOUT_POLICIES
from distillscope.rollout.prompts import PromptEncoder, Stream, model_generator
from distillscope.rollout.rollouts import MicroBatch, PromptBatch, Rollouts, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.rollout.scoring import HiddenScores, Scores, completion_logits
from distillscope.teacher.checks import cross_tokenizer_refusal
from distillscope.teacher.scorer import Objective, OneTeacher


def load_cross_tokenizer_pair(cfg: RunConfig) -> ModelPair:
    """Teacher and student, each with its own tokenizer (not checked to match), teacher frozen;
    ``vocab_size`` and ``stop_ids`` are the student's (the rollouts' tokens are the student's)."""
    m, options = cfg.model, pair_options(cfg.model)
    own = {"dtype": options.pop("teacher_dtype"), "device": options.pop("teacher_device")}
    teacher, teacher_tok = load_model(resolve_model_path(m.teacher), **{**options, **own})
    student, student_tok = load_model(resolve_model_path(m.student), **options)
    teacher.eval()
    teacher.requires_grad_(False)
    return ModelPair(
        teacher=teacher,
        student=student,
        tokenizer=student_tok,
        vocab_size=len(student_tok),
        teacher_tokenizer=teacher_tok,
        stop_ids=stop_token_ids((student_tok,), (student,)),
    )


@dataclass
class CrossTokenizerPrompts(PromptEncoder):
    """The run's prompts, the teacher's always encoded by its own tokenizer (its ids are not the
    student's even when the two prompts read the same text)."""

    @property
    def teacher_prompt_differs(self) -> bool:
        return True


def token_strings(tokenizer) -> dict[str, int]:
    """Each non-special token's decoded string → its id, for strings that one id alone decodes
    to (ambiguous strings, empty ones and partial UTF-8 bytes are left out)."""
    special = set(tokenizer.all_special_ids)
    seen: dict[str, list[int]] = {}
    for i in range(len(tokenizer)):
        if i in special:
            continue
        text = tokenizer.decode([i])
        if text and "\ufffd" not in text:
            seen.setdefault(text, []).append(i)
    return {text: ids[0] for text, ids in seen.items() if len(ids) == 1}


def shared_pairs(student_tok, teacher_tok) -> torch.Tensor:
    """The shared sub-vocabulary ``[M, 2]`` (student id, teacher id), by student id: every id
    when the token→id maps are equal, else the token strings both hold
    (:func:`token_strings`) and the two eos tokens (end of completion on both sides)."""
    if student_tok.get_vocab() == teacher_tok.get_vocab():
        ids = torch.arange(len(student_tok))
        return torch.stack([ids, ids], dim=1)
    by_text = token_strings(teacher_tok)
    pairs = {s: by_text[text] for text, s in token_strings(student_tok).items() if text in by_text}
    pairs[student_tok.eos_token_id] = teacher_tok.eos_token_id
    return torch.tensor(sorted(pairs.items()), dtype=torch.long).view(-1, 2)


def decoded_ends(tokenizer, ids: list[int]) -> list[int]:
    """For each token, the length of the decoded text up to and including it (specials add
    nothing); a prefix ending inside a UTF-8 character drops its replacement characters."""
    return [
        len(tokenizer.decode(ids[: k + 1], skip_special_tokens=True).rstrip("\ufffd"))
        for k in range(len(ids))
    ]


@dataclass(frozen=True)
class Retokenised:
    """One completion in the other tokenizer: its ids and both sides' spans."""

    ids: list[int]
    spans_from: list[tuple[int, int]]  # the source tokens' spans
    spans_to: list[tuple[int, int]]  # the re-tokenised tokens' spans


def retokenise(ids: list[int], ended: bool, source, target) -> Retokenised:
    """``ids`` (``source`` tokens; ``ended``: the last is an end-of-completion token) as
    ``target`` tokens of the same text, with the target's eos when it ended; an end-of-completion
    token has the empty span at the text's end on both sides. A text that gives the target no
    token becomes its eos alone."""
    text_ids = ids[:-1] if ended else ids
    text = source.decode(text_ids, skip_special_tokens=True)
    end = (len(text), len(text))
    out = target(text, add_special_tokens=False)["input_ids"]
    spans_from = spans_from_ends(decoded_ends(source, text_ids)) + [end] * ended
    spans_to = spans_from_ends(decoded_ends(target, out))
    if ended or not out:
        out, spans_to = [*out, target.eos_token_id], [*spans_to, end]
    return Retokenised(out, spans_from, spans_to)


def same_tokens(ids: list[int], ended: bool, source, target) -> Retokenised:
    """``ids`` as they are, for a target that shares the source's token→id map: each token is
    its own span (every position aligns to itself)."""
    spans = [(k, k + 1) for k in range(len(ids))]
    return Retokenised(ids, spans, spans)


def _padded(rows: list[list[int]], pad: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``[B, L]`` ids and their mask (int64)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for b, row in enumerate(rows):
        ids[b, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[b, : len(row)] = 1
    return ids.to(device), mask.to(device)


def with_completions(r: Rollouts, rows: list[list[int]], pad: int, source: str) -> Rollouts:
    """``r``'s prompts in front of other completions ``rows`` (written by ``source``): no
    behaviour log-probs exist in these tokens (zeros), no model's log-probs yet."""
    device = r.prompt_ids_B_P.device
    ids_B_T, mask_B_T = _padded(rows, pad, device)
    return Rollouts(
        prompt_ids_B_P=r.prompt_ids_B_P,
        prompt_mask_B_P=r.prompt_mask_B_P,
        teacher_prompt_ids_B_Q=r.teacher_prompt_ids_B_Q,
        teacher_prompt_mask_B_Q=r.teacher_prompt_mask_B_Q,
        completion_B_T=ids_B_T,
        completion_mask_B_T=mask_B_T,
        logp_student_B_T=None,
        logp_teacher_B_T=None,
        logp_behavior_B_T=torch.zeros(mask_B_T.shape, device=device),
        lengths_B=mask_B_T.sum(dim=1),
        truncated_B=r.truncated_B,
        source=source,
        source_B=r.source_B,
    )


def _rows(r: Rollouts, stop_ids: tuple[int, ...]) -> list[tuple[list[int], bool]]:
    """Each row's completion ids and whether it ended with a stop token."""
    out = []
    for ids, n in zip(r.completion_B_T.tolist(), r.lengths_B.tolist(), strict=True):
        out.append((ids[:n], bool(n) and ids[n - 1] in stop_ids))
    return out


def student_logits(scores: Scores) -> torch.Tensor:
    """The student's logits ``[B, T, V]`` from either path (the hidden path's head applied)."""
    if isinstance(scores, HiddenScores):
        head_V_H = scores.head_V_H[: scores.vocab_size]
        return F.linear(scores.hidden_B_T_H, head_V_H.to(scores.hidden_B_T_H.dtype))
    return scores.logits_B_T_V[..., : scores.vocab_size]


@dataclass(frozen=True)
class AlignedTeacher:
    """The teacher's scores aligned to the student's positions: its logits at j(t)
    ``[B, T, W]``, the exact positions ``[B, T]``, the shared sub-vocabulary ``[M, 2]`` and its
    log-probs of each student token's text at the loss temperature and at 1.0 ``[B, T]`` (the
    sum over the teacher tokens that end in it, so a row's sum is the teacher's log-likelihood
    of the text: what the diagnostics read)."""

    logits_B_T_W: torch.Tensor
    exact_B_T: torch.Tensor
    pairs_M_2: torch.Tensor
    token_loss_t_B_T: torch.Tensor
    token_t1_B_T: torch.Tensor

    def loss(
        self, fn: Callable, student: Scores, weight_B_T: torch.Tensor, options: DivergenceOptions
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """``fn`` (the kind's loss, objectives.registry "cross_tokenizer") on these scores."""
        return fn(
            student_logits(student),
            self.logits_B_T_W,
            self.exact_B_T,
            self.pairs_M_2,
            weight_B_T,
            options=options,
        )

    def loss_t_and_t1_logprobs(self, r: Rollouts, temperature: float) -> list[torch.Tensor]:
        return [self.token_loss_t_B_T, self.token_t1_B_T]

    def to(self, device: torch.device | str) -> AlignedTeacher:
        return AlignedTeacher(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))


class CrossTokenizerTeacher(OneTeacher):
    """The teacher's side of a cross-tokenizer run, with :class:`~.scorer.TeacherScorer`'s
    interface (:meth:`rollouts`, :meth:`scores`): module docstring."""

    prompt_encoder = CrossTokenizerPrompts  # the teacher's prompt in its own tokens

    def __init__(
        self,
        cfg: RunConfig,
        pair: ModelPair,
        objective: Objective,
        through_text: bool | None = None,
    ) -> None:
        refusal = cross_tokenizer_refusal(cfg)
        if refusal is not None:
            raise ValueError(refusal)
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            raise ValueError(f"objective.kind={cfg.objective.kind} trains in one process")
        self.cfg, self.pair, self.objective = cfg, pair, objective
        self.student_tok, self.teacher_tok = pair.tokenizer, pair.teacher_tokenizer
        self.pairs_M_2 = shared_pairs(self.student_tok, self.teacher_tok)
        # teacher id of each student id in the shared sub-vocabulary, −1 elsewhere
        self.teacher_of_V = torch.full((pair.vocab_size,), -1, dtype=torch.long)
        self.teacher_of_V[self.pairs_M_2[:, 0]] = self.pairs_M_2[:, 1]
        self.teacher_stops = stop_token_ids((self.teacher_tok,), (pair.teacher,))
        # through the text only when the token→id maps differ (None), or as asked: a shared
        # tokenizer then gives the exact objective (bench_cross_tokenizer.py measures the text)
        same = self.student_tok.get_vocab() == self.teacher_tok.get_vocab()
        text = not same if through_text is None else through_text
        self.convert = retokenise if text else same_tokens

    def rollouts(
        self, step: int, prompts: PromptBatch, roll: Callable[[], Rollouts]
    ) -> tuple[Rollouts, float]:
        """OnPD: ``roll()`` (the student samples); OffPD: the teacher's, in the student's tokens."""
        if self.cfg.rollout.policy == "student":
            return roll(), 0.0
        return self.teacher_rollouts(step, prompts), 0.0

    def teacher_rollouts(self, step: int, prompts: PromptBatch) -> Rollouts:
        """The teacher samples from its own prompt in its own tokens (``rollout.teacher_*``
        settings, the step's rollout stream); each completion is re-tokenised for the student
        (its eos where the teacher's ended)."""
        cfg, teacher, tok = self.cfg, self.pair.teacher, self.teacher_tok
        device = next(teacher.parameters()).device
        spec = SamplingSpec(
            max_new_tokens=cfg.task.max_new_tokens,
            stop_ids=self.teacher_stops,
            pad_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            vocab_size=len(tok),
        )
        own = PromptBatch(*(t.to(device) for t in prompts.of("teacher")))
        policy = ROLLOUT_POLICIES["teacher"].make(cfg.rollout)
        generator = model_generator(teacher, cfg.seed, step, Stream.ROLLOUT)
        r_teacher = sample_rollouts(policy, None, teacher, own, spec, generator)
        rows = [
            self.convert(ids, ended, tok, self.student_tok).ids
            for ids, ended in _rows(r_teacher, self.teacher_stops)
        ]
        template = replace(  # both prompts, the teacher's rows' truncation and sources
            r_teacher.to(prompts.ids_B_P.device),
            prompt_ids_B_P=prompts.ids_B_P,
            prompt_mask_B_P=prompts.mask_B_P,
            teacher_prompt_ids_B_Q=prompts.teacher_ids_B_Q,
            teacher_prompt_mask_B_Q=prompts.teacher_mask_B_Q,
        )
        return with_completions(template, rows, self.student_tok.pad_token_id, "teacher")

    def scores(
        self, step: int, prompts: PromptBatch, batches: list[MicroBatch]
    ) -> tuple[Iterable[AlignedTeacher], float]:
        """The teacher's aligned scores of each micro-batch, computed as the loop reaches it."""
        return map(self.score, batches), 0.0

    def score(self, micro: MicroBatch) -> AlignedTeacher:
        """The teacher's scores of one micro-batch, aligned to the student's positions."""
        r, tau = micro.rollouts, self.objective.options.teacher_temperature
        done = [
            self.convert(ids, ended, self.student_tok, self.teacher_tok)
            for ids, ended in _rows(r, self.pair.stop_ids)
        ]
        teacher = self.pair.teacher
        device = next(teacher.parameters()).device
        r_teacher = with_completions(r, [d.ids for d in done], 0, r.source).to(device)
        with forward_precision(self.cfg.model), torch.inference_mode():
            logits_B_U_W = completion_logits(teacher, r_teacher, "teacher")
        # a clone made outside inference mode may meet the student's tensors in autograd
        logits_B_U_W = logits_B_U_W[..., : len(self.teacher_tok)].clone()
        return self._aligned(r, done, logits_B_U_W.to(r.completion_B_T.device), r_teacher, tau)

    def _aligned(
        self, r: Rollouts, done: list[Retokenised], logits_B_U_W, r_teacher: Rollouts, tau: float
    ) -> AlignedTeacher:
        """Gather the teacher's logits at j(t), mark the exact positions, and sum the teacher's
        token log-probs into the student tokens they end in."""
        device, shape = logits_B_U_W.device, r.completion_mask_B_T.shape
        position_B_T = torch.zeros(shape, dtype=torch.long)
        same_B_T = torch.zeros(shape, dtype=torch.bool)
        owner_B_U = torch.zeros(r_teacher.completion_B_T.shape, dtype=torch.long)
        for b, d in enumerate(done):
            a = align_spans(d.spans_from, d.spans_to)
            n = len(a.teacher_position)
            position_B_T[b, :n] = torch.tensor(a.teacher_position)
            same_B_T[b, :n] = torch.tensor(a.same_span)
            owner_B_U[b, : len(a.owner)] = torch.tensor(a.owner)
        position_B_T, owner_B_U = position_B_T.to(device), owner_B_U.to(device)
        width = logits_B_U_W.shape[-1]
        aligned_B_T_W = logits_B_U_W.gather(1, position_B_T[..., None].expand(-1, -1, width))
        z_B_U = r_teacher.completion_B_T.to(device)
        z_at_B_T = z_B_U.gather(1, position_B_T)
        y_B_T = r.completion_B_T.masked_fill(r.completion_mask_B_T == 0, 0)
        exact_B_T = same_B_T.to(device) & (self.teacher_of_V.to(device)[y_B_T] == z_at_B_T)
        mask_B_U = r_teacher.completion_mask_B_T.to(device)
        tokens = []
        for temperature in (tau, 1.0):
            logp_B_U = tempered_log_softmax(logits_B_U_W, temperature).gather(-1, z_B_U[..., None])
            logp_B_U = logp_B_U.squeeze(-1).masked_fill(mask_B_U == 0, 0.0)
            summed_B_T = torch.zeros(shape, device=device).scatter_add(1, owner_B_U, logp_B_U)
            tokens.append(summed_B_T.masked_fill(r.completion_mask_B_T == 0, 0.0))
        pairs = self.pairs_M_2.to(device)
        return AlignedTeacher(aligned_B_T_W, exact_B_T, pairs, *tokens)
