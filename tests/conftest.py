"""Shared fixtures: tiny random testbed-shaped models saved as HF directories."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from distillscope.testbed.tokenizer import build_tokenizer

#: Intra-op threads of the test session: 1 (tiny models on 2 shared cores: one thread avoids
#: oversubscription stalls); DISTILLSCOPE_TEST_THREADS=2 reruns the suite with another
#: summation order, which every numeric tolerance must absorb.
TEST_THREADS = int(os.environ.get("DISTILLSCOPE_TEST_THREADS", "1"))


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(TEST_THREADS)
    yield
    torch.set_num_threads(old)


def save_tiny_llama(path: Path, hidden: int, layers: int, seed: int, tok=None) -> Path:
    """A random Llama with the testbed tokenizer (or ``tok``), saved with safetensors under
    ``path``."""
    tok = tok or build_tokenizer()
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
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


# A ChatML template as Qwen2.5 ships it (system turn optional), and a variant with a default
# system turn standing in for a teacher whose own template differs from the student's.
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CHATML_WITH_SYSTEM = "<|im_start|>system\nYou are a teacher.<|im_end|>\n" + CHATML
CHAT_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BPE_SIZE = 3000


def train_chat_tokenizer(template: str = CHATML):
    """A byte-level BPE tokenizer of exactly 3,000 tokens, ChatML specials, no pad token.

    Trained locally on seeded random words and countdown-like text; eos is ``<|im_end|>``
    and ``<|endoftext|>`` is a second stop token, as in Qwen2.5-Instruct.
    """
    import random

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    words = [
        "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 8))) for _ in range(4000)
    ]
    corpus = [" ".join(rng.choices(words, k=12)) for _ in range(3000)]
    corpus += [
        f"Using the numbers {i}, {i + 3}, {i * 2} make {i * 7}. (3 + 4) * 5 = 35"
        for i in range(200)
    ]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_SIZE,
        special_tokens=CHAT_SPECIALS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    out = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>")
    out.add_special_tokens({"additional_special_tokens": CHAT_SPECIALS})
    out.chat_template = template
    assert len(out) == BPE_SIZE and out.pad_token is None
    return out


def save_model_pair(root: Path, teacher, student, tok, teacher_tok=None) -> tuple[Path, Path]:
    """Save (teacher, student) with their tokenizers under ``root``; returns both paths."""
    paths = (root / "teacher", root / "student")
    for path, model, t in zip(paths, (teacher, student), (teacher_tok or tok, tok), strict=True):
        model.save_pretrained(path)
        t.save_pretrained(path)
    return paths


@pytest.fixture(scope="session")
def padded_qwen_pair(tmp_path_factory) -> tuple[Path, Path]:
    """(teacher_dir, student_dir) shaped like Qwen2.5-7B / 1.5B-Instruct, in miniature.

    One 3,000-token ChatML tokenizer without a pad token; teacher logits padded to 3,072, the
    tied student's to 3,008; both models list ``<|im_end|>`` and ``<|endoftext|>`` as eos.
    """
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = train_chat_tokenizer()
    stops = [tok.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    models = []
    for seed, vocab, hidden, layers, tied in ((1, 3072, 32, 2, False), (2, 3008, 16, 1, True)):
        torch.manual_seed(seed)
        cfg = Qwen2Config(
            vocab_size=vocab,
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=256,
            tie_word_embeddings=tied,
            eos_token_id=stops,
            bos_token_id=None,
            pad_token_id=None,
        )
        model = Qwen2ForCausalLM(cfg)
        model.generation_config.eos_token_id = stops
        models.append(model)
    return save_model_pair(tmp_path_factory.mktemp("padded-qwen"), *models, tok)


@pytest.fixture(scope="session")
def chat_llama_pair(tmp_path_factory) -> tuple[Path, Path]:
    """(teacher_dir, student_dir): unpadded Llama models (logits = the 3,000 tokens) whose
    tokenizers share the vocabulary but not the chat template (the teacher's adds a system turn).
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = train_chat_tokenizer()
    models = []
    for seed, hidden, layers in ((3, 32, 2), (4, 16, 1)):
        torch.manual_seed(seed)
        cfg = LlamaConfig(
            vocab_size=len(tok),
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=256,
            tie_word_embeddings=False,
            eos_token_id=tok.eos_token_id,
        )
        models.append(LlamaForCausalLM(cfg))
    teacher_tok = train_chat_tokenizer(CHATML_WITH_SYSTEM)
    return save_model_pair(tmp_path_factory.mktemp("chat-llama"), *models, tok, teacher_tok)


@contextmanager
def served_teacher(directory: Path, topk_max: int) -> Iterator[str]:
    """``directory`` served by ``serve-teacher``'s server on a free port of 127.0.0.1 in a
    thread; yields its ``…/v1`` URL and stops the server after the block."""
    from distillscope.teacher.server import make_server

    server = make_server(directory, port=0, topk_max=topk_max)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
