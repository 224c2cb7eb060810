"""Rollouts on CPU from vLLM, the built-in sampler and ``generate()``; an OnPD step with each.

    .venv-vllm/bin/python bench/bench_rollout_engines.py [--repeats 2] [--threads 1]

Runs in the vLLM environment (``make test-vllm`` builds it). Cases: the shipped testbed student
(B = 32, L = 24) and a random-weight Qwen2 at V = 151,936 with Qwen2.5-0.5B's layer shape
(bench/random_models.py ``--real-shape``; 2 layers, B = 8, L = 32). Each sampler writes exactly
B × L tokens (no stop token) at T = 1. "vLLM rollout" is
:meth:`~distillscope.rollout.vllm_engine.VLLMEngine.sample` as a run calls it: weight push,
vLLM's generation and the trainer's recomputation of the log-probs; "vLLM generate" is vLLM's
generation alone. Implementations are interleaved and each reports its best of ``repeats``.
Then one OnPD step of the testbed (forward KL, 32 prompts, 24 new tokens) with each engine:
the median ``time/rollout`` and ``time/step`` of steps 1–3 (step 0 pays vLLM's start).
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch
from bench_sampler import best_times, prompts
from random_models import REAL_STUDENT, REAL_VOCAB, build_qwen2
from transformers import AutoModelForCausalLM

from distillscope.config import load_run_config
from distillscope.models import resolve_model_path
from distillscope.rollout.policies import StudentPolicy
from distillscope.rollout.rollouts import PromptBatch, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.rollout.vllm_engine import VLLMEngine
from distillscope.store import read_metrics
from distillscope.train.loop import distill


@torch.inference_mode()
def hf_generate(model, batch: PromptBatch, new_tokens: int) -> None:
    model.generate(
        input_ids=batch.ids_B_P,
        attention_mask=batch.mask_B_P,
        do_sample=True,
        top_k=0,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        eos_token_id=None,
        pad_token_id=0,
    )


def vllm_generate(engine: VLLMEngine, batch: PromptBatch, new_tokens: int) -> None:
    rows = [ids[m.bool()].tolist() for ids, m in zip(batch.ids_B_P, batch.mask_B_P, strict=True)]
    params = engine._sampling_params(max_tokens=new_tokens, ignore_eos=True, seed=0, logprobs=0)
    engine.llm.generate(
        [engine._tokens_prompt(prompt_token_ids=r) for r in rows], params, use_tqdm=False
    )


def sampler_case(model, batch: PromptBatch, new_tokens: int, repeats: int) -> dict[str, float]:
    """Tokens per second of each implementation on one model and batch."""
    engine = VLLMEngine(model)
    spec = SamplingSpec(new_tokens, stop_ids=[], pad_id=0)
    policy = StudentPolicy()
    fns = {
        "generate()": lambda: hf_generate(model, batch, new_tokens),
        "builtin": lambda: sample_rollouts(
            policy, model, None, batch, spec, torch.Generator().manual_seed(0)
        ),
        "vLLM generate": lambda: vllm_generate(engine, batch, new_tokens),
        "vLLM rollout": lambda: engine.sample(
            policy, batch, spec, torch.Generator().manual_seed(0)
        ),
    }
    tokens = batch.ids_B_P.shape[0] * new_tokens
    return {name: tokens / t for name, t in best_times(fns, repeats).items()}


def step_times(engine: str, run_dir: Path) -> tuple[float, float]:
    """Median (time/rollout, time/step) of steps 1–3 of a 4-step testbed OnPD run."""
    items = ["optim.steps=4", "rollout.prompts_per_step=32", "task.max_new_tokens=24"]
    distill(load_run_config(None, [*items, f"rollout.engine={engine}"]), run_dir)
    rows = read_metrics(run_dir)[1:]
    return tuple(statistics.median(r[k] for r in rows) for k in ("time/rollout", "time/step"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    testbed = AutoModelForCausalLM.from_pretrained(resolve_model_path("testbed:student")).eval()
    real = build_qwen2(REAL_STUDENT, REAL_VOCAB, layers=2, seed=2).eval()
    cases = [
        ("testbed student, B=32, L=24", testbed, PromptBatch(*prompts(54, 32)), 24),
        (
            f"Qwen2.5-0.5B shape, 2 layers, V={REAL_VOCAB:,}, B=8, L=32",
            real,
            PromptBatch(*prompts(1000, 8)),
            32,
        ),
    ]
    rows = [(label, sampler_case(m, b, n, args.repeats)) for label, m, b, n in cases]
    with tempfile.TemporaryDirectory() as tmp:
        steps = {e: step_times(e, Path(tmp) / e) for e in ("builtin", "vllm")}

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, fp32, T = 1\n")
    names = list(rows[0][1])
    print("| case | " + " | ".join(f"{n} tok/s" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for label, speeds in rows:
        print(f"| {label} | " + " | ".join(f"{speeds[n]:,.0f}" for n in names) + " |")
    print("\n| OnPD step, testbed, 32 × 24 tokens | time/rollout (s) | time/step (s) |")
    print("|---|---|---|")
    for engine, (rollout_s, step_s) in steps.items():
        print(f"| rollout.engine={engine} | {rollout_s:.2f} | {step_s:.2f} |")


if __name__ == "__main__":
    main()
