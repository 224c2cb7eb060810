"""Tokenizer agreement and logit slicing (docs/method.md §1)."""

from __future__ import annotations

import shutil

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from distillscope.models.load import load_pair
from distillscope.models.tokenizer_files import CROSS_TOKENIZER_OPT_IN
from distillscope.models.vocab import (
    SpecialTokensWarning,
    TokenizerMismatchError,
    check_tokenizers_match,
    slice_logits,
    stop_token_ids,
)


def word_tokenizer(words: dict[str, int], pad: str = "<pad>") -> PreTrainedTokenizerFast:
    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2, **words}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=pad, bos_token="<bos>", eos_token="<eos>"
    )


def test_identical_tokenizers_pass():
    check_tokenizers_match(word_tokenizer({"a": 3}), word_tokenizer({"a": 3}), "t", "s")


@pytest.mark.parametrize(
    "words_a, words_b, reason",
    [
        ({"a": 3, "b": 4}, {"a": 4, "b": 3}, "token 'a' has id 3 in T but 4 in S"),
        ({"a": 3, "b": 4}, {"a": 3}, "token 'b' (id 4 in T) is missing from S"),
        ({"a": 3}, {"a": 3, "c": 4}, "token 'c' (id 4 in S) is missing from T"),
    ],
)
def test_first_vocabulary_difference_is_named(words_a, words_b, reason):
    with pytest.raises(TokenizerMismatchError) as err:
        check_tokenizers_match(word_tokenizer(words_a), word_tokenizer(words_b), "T", "S")
    assert str(err.value) == (
        f"tokenizers of T and S differ: {reason}; teacher and student must share one "
        f"tokenizer (docs/method.md §1), or opt in with {CROSS_TOKENIZER_OPT_IN}"
    )


def test_special_token_differences_warn_naming_the_difference():
    same_vocab_other_pad = word_tokenizer({"a": 3}, pad="<eos>")
    with pytest.warns(SpecialTokensWarning, match="pad_token_id is 0 in T but 2 in S"):
        check_tokenizers_match(word_tokenizer({"a": 3}), same_vocab_other_pad, "T", "S")


def test_instruct_teacher_and_base_student_load_with_a_warning_and_both_stop_ids(
    tmp_path, padded_qwen_pair
):
    """Same vocabulary, eos ``<|im_end|>`` (Instruct) vs ``<|endoftext|>`` (base)."""
    teacher_dir, student_dir = padded_qwen_pair
    base = AutoTokenizer.from_pretrained(student_dir)
    base.eos_token = "<|endoftext|>"
    shutil.copytree(student_dir, tmp_path / "base", ignore=shutil.ignore_patterns("tokenizer*"))
    base.save_pretrained(tmp_path / "base")
    with pytest.warns(SpecialTokensWarning, match="eos_token_id is 2 in .* but 0 in"):
        pair = load_pair(teacher_dir, tmp_path / "base")
    assert pair.vocab_size == 3000
    assert pair.tokenizer.eos_token == "<|endoftext|>"
    assert pair.teacher_tokenizer.eos_token == "<|im_end|>"
    assert pair.stop_ids == (0, 2)  # <|endoftext|>, <|im_end|>


def test_stop_ids_collect_eos_lists_from_generation_configs(padded_qwen_pair):
    teacher_dir, _ = padded_qwen_pair
    model = AutoModelForCausalLM.from_pretrained(teacher_dir)
    model.generation_config.eos_token_id = [2, 7]
    tok = word_tokenizer({"a": 3})  # eos <eos> = 2, no ChatML tokens
    assert stop_token_ids([tok], [model]) == (0, 2, 7)  # config.eos_token_id lists 0 and 2
    assert stop_token_ids([tok]) == (2,)


def test_slice_logits_drops_padded_columns():
    logits_B_T_V = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
    sliced = slice_logits(logits_B_T_V, 5)
    assert sliced.shape == (2, 3, 5)
    assert torch.equal(sliced, logits_B_T_V[:, :, :5])
    assert sliced.data_ptr() == logits_B_T_V.data_ptr()  # a view, no copy
    assert torch.equal(slice_logits(logits_B_T_V, 8), logits_B_T_V)
    assert slice_logits(torch.zeros(4, 8), 6).shape == (4, 6)  # any leading shape


def test_slice_logits_refuses_narrow_logits():
    with pytest.raises(ValueError, match="logits have 8 columns but the tokenizer has 9 tokens"):
        slice_logits(torch.zeros(1, 2, 8), 9)
