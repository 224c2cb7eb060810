"""Tiny checkpoints on disk: random Llama and Qwen2 models with locally trained BPE tokenizers.

The Qwen2 pair mirrors Qwen2.5-7B / 1.5B: one 100-token tokenizer, logit widths padded to 128
(teacher) and 112 (student). The Llama model has a tokenizer trained on other text, so it
mismatches the Qwen2 pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
CORPUS_A = [
    "the teacher writes the answer and the student reads it",
    "a student learns from a stronger teacher by matching its distribution",
    "distillation moves knowledge from strong models to weak models",
    "tokens logits and vocabularies must agree between the two models",
] * 4
CORPUS_B = [
    "countdown combines numbers with plus minus times and divide",
    "every operand is used exactly once to reach the target",
    "forgetting and sparsity depend on the learning rate",
] * 4
TOKENIZER_SIZE = 100


def train_tokenizer(corpus: list[str], vocab_size: int = TOKENIZER_SIZE) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on ``corpus``; ids 0..3 are pad, bos, eos, unk."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False
    )
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
    )


@dataclass
class Checkpoint:
    """A model saved with safetensors plus the in-memory original to compare against."""

    path: Path
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerFast


def _tiny_dims() -> dict:
    return dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )


def save_checkpoint(path: Path, model: PreTrainedModel, tokenizer) -> Checkpoint:
    model.eval()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return Checkpoint(path, model, tokenizer)


def qwen2_model(vocab_size: int, seed: int) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(Qwen2Config(vocab_size=vocab_size, **_tiny_dims()))


@pytest.fixture(scope="session")
def tokenizer_a() -> PreTrainedTokenizerFast:
    return train_tokenizer(CORPUS_A)


@pytest.fixture(scope="session")
def tokenizer_b() -> PreTrainedTokenizerFast:
    return train_tokenizer(CORPUS_B)


@pytest.fixture(scope="session")
def llama_ckpt(tmp_path_factory, tokenizer_b) -> Checkpoint:
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=TOKENIZER_SIZE, **_tiny_dims()))
    return save_checkpoint(tmp_path_factory.mktemp("llama"), model, tokenizer_b)


@pytest.fixture(scope="session")
def qwen_teacher(tmp_path_factory, tokenizer_a) -> Checkpoint:
    return save_checkpoint(tmp_path_factory.mktemp("qwen-t"), qwen2_model(128, 1), tokenizer_a)


@pytest.fixture(scope="session")
def qwen_student(tmp_path_factory, tokenizer_a) -> Checkpoint:
    return save_checkpoint(tmp_path_factory.mktemp("qwen-s"), qwen2_model(112, 2), tokenizer_a)


@pytest.fixture(scope="session")
def qwen_narrow(tmp_path_factory, tokenizer_a) -> Checkpoint:
    """A broken checkpoint: 64 logit columns for a 100-token tokenizer."""
    return save_checkpoint(tmp_path_factory.mktemp("qwen-n"), qwen2_model(64, 3), tokenizer_a)
