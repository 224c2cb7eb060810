"""Vocabulary checks for a teacher–student pair: one shared tokenizer, logits sliced to its length.

Distillation compares the two models' distributions token by token, so both must split text
into the same tokens with the same ids (docs/method.md §1). Their logit widths may still differ
because
checkpoints pad the embedding matrix (Qwen2.5-7B has 152,064 rows, Qwen2.5-1.5B 151,936, for a
151,665-token tokenizer); the padded columns are sliced off before any softmax.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch

from distillscope.models.locate import ModelLoadError
from distillscope.models.tokenizer_files import (
    TokenizerMismatchError,
    first_vocab_difference,
    mismatch_message,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# Special tokens compared between the two tokenizers (a difference is reported, not refused).
_NAMED_SPECIALS = ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id")
#: Tokens that end a chat turn or a document in common checkpoints (Qwen, Llama 3); each one the
#: tokenizer knows is a stop id, besides its eos token and the models' configured eos ids.
STOP_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>")


class SpecialTokensWarning(UserWarning):
    """Same vocabulary, different special tokens (e.g. an Instruct teacher and a base student)."""


def check_tokenizers_match(
    tok_a: PreTrainedTokenizerBase, tok_b: PreTrainedTokenizerBase, name_a: str, name_b: str
) -> None:
    """Raise :class:`TokenizerMismatchError` unless ``tok_a`` and ``tok_b`` share a vocabulary.

    Sharing means the same token→id map (added tokens included): token by token the two models
    then score the same strings. Special tokens may still differ, as between an Instruct teacher
    (eos ``<|im_end|>``) and its base student (eos ``<|endoftext|>``): that is accepted with a
    :class:`SpecialTokensWarning` naming the first difference (bos, eos, pad, unk, then the set
    of special ids); generation stops at every stop id of both (:func:`stop_token_ids`).
    ``name_a`` / ``name_b`` (usually the checkpoint paths) appear in the messages.
    """
    reason = first_vocab_difference(tok_a.get_vocab(), tok_b.get_vocab(), name_a, name_b)
    if reason is not None:
        raise TokenizerMismatchError(mismatch_message(name_a, name_b, reason))
    special = _first_special_difference(tok_a, tok_b, name_a, name_b)
    if special is not None:
        warnings.warn(
            f"tokenizers of {name_a} and {name_b} share one vocabulary but their special tokens "
            f"differ: {special}; the student's are used for padding, and every stop id of both "
            "ends generation",
            SpecialTokensWarning,
            stacklevel=2,
        )


def shared_vocabulary(
    teacher: PreTrainedModel,
    student: PreTrainedModel,
    teacher_tok: PreTrainedTokenizerBase,
    student_tok: PreTrainedTokenizerBase,
    names: tuple[str, str],
) -> tuple[int, tuple[int, ...]]:
    """(vocabulary size, stop ids) of a teacher and a student that must share one tokenizer:
    :func:`check_tokenizers_match` of their tokenizers (``names``: the teacher's and the
    student's paths, for the messages), each model's output layer at least as wide as the
    student's tokenizer (``ModelLoadError`` naming the path), and :func:`stop_token_ids` of
    both."""
    check_tokenizers_match(teacher_tok, student_tok, *names)
    vocab_size = len(student_tok)
    for name, model in zip(names, (teacher, student), strict=True):
        width = logit_width(model)
        if width < vocab_size:
            raise ModelLoadError(
                f"model in {name} has {width} output logits but the tokenizer has "
                f"{vocab_size} tokens; the checkpoint does not match its tokenizer"
            )
    return vocab_size, stop_token_ids((student_tok, teacher_tok), (student, teacher))


def logit_width(model: PreTrainedModel) -> int:
    """Number of logit columns the model outputs (its padded vocabulary size)."""
    head = model.get_output_embeddings()
    return head.weight.shape[0] if head is not None else model.config.vocab_size


def stop_token_ids(
    tokenizers: Iterable[PreTrainedTokenizerBase], models: Iterable[PreTrainedModel] = ()
) -> tuple[int, ...]:
    """Every id that ends a completion, sorted: each tokenizer's eos, each of :data:`STOP_TOKENS`
    a tokenizer knows, and each model's ``eos_token_id`` in its generation config and config
    (an int or a list there)."""
    ids: set[int] = set()
    for tok in tokenizers:
        if tok.eos_token_id is not None:
            ids.add(int(tok.eos_token_id))
        vocab = tok.get_vocab()
        ids.update(vocab[t] for t in STOP_TOKENS if t in vocab)
    for model in models:
        for cfg in (getattr(model, "generation_config", None), model.config):
            eos = getattr(cfg, "eos_token_id", None) if cfg is not None else None
            ids.update(int(i) for i in ([eos] if isinstance(eos, int) else eos or ()))
    return tuple(sorted(ids))


def _first_special_difference(
    tok_a: PreTrainedTokenizerBase, tok_b: PreTrainedTokenizerBase, name_a: str, name_b: str
) -> str | None:
    for attr in _NAMED_SPECIALS:
        id_a, id_b = getattr(tok_a, attr, None), getattr(tok_b, attr, None)
        if id_a != id_b:
            return f"{attr} is {id_a} in {name_a} but {id_b} in {name_b}"
    specials_a, specials_b = sorted(tok_a.all_special_ids), sorted(tok_b.all_special_ids)
    if specials_a != specials_b:
        return f"special token ids are {specials_a} in {name_a} but {specials_b} in {name_b}"
    return None


def slice_logits(logits_B_T_V: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """``logits_B_T_V[..., :vocab_size]``: drop the padded columns beyond the shared tokenizer.

    Works for any leading shape; returns a view (no copy). Raises ValueError when the logits
    are narrower than ``vocab_size`` — such a model cannot score every token of the tokenizer.
    """
    width = logits_B_T_V.shape[-1]
    if width < vocab_size:
        raise ValueError(
            f"logits have {width} columns but the tokenizer has {vocab_size} tokens; "
            "the model's output layer is narrower than its tokenizer"
        )
    return logits_B_T_V[..., :vocab_size]
