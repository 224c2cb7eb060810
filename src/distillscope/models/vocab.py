"""Vocabulary checks for a teacher–student pair: one shared tokenizer, logits sliced to its length.

Distillation compares the two models' distributions token by token, so both must split text
into the same tokens with the same ids (docs/method.md §1). Their logit widths may still differ
because
checkpoints pad the embedding matrix (Qwen2.5-7B has 152,064 rows, Qwen2.5-1.5B 151,936, for a
151,665-token tokenizer); the padded columns are sliced off before any softmax.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# Special tokens whose ids must agree: generation stops at eos, batches pad with pad, etc.
_NAMED_SPECIALS = ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id")


class TokenizerMismatchError(ValueError):
    """Teacher and student tokenizers differ; the message names both checkpoints and why."""


def check_tokenizers_match(
    tok_a: PreTrainedTokenizerBase, tok_b: PreTrainedTokenizerBase, name_a: str, name_b: str
) -> None:
    """Raise :class:`TokenizerMismatchError` unless ``tok_a`` and ``tok_b`` are interchangeable.

    Interchangeable means the same token→id map (added tokens included) and the same special
    token ids (bos, eos, pad, unk and the full set of special ids). ``name_a`` / ``name_b``
    (usually the checkpoint paths) appear in the message with the first difference found.
    """
    reason = _first_vocab_difference(tok_a.get_vocab(), tok_b.get_vocab(), name_a, name_b)
    if reason is None:
        reason = _first_special_difference(tok_a, tok_b, name_a, name_b)
    if reason is not None:
        raise TokenizerMismatchError(
            f"tokenizers of {name_a} and {name_b} differ: {reason}; teacher and student must "
            "share one tokenizer (docs/method.md §1)"
        )


def _first_vocab_difference(
    vocab_a: dict[str, int], vocab_b: dict[str, int], name_a: str, name_b: str
) -> str | None:
    """The first token (by id in ``a``, then by id in ``b``) whose id differs, as a sentence."""
    for token, id_a in sorted(vocab_a.items(), key=lambda kv: kv[1]):
        id_b = vocab_b.get(token)
        if id_b is None:
            return f"token {token!r} (id {id_a} in {name_a}) is missing from {name_b}"
        if id_b != id_a:
            return f"token {token!r} has id {id_a} in {name_a} but {id_b} in {name_b}"
    for token, id_b in sorted(vocab_b.items(), key=lambda kv: kv[1]):
        if token not in vocab_a:
            return f"token {token!r} (id {id_b} in {name_b}) is missing from {name_a}"
    return None


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
