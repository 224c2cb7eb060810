"""What the sampler takes and gives: :class:`PromptBatch` and :class:`SamplingSpec` in,
:class:`Rollouts` (the completions a rollout policy wrote, with the log-probs of its tokens) out.

Layout: prompts are LEFT-padded (``[B, P]``), completions RIGHT-padded (``[B, T]``), so
``concat(prompt, completion)`` is contiguous per row and a causal LM's logits at positions
``P-1 .. P+L-2`` predict the completion tokens. The teacher may read a different prompt
(``[B, Q]``, e.g. the style-flagged one) in front of the same completion.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Literal

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

Role = Literal["student", "teacher"]

_META_KEY = "distillscope.rollouts"
_FORMAT_VERSION = 2  # 2: completion fields end in _B_T (were _B_L)
_OPTIONAL = ("logp_student_B_T", "logp_teacher_B_T")
_TEACHER_PROMPT = ("teacher_prompt_ids_B_Q", "teacher_prompt_mask_B_Q")


@dataclass(frozen=True, eq=False)
class PromptBatch:
    """One batch of left-padded prompts: the student's ``[B, P]`` and the teacher's ``[B, Q]``.

    Without a teacher prompt the teacher reads the student's: the very same tensors, which
    :class:`Rollouts` keeps shared (and stores once).
    """

    ids_B_P: torch.Tensor
    mask_B_P: torch.Tensor
    teacher_ids_B_Q: torch.Tensor | None = None
    teacher_mask_B_Q: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if (self.teacher_ids_B_Q is None) != (self.teacher_mask_B_Q is None):
            raise ValueError("PromptBatch needs both teacher_ids_B_Q and teacher_mask_B_Q, or none")
        if self.teacher_ids_B_Q is None:
            object.__setattr__(self, "teacher_ids_B_Q", self.ids_B_P)
            object.__setattr__(self, "teacher_mask_B_Q", self.mask_B_P)
        if self.teacher_ids_B_Q.shape[0] != self.ids_B_P.shape[0]:
            raise ValueError(
                f"teacher_ids_B_Q has {self.teacher_ids_B_Q.shape[0]} rows but ids_B_P has "
                f"{self.ids_B_P.shape[0]}: the teacher needs one prompt per student prompt"
            )

    def of(self, role: Role) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, mask) of the prompt ``role`` reads."""
        if role == "student":
            return self.ids_B_P, self.mask_B_P
        return self.teacher_ids_B_Q, self.teacher_mask_B_Q


@dataclass(frozen=True)
class SamplingSpec:
    """How every policy's decoding ends and what it may draw (temperatures and top-p belong to
    the policy).

    ``stop_ids`` is one stop id or several (``<|im_end|>`` and ``<|endoftext|>``): a row ends at
    the first one it emits; none means every row runs ``max_new_tokens``. ``vocab_size`` V is the
    shared tokenizer's length: both models' logits are sliced to their first V columns before any
    softmax, so padded embedding rows are never drawn, scored or mixed (docs/method.md §1); None
    means the models' own logit width (which must then agree). Decoding stops once every row has
    ended, checked every ``stop_check_every`` tokens (None: every token on CPU, where the check is
    free; every 8 on an accelerator, where it is a host synchronisation); the draws do not depend
    on it. ``use_cache=False`` re-runs the whole sequence at each step (the reference path);
    ``fast_decode`` (with the cache) decodes models that
    :func:`~distillscope.rollout.fast_decode.supports` with the lean static-cache decoder (same
    logits, same draws), False always through the model's own forward.
    """

    max_new_tokens: int
    stop_ids: int | Sequence[int]  # kept as a tuple
    pad_id: int
    vocab_size: int | None = None
    use_cache: bool = True
    stop_check_every: int | None = None
    fast_decode: bool = True

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        stops = self.stop_ids
        object.__setattr__(self, "stop_ids", (stops,) if isinstance(stops, int) else tuple(stops))


