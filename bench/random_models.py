"""Random-weight model pairs at real vocabulary sizes, built locally (no hub), for GPU checks.

    python bench/random_models.py --out /tmp/pairs            # llama-128256/ and qwen2-151936/

Each pair directory holds ``teacher/`` and ``student/``: Hugging Face directories that share one
byte-level BPE tokenizer whose length is the real vocabulary (128,256 as Llama 3, 151,936 as
Qwen2.5-1.5B; a small trained BPE padded with filler tokens that text never produces), with a
ChatML chat template and ``<|im_end|>``/``<|endoftext|>`` stop tokens. The student's embeddings
are tied (as Qwen2.5-1.5B's); hidden sizes are small so that the vocabulary dominates memory,
the regime that real checkpoints are in.

    python bench/random_models.py --out /tmp/pairs --real-shape 4   # qwen2.5-shape-L4/

``--real-shape LAYERS`` writes the pair the TRL step benchmark times at a real model's shape: a
student with Qwen2.5-0.5B's layer shape (hidden 896, MLP 4,864, 14 query / 2 key-value heads,
tied embeddings) and a teacher with Qwen2.5-3B's (hidden 2,048, 2.3× wider, MLP 11,008, 16 / 2
heads, tied), both at V = 151,936 with LAYERS layers each (the real models have 24 and 36).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import NamedTuple

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "Using the numbers 3, 7, 25 make 46. Think step by step, then give <answer>25+3*7</answer>.",
    "The answer is (25 - 7) * 3 = 54; every number is used exactly once.",
    "Question: which option is correct? A, B, C or D. Answer: B",
] * 8
#: name → (architecture, vocabulary length, teacher width/layers, student width/layers)
PAIRS = {
    "llama-128256": ("llama", 128_256, (256, 4), (128, 2)),
    "qwen2-151936": ("qwen2", 151_936, (256, 4), (128, 2)),
}


class Shape(NamedTuple):
    """One model's dimensions (a Qwen2 decoder; head dim = hidden / heads)."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    tied: bool


#: The real-shape pair (``--real-shape``): Qwen2.5-0.5B's and Qwen2.5-3B's layers.
REAL_STUDENT = Shape(hidden=896, intermediate=4_864, heads=14, kv_heads=2, tied=True)
REAL_TEACHER = Shape(hidden=2_048, intermediate=11_008, heads=16, kv_heads=2, tied=True)
REAL_VOCAB = 151_936


def build_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE of exactly ``vocab_size`` tokens: trained on a tiny corpus, then padded."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    state = json.loads(tok.to_str())
    vocab = state["model"]["vocab"]
    for i in range(vocab_size - len(vocab)):  # fillers: in the vocabulary, never produced
        vocab[f"<|filler_{i}|>"] = len(vocab)
    padded = Tokenizer.from_str(json.dumps(state))
    out = PreTrainedTokenizerFast(
        tokenizer_object=padded, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    out.chat_template = CHATML
    assert len(out) == vocab_size, (len(out), vocab_size)
    return out


def build_model(arch: str, vocab_size: int, hidden: int, layers: int, tied: bool, seed: int):
    """A random-weight causal LM of ``vocab_size`` logits (small hidden size, real vocabulary)."""
    torch.manual_seed(seed)
    dims = dict(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=tied,
        bos_token_id=None,
        eos_token_id=2,
        pad_token_id=0,
    )
    if arch == "llama":
        return LlamaForCausalLM(LlamaConfig(**dims))
    return Qwen2ForCausalLM(Qwen2Config(**dims))


def build_qwen2(shape: Shape, vocab_size: int, layers: int, seed: int) -> Qwen2ForCausalLM:
    """A random-weight Qwen2 causal LM of ``shape`` with ``layers`` layers (full attention)."""
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=4_096,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        rms_norm_eps=1e-6,
        tie_word_embeddings=shape.tied,
        bos_token_id=None,
        eos_token_id=2,
        pad_token_id=0,
    )
    return Qwen2ForCausalLM(cfg)


def save_real_shape_pair(root: Path, layers: int) -> Path:
    """Write ``root/qwen2.5-shape-L<layers>/{teacher,student}`` (skipped when there)."""
    pair = root / f"qwen2.5-shape-L{layers}"
    tok = None
    for role, shape, seed in (("teacher", REAL_TEACHER, 1), ("student", REAL_STUDENT, 2)):
        path = pair / role
        if (path / "config.json").is_file():
            continue
        tok = tok or build_tokenizer(REAL_VOCAB)
        model = build_qwen2(shape, REAL_VOCAB, layers, seed)
        model.generation_config.eos_token_id = [SPECIALS.index(t) for t in SPECIALS[::2]]
        model.save_pretrained(path)
        tok.save_pretrained(path)
    return pair


def save_pair(root: Path, name: str) -> Path:
    """Write ``root/name/{teacher,student}`` (skipped when already there); returns the pair dir."""
    arch, vocab_size, (t_hidden, t_layers), (s_hidden, s_layers) = PAIRS[name]
    pair = root / name
    tok = None
    for role, hidden, layers, tied, seed in (
        ("teacher", t_hidden, t_layers, False, 1),
        ("student", s_hidden, s_layers, True, 2),
    ):
        path = pair / role
        if (path / "config.json").is_file():
            continue
        tok = tok or build_tokenizer(vocab_size)
        model = build_model(arch, vocab_size, hidden, layers, tied, seed)
        model.generation_config.eos_token_id = [SPECIALS.index(t) for t in SPECIALS[::2]]
        model.save_pretrained(path)
        tok.save_pretrained(path)
    return pair


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/distillscope-pairs"))
    ap.add_argument("--pairs", nargs="*", default=list(PAIRS), choices=list(PAIRS))
    ap.add_argument("--real-shape", type=int, metavar="LAYERS", help="also the real-shape pair")
    args = ap.parse_args()
    for name in args.pairs:
        print(save_pair(args.out, name))
    if args.real_shape:
        print(save_real_shape_pair(args.out, args.real_shape))


if __name__ == "__main__":
    main()
