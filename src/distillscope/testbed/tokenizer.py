"""The testbed's character-level tokenizer, built as a Hugging Face fast tokenizer.

One token per character of a fixed alphabet plus ``<pad> <bos> <eos>``; saved next to each
testbed model so the directories load with ``AutoTokenizer`` exactly like a real checkpoint.
"""

from __future__ import annotations

import string

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")
ALPHABET = string.digits + "+-*/=,:;()[]<> " + string.ascii_lowercase


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A fast tokenizer mapping each character of :data:`ALPHABET` to its own id.

    Ids 0, 1, 2 are ``<pad>``, ``<bos>``, ``<eos>``. Encoding prepends ``<bos>``; decoding
    joins characters without separators. Characters outside the alphabet are rejected by
    :func:`encode_checked`, not silently dropped.
    """
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    vocab.update({ch: len(SPECIAL_TOKENS) + i for i, ch in enumerate(ALPHABET)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        padding_side="left",
        model_max_length=256,
    )


def encode_checked(text: str) -> list[int]:
    """Ids of ``text`` without ``<bos>``; ValueError names any character outside the alphabet."""
    bad = sorted(set(text) - set(ALPHABET))
    if bad:
        raise ValueError(f"text has characters outside the testbed alphabet: {bad!r}")
    offset = len(SPECIAL_TOKENS)
    return [offset + ALPHABET.index(ch) for ch in text]
