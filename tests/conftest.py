"""Shared fixtures: tiny random testbed-shaped models saved as HF directories."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from distillscope.testbed.tokenizer import build_tokenizer


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    # Tiny models on 2 shared cores: one intra-op thread avoids oversubscription stalls.
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def save_tiny_llama(path: Path, hidden: int, layers: int, seed: int) -> Path:
    """A random Llama with the testbed tokenizer, saved with safetensors under ``path``."""
    tok = build_tokenizer()
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
        max_position_embeddings=128, tie_word_embeddings=True, pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
    )  # fmt: skip
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory) -> tuple[Path, Path]:
    """(teacher_dir, student_dir): random testbed-shaped models, teacher twice as wide."""
    root = tmp_path_factory.mktemp("tiny-pair")
    return (
        save_tiny_llama(root / "teacher", hidden=32, layers=2, seed=1),
        save_tiny_llama(root / "student", hidden=16, layers=1, seed=2),
    )
