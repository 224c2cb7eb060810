"""The preflight's tokenizer comparison reads files, and agrees with the check at load."""

from __future__ import annotations

import pytest

from distillscope.models.tokenizer_files import (
    TokenizerMismatchError,
    check_tokenizer_files,
    tokenizer_codec,
    tokenizer_vocab,
    vocab_fingerprint,
)


def test_one_tokenizer_passes_and_a_template_may_differ(padded_qwen_pair, chat_llama_pair):
    check_tokenizer_files(*padded_qwen_pair)  # one tokenizer, padded logit widths
    check_tokenizer_files(*chat_llama_pair)  # one vocabulary, two chat templates
    assert len(tokenizer_vocab(padded_qwen_pair[0])) == 3000


def test_another_tokenizer_is_named_with_its_first_differing_token(qwen_teacher, llama_ckpt):
    with pytest.raises(TokenizerMismatchError) as err:
        check_tokenizer_files(qwen_teacher.path, llama_ckpt.path)
    text = str(err.value)
    assert str(qwen_teacher.path) in text and str(llama_ckpt.path) in text
    assert "share one tokenizer" in text and "\n" not in text


def test_the_fingerprint_of_the_files_is_the_loaded_tokenizers(padded_qwen_pair, tiny_pair):
    """What ``serve-teacher`` shows (the loaded tokenizer's map) is what the preflight reads from
    the files; two swapped ids change it."""
    from transformers import AutoTokenizer

    for directory in (padded_qwen_pair[1], tiny_pair[1]):
        loaded = AutoTokenizer.from_pretrained(directory)
        files = tokenizer_vocab(directory)
        assert vocab_fingerprint(files) == vocab_fingerprint(loaded.get_vocab())
        assert tokenizer_codec(directory)[2] == len(loaded)
    swapped = dict(files)
    a, b = sorted(swapped)[:2]
    swapped[a], swapped[b] = swapped[b], swapped[a]
    assert vocab_fingerprint(swapped) != vocab_fingerprint(files)
