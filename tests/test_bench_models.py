"""The GPU check's parts that run on CPU: real-vocabulary tokenizers and random model pairs."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from distillscope.models.load import load_pair

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _bench_module(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


random_models = _bench_module("random_models")


def test_tokenizer_has_exactly_the_real_vocabulary_and_a_chat_template():
    tok = random_models.build_tokenizer(151_936)
    assert len(tok) == 151_936
    ids = tok("Using the numbers 3, 7, 25 make 46.").input_ids
    assert max(ids) < 1_000  # text never produces the filler tokens
    assert tok.decode(ids) == "Using the numbers 3, 7, 25 make 46."
    chat = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>"


@pytest.mark.slow
def test_a_small_pair_loads_and_trains_with_gpu_steps_on_cpu(tmp_path, monkeypatch):
    monkeypatch.setitem(random_models.PAIRS, "tiny-qwen2", ("qwen2", 1_024, (32, 1), (16, 1)))
    pair = random_models.save_pair(tmp_path / "pairs", "tiny-qwen2")
    loaded = load_pair(pair / "teacher", pair / "student")
    assert loaded.vocab_size == 1_024
    assert loaded.student.config.tie_word_embeddings
    out = subprocess.run(
        [
            sys.executable,
            str(BENCH / "gpu_steps.py"),
            "--pairs-dir",
            str(tmp_path / "pairs"),
            "--device",
            "cpu",
            "--teacher-dtype",
            "float32",
            "--steps",
            "2",
            "--prompts",
            "2",
            "--max-new-tokens",
            "4",
            "--chunk-size",
            "0",
            "--out",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["pair"], r["policy"], r["steps"]) for r in lines] == [
        ("tiny-qwen2", "student", 2),
        ("tiny-qwen2", "teacher", 2),
    ]
    assert all(r["tokens_per_s"] > 0 and r["peak_gib"] is None for r in lines)
