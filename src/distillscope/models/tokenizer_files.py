"""Whether two model directories share a tokenizer, read from their files without torch.

A run distils token by token, so teacher and student must map every token to the same id
(docs/method.md §1). :func:`check_tokenizer_files` compares the two directories' token→id maps
(added tokens included) before any model loads — the check a study's preflight makes for every
distinct pair, in the process that plans it. ``tokenizer.json`` is read with the ``tokenizers``
library (no torch, no transformers); a directory without one (``tokenizer.model``,
``vocab.json``) is read through transformers' ``AutoTokenizer``.
"""

from __future__ import annotations

import filecmp
import hashlib
import json
from collections.abc import Callable
from pathlib import Path


class TokenizerMismatchError(ValueError):
    """Teacher and student tokenizers differ; the message names both checkpoints and why."""


#: the objective kinds that opt in to a teacher with another tokenizer, as the refusal names
#: them (``objectives.registry.CROSS_TOKENIZER_KINDS``; models imports no objectives)
CROSS_TOKENIZER_OPT_IN = "objective.kind=uld | aligned_forward_kl | aligned_reverse_kl"


def mismatch_message(name_a: str, name_b: str, reason: str, opt_in: bool = True) -> str:
    """The one line a tokenizer mismatch reads, at preflight and at load alike: it names the
    opt-in (a cross-tokenizer objective, docs/scaling.md "A teacher with another tokenizer"),
    unless ``opt_in`` is False (a served teacher, which those objectives refuse)."""
    advice = f", or opt in with {CROSS_TOKENIZER_OPT_IN}" if opt_in else ""
    return (
        f"tokenizers of {name_a} and {name_b} differ: {reason}; teacher and student must "
        f"share one tokenizer (docs/method.md §1){advice}"
    )


def tokenizer_vocab(directory: Path, loaded: bool = False) -> dict[str, int]:
    """The token→id map of ``directory``'s tokenizer, added tokens included: from
    ``tokenizer.json`` alone, or (``loaded``, or without that file) as transformers loads it."""
    path = Path(directory) / "tokenizer.json"
    if path.is_file() and not loaded:
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(path)).get_vocab(with_added_tokens=True)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory).get_vocab()


def tokenizer_codec(directory: Path, loaded: bool = False) -> tuple[Callable, Callable, int]:
    """``(decode(ids) → text, encode(text) → ids without special tokens, vocabulary size)`` of
    ``directory``'s tokenizer, read as :func:`tokenizer_vocab` reads it."""
    path = Path(directory) / "tokenizer.json"
    if path.is_file() and not loaded:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path))
        return (
            lambda ids: tok.decode(ids, skip_special_tokens=False),
            lambda text: tok.encode(text, add_special_tokens=False).ids,
            tok.get_vocab_size(with_added_tokens=True),
        )
    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(directory)
    return auto.decode, lambda text: auto(text, add_special_tokens=False)["input_ids"], len(auto)


def vocab_fingerprint(vocab: dict[str, int]) -> str:
    """The SHA-256 of a token→id map: the JSON list of ``[id, token]`` pairs in id order, UTF-8.
    Two tokenizers map every token to the same id exactly when their fingerprints agree (up to a
    hash collision); a served teacher shows its own (:mod:`distillscope.teacher.server`), so that
    a preflight compares it with the student's files without loading a model."""
    pairs = sorted((i, t) for t, i in vocab.items())
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()


def check_tokenizer_files(teacher: Path, student: Path) -> None:
    """:class:`TokenizerMismatchError` unless the two directories' tokenizers share a vocabulary.

    Identical ``tokenizer.json`` files are not parsed; files that differ are confirmed with the
    tokenizers as transformers loads them (``tokenizer_config.json`` may add tokens) before the
    pair is refused, so the preflight never refuses a pair that loading accepts.
    """
    a, b = Path(teacher) / "tokenizer.json", Path(student) / "tokenizer.json"
    if a.is_file() and b.is_file() and filecmp.cmp(a, b, shallow=False):
        return
    for loaded in (False, True):
        vocab_t, vocab_s = tokenizer_vocab(teacher, loaded), tokenizer_vocab(student, loaded)
        reason = first_vocab_difference(vocab_t, vocab_s, str(teacher), str(student))
        if reason is None:
            return
    raise TokenizerMismatchError(mismatch_message(str(teacher), str(student), reason))


def first_vocab_difference(
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