@dataclass
class Rollouts:
    """One batch of B completions of width L (the longest one, EOS included).

    Masks are int64 (1 = real token), log-probs fp32 and 0 where masked.
    """

    prompt_ids_B_P: torch.Tensor
    """Student prompt tokens, left padded with the pad id."""
    prompt_mask_B_P: torch.Tensor
    """1 on the student prompt's real tokens."""
    teacher_prompt_ids_B_Q: torch.Tensor
    """Teacher prompt tokens (left padded); the very same tensor as the student's when the
    teacher reads the same prompt."""
    teacher_prompt_mask_B_Q: torch.Tensor
    """1 on the teacher prompt's real tokens."""
    completion_B_T: torch.Tensor
    """Sampled tokens, the pad id after EOS."""
    completion_mask_B_T: torch.Tensor
    """1 on generated tokens including the EOS token, 0 after it."""
    logp_student_B_T: torch.Tensor | None
    """log π_S(y_n | h_n) at the student's sampling temperature; None until scored."""
    logp_teacher_B_T: torch.Tensor | None
    """log π_T(y_n | h_n) at the teacher's sampling temperature, with the teacher's own prompt;
    None until scored."""
    logp_behavior_B_T: torch.Tensor
    """log ρ(y_n | h_n) under the policy that actually sampled (top-p included): π_old of OPD."""
    lengths_B: torch.Tensor
    """Completion tokens per row, EOS included (= completion_mask_B_T.sum(1))."""
    truncated_B: torch.Tensor
    """True where the row hit max_new_tokens without emitting EOS."""
    source: str
    """The policy that wrote the batch, e.g. ``student``, ``spectrum(lam=0.5)``, ``mix(p=0.5)``."""
    source_B: torch.Tensor
    """Per row, int8: 1 student-written, 0 teacher-written, -1 written jointly by both models."""
    logp_engine_B_T: torch.Tensor | None = None
    """log ρ(y_n | h_n) as an external rollout engine (vLLM) reported it while sampling; None
    when distillscope's own sampler wrote the batch (``logp_behavior_B_T`` is then the sampler's,
    else the trainer's recomputation of the same ρ)."""

    def __post_init__(self) -> None:
        b, length = self.completion_B_T.shape
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor) and value.shape[0] != b:
                raise ValueError(f"Rollouts.{f.name} has batch {value.shape[0]}, expected {b}")
        for name in ("completion_mask_B_T", "logp_behavior_B_T", *_OPTIONAL, "logp_engine_B_T"):
            value = getattr(self, name)
            if value is not None and value.shape != (b, length):
                raise ValueError(
                    f"Rollouts.{name} has shape {tuple(value.shape)}, want {(b, length)}"
                )

    @property
    def batch_size(self) -> int:
        return self.completion_B_T.shape[0]

    def prompt(self, role: Role) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, mask) of the prompt ``role`` reads: ``[B, P]`` (student), ``[B, Q]`` (teacher)."""
        if role == "student":
            return self.prompt_ids_B_P, self.prompt_mask_B_P
        if role == "teacher":
            return self.teacher_prompt_ids_B_Q, self.teacher_prompt_mask_B_Q
        raise ValueError(f"role must be 'student' or 'teacher', got {role!r}")

    def sequence(self, role: Role) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(input_ids_B_S, attention_mask_B_S, position_ids_B_S)`` of prompt ⧺ completion.

        S = P + L for the student, Q + L for the teacher. Position ids count real tokens
        (cumsum(mask) − 1, clipped at 0), the convention the sampler decodes with, so the
        logits of one full forward equal those it sampled from.
        """
        ids_B_P, mask_B_P = self.prompt(role)
        input_ids_B_S = torch.cat([ids_B_P, self.completion_B_T], dim=1)
        attention_mask_B_S = torch.cat([mask_B_P, self.completion_mask_B_T], dim=1)
        return input_ids_B_S, attention_mask_B_S, position_ids(attention_mask_B_S)

    def completion_logits_slice(self, role: Role) -> slice:
        """Slice of the sequence axis whose logits predict the completion tokens.

        ``logits_B_S_V[:, sl]`` is ``[B, T, V]`` with row n predicting ``completion_B_T[:, n]``:
        ``slice(P - 1, P - 1 + L)`` for a prompt of width P.
        """
        width = self.prompt(role)[0].shape[1]
        return slice(width - 1, width - 1 + self.completion_B_T.shape[1])

    def to(self, device: torch.device | str) -> Rollouts:
        """A copy with every tensor on ``device`` (a shared teacher prompt stays shared)."""
        return self._map_tensors(lambda t: t.to(device))

    def rows(self, index_b: torch.Tensor) -> Rollouts:
        """The rows ``index_b`` of the batch (micro-batches for gradient accumulation)."""
        return self._map_tensors(lambda t: t[index_b])

    def save(self, path: str | Path) -> None:
        """Write one safetensors file; the source string rides in its JSON header metadata."""
        shared = self._teacher_prompt_is_shared()
        tensors = {
            f.name: getattr(self, f.name).detach().cpu().contiguous()
            for f in fields(self)
            if isinstance(getattr(self, f.name), torch.Tensor)
            and not (shared and f.name in _TEACHER_PROMPT)
        }
        meta = {"format": _FORMAT_VERSION, "source": self.source, "teacher_prompt_shared": shared}
        save_file(tensors, str(path), metadata={_META_KEY: json.dumps(meta)})

    @classmethod
    def load(cls, path: str | Path) -> Rollouts:
        """Read a file written by :meth:`save` (tensors on CPU)."""
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
        if _META_KEY not in header:
            raise ValueError(
                f"{path} is not a distillscope Rollouts file (no '{_META_KEY}' header)"
            )
        meta = json.loads(header[_META_KEY])
        if meta.get("format") != _FORMAT_VERSION:
            raise ValueError(
                f"{path} was written in Rollouts format {meta.get('format')}, this distillscope "
                f"reads format {_FORMAT_VERSION}; delete the rollout cache to regenerate it"
            )
        tensors = load_file(str(path))
        if meta["teacher_prompt_shared"]:
            tensors["teacher_prompt_ids_B_Q"] = tensors["prompt_ids_B_P"]
            tensors["teacher_prompt_mask_B_Q"] = tensors["prompt_mask_B_P"]
        optional = {name: tensors.pop(name, None) for name in _OPTIONAL}
        return cls(**tensors, **optional, source=meta["source"])

    def _teacher_prompt_is_shared(self) -> bool:
        return (
            self.teacher_prompt_ids_B_Q is self.prompt_ids_B_P
            and self.teacher_prompt_mask_B_Q is self.prompt_mask_B_P
        )

    def _map_tensors(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Rollouts:
        # Memoised by identity so that a teacher prompt shared with the student stays shared.
        done: dict[int, torch.Tensor] = {}
        changes = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                if id(value) not in done:
                    done[id(value)] = fn(value)
                changes[f.name] = done[id(value)]
        return replace(self, **changes)


@dataclass(frozen=True)
class MicroBatch:
    """One of a step's ``optim.grad_accum`` micro-batches: its rows of the batch, and them."""

    index_b: torch.Tensor  # row indices into the step's batch (CPU)
    rollouts: Rollouts


def micro_batches(rollouts: Rollouts, n: int) -> list[MicroBatch]:
    """The step's ``n`` micro-batches: consecutive rows, none empty (the batch itself for one).

    The one slicer of the step: the student's forwards and the teacher's scores (live or cached)
    both read these rows (:mod:`distillscope.train.step`, :mod:`distillscope.teacher`).
    """
    out = []
    for index_b in torch.arange(rollouts.batch_size).tensor_split(n):
        if len(index_b) == rollouts.batch_size:
            out.append(MicroBatch(index_b, rollouts))
        elif len(index_b):
            device = rollouts.completion_mask_B_T.device
            out.append(MicroBatch(index_b, rollouts.rows(index_b.to(device))))
    return out


def position_ids(attention_mask_B_S: torch.Tensor) -> torch.Tensor:
    """Position of each token among its row's real tokens: cumsum(mask) − 1, clipped at 0.

    With left padding the first real token gets position 0 in every row; pads get 0 (before
    the prompt) or repeat the last position (after EOS) and are masked anyway.
    """
    return (attention_mask_B_S.long().cumsum(dim=1) - 1).clamp(min=0)
