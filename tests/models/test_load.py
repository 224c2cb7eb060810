"""Loading checkpoints from disk: identical logits, dtypes, pairs, and clear refusals."""

from __future__ import annotations

import shutil

import pytest
import torch
from transformers import LlamaForCausalLM, Qwen2ForCausalLM

from distillscope.models import ModelLoadError
from distillscope.models.load import load_model, load_pair
from distillscope.models.vocab import TokenizerMismatchError, slice_logits


def _ids(tokenizer, text: str = "the teacher writes the answer") -> torch.Tensor:
    return torch.tensor([tokenizer(text).input_ids])  # (1, T)


def test_llama_round_trip_gives_identical_logits(llama_ckpt):
    model, tokenizer = load_model(llama_ckpt.path)
    assert isinstance(model, LlamaForCausalLM)
    assert tokenizer.get_vocab() == llama_ckpt.tokenizer.get_vocab()
    assert (tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id) == (0, 1, 2)
    assert not model.training
    tokens_1_T = _ids(tokenizer, "every operand is used exactly once")
    assert tokens_1_T.shape[1] > 3
    with torch.no_grad():
        assert torch.equal(model(tokens_1_T).logits, llama_ckpt.model(tokens_1_T).logits)


def test_qwen2_round_trip_keeps_padded_width(qwen_teacher):
    model, tokenizer = load_model(qwen_teacher.path)
    assert isinstance(model, Qwen2ForCausalLM)
    assert len(tokenizer) == 100
    tokens_1_T = _ids(tokenizer)
    with torch.no_grad():
        logits_1_T_V = model(tokens_1_T).logits
        assert torch.equal(logits_1_T_V, qwen_teacher.model(tokens_1_T).logits)
    assert logits_1_T_V.shape == (1, tokens_1_T.shape[1], 128)
    assert slice_logits(logits_1_T_V, len(tokenizer)).shape == (1, tokens_1_T.shape[1], 100)


@pytest.mark.parametrize("dtype", ["bfloat16", torch.bfloat16])
def test_dtype_option_is_honoured(qwen_teacher, dtype):
    model, tokenizer = load_model(qwen_teacher.path, dtype=dtype)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    reference = dict(qwen_teacher.model.named_parameters())
    for name, param in model.named_parameters():  # the fp32 weights rounded to bf16, exactly
        assert torch.equal(param, reference[name].to(torch.bfloat16)), name
    tokens_1_T = _ids(tokenizer)
    with torch.no_grad():
        logits = model(tokens_1_T).logits
        expected = qwen_teacher.model(tokens_1_T).logits
    assert logits.dtype == torch.bfloat16
    # bf16 keeps 8 bits of mantissa; logits of this tiny model are O(0.1).
    torch.testing.assert_close(logits.float(), expected, atol=2e-2, rtol=2e-2)
    assert not torch.equal(logits.float(), expected)


def test_unknown_dtype_is_refused(qwen_teacher):
    with pytest.raises(ValueError, match="unknown dtype 'fp8'"):
        load_model(qwen_teacher.path, dtype="fp8")


def test_pair_freezes_teacher_and_shares_vocab(qwen_teacher, qwen_student):
    pair = load_pair(qwen_teacher.path, qwen_student.path)
    assert pair.vocab_size == 100 == len(pair.tokenizer)
    assert not pair.teacher.training
    assert not any(p.requires_grad for p in pair.teacher.parameters())
    assert all(p.requires_grad for p in pair.student.parameters())
    tokens_1_T = _ids(pair.tokenizer)
    with torch.no_grad():
        teacher_logits = pair.teacher(tokens_1_T).logits  # (1, T, 128)
        student_logits = pair.student(tokens_1_T).logits  # (1, T, 112)
    assert (teacher_logits.shape[-1], student_logits.shape[-1]) == (128, 112)
    t_sliced = slice_logits(teacher_logits, pair.vocab_size)
    s_sliced = slice_logits(student_logits, pair.vocab_size)
    assert t_sliced.shape == s_sliced.shape == (1, tokens_1_T.shape[1], 100)
    assert torch.equal(t_sliced, teacher_logits[..., :100])
    assert torch.equal(s_sliced, qwen_student.model(tokens_1_T).logits[..., :100])


def test_pair_teacher_overrides(qwen_teacher, qwen_student):
    pair = load_pair(qwen_teacher.path, qwen_student.path, teacher_dtype="bfloat16")
    assert next(pair.teacher.parameters()).dtype == torch.bfloat16
    assert next(pair.student.parameters()).dtype == torch.float32


def test_mismatched_tokenizers_name_both_paths(llama_ckpt, qwen_student):
    with pytest.raises(TokenizerMismatchError) as err:
        load_pair(llama_ckpt.path, qwen_student.path)
    message = str(err.value)
    assert str(llama_ckpt.path) in message and str(qwen_student.path) in message
    assert "token " in message and "docs/method.md §1" in message


def test_pair_refuses_model_narrower_than_tokenizer(qwen_teacher, qwen_narrow):
    with pytest.raises(ModelLoadError, match=r"has 64 output logits but the tokenizer has 100"):
        load_pair(qwen_teacher.path, qwen_narrow.path)


def _pickled_copy(ckpt, dest):
    """A copy of ``ckpt`` whose weights are only a pickled ``pytorch_model.bin``.

    transformers 5 dropped ``save_pretrained(safe_serialization=False)``, so the state dict is
    written with ``torch.save`` under the file name transformers looks for.
    """
    shutil.copytree(ckpt.path, dest)
    (dest / "model.safetensors").unlink()
    torch.save(ckpt.model.state_dict(), dest / "pytorch_model.bin")
    return dest


def test_pickled_weights_refused_by_default(tmp_path, qwen_student):
    path = _pickled_copy(qwen_student, tmp_path / "pickled")
    with pytest.raises(ModelLoadError) as err:
        load_model(path)
    assert str(err.value) == (
        f"model directory {path} holds only pickled weights (pytorch_model.bin); "
        "convert to safetensors or pass allow_pickle=True"
    )


def test_pickled_weights_load_when_allowed(tmp_path, qwen_student):
    path = _pickled_copy(qwen_student, tmp_path / "pickled")
    model, tokenizer = load_model(path, allow_pickle=True)
    tokens_1_T = _ids(tokenizer)
    with torch.no_grad():
        assert torch.equal(model(tokens_1_T).logits, qwen_student.model(tokens_1_T).logits)


def test_missing_directory(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(ModelLoadError, match=f"model directory {missing} does not exist"):
        load_model(missing)


@pytest.mark.parametrize(
    "remove, message",
    [
        (["config.json"], "has no config.json"),
        (["model.safetensors"], "has no weights"),
        (["tokenizer.json"], "has no tokenizer"),
    ],
)
def test_incomplete_directory(tmp_path, qwen_student, remove, message):
    path = tmp_path / "ckpt"
    shutil.copytree(qwen_student.path, path)
    for name in remove:
        (path / name).unlink()
    with pytest.raises(ModelLoadError, match=f"model directory {path} {message}"):
        load_model(path)


def test_file_instead_of_directory(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="is not a directory"):
        load_model(path)
