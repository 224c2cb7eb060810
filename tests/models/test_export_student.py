"""The final student as a Hugging Face directory: ``from_pretrained`` loads what was trained."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from distillscope.models import resolve_model_path
from distillscope.models.load import load_model
from distillscope.train.checkpoint import export_student, stop_token_ids

from .conftest import qwen2_model


def _same_logits(a, b, vocab: int) -> None:
    ids = torch.tensor([[1, 5, 9, 17, 33, 2]]) % vocab
    with torch.no_grad():
        torch.testing.assert_close(a(input_ids=ids).logits, b(input_ids=ids).logits)


def test_testbed_student_round_trips(tmp_path):
    model, tok = load_model(resolve_model_path("testbed:student"))
    with torch.no_grad():  # as if trained: the export must carry the new weights
        model.get_input_embeddings().weight.mul_(1.5)
    out = export_student(tmp_path, model, tok)
    assert out == tmp_path / "student"
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json"} <= names
    loaded = AutoModelForCausalLM.from_pretrained(out)
    _same_logits(model, loaded, len(tok))
    assert AutoTokenizer.from_pretrained(out).get_vocab() == tok.get_vocab()
    assert tok.eos_token_id in GenerationConfig.from_pretrained(out).eos_token_id


def test_tied_qwen2_with_chatml_stop_ids(tmp_path, tokenizer_a):
    tok = AutoTokenizer.from_pretrained(_saved_tokenizer(tmp_path, tokenizer_a))
    model = qwen2_model(112, 7)  # padded to 112 logit columns for 101 tokens
    model.config.tie_word_embeddings = True
    model.tie_weights()
    out = export_student(tmp_path / "run", model, tok)
    loaded = AutoModelForCausalLM.from_pretrained(out)
    assert loaded.get_output_embeddings().weight.data_ptr() == (
        loaded.get_input_embeddings().weight.data_ptr()
    )
    _same_logits(model, loaded, len(tok))
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert GenerationConfig.from_pretrained(out).eos_token_id == sorted([2, im_end])
    assert AutoTokenizer.from_pretrained(out).convert_tokens_to_ids("<|im_end|>") == im_end


def test_stop_ids_merge_configured_and_known_end_tokens(tokenizer_a):
    assert stop_token_ids(tokenizer_a) == [2]
    assert stop_token_ids(tokenizer_a, [5, 2]) == [2, 5]
    assert stop_token_ids(tokenizer_a, 9) == [2, 9]


def _saved_tokenizer(tmp_path, tokenizer):
    path = tmp_path / "tok"
    tokenizer.save_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>"]})
    tok.save_pretrained(path)
    return path
