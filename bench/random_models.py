"""Random-weight model pairs at real vocabulary sizes, built locally (no hub), for GPU checks.

    python bench/random_models.py --out /tmp/pairs            # llama-128256/ and qwen2-151936/

Each pair directory holds ``teacher/`` and ``student/``: Hugging Face directories that share one
byte-level BPE tokenizer whose length is the real vocabulary (128,256 as Llama 3, 151,936 as
Qwen2.5-1.5B; a small trained BPE padded with filler tokens that text never produces), with a
ChatML chat template and ``<|im_end|>``/``<|endoftext|>`` stop tokens. The student's embeddings
are tied (as Qwen2.5-1.5B's); hidden sizes are small so that the vocabulary dominates memory,
the regime that real checkpoints are in.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

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
    ap.add_argument("--pairs", nargs="+", default=list(PAIRS), choices=list(PAIRS))
    args = ap.parse_args()
    for name in args.pairs:
        print(save_pair(args.out, name))


if __name__ == "__main__":
    main()
