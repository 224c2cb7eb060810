"""Peak memory of one training step at a real vocabulary: default (fused) path vs plain logits.

    python bench/bench_memory.py [--vocab 151936] [--hidden 128] [--kinds forward_kl opd]

A random two-layer Qwen2-shaped student and teacher (V = 151,936 as Qwen2.5-1.5B, hidden 128),
a batch of 8 rollouts × (32 prompt + 128 completion) tokens, one forward/backward of the
training loop (``forward_backward``: teacher forward, student forward, objective, backward,
diagnostics). Each (kind, path) runs in its own subprocess; the extra peak RSS is the process's
high-water mark during the step (VmHWM, reset just before it) minus its RSS just before it.
Prints a Markdown table; the target is fused / plain ≤ 0.25.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def one_step(kind: str, path: str, vocab: int, hidden: int) -> dict:
    """Build models and a batch, reset the high-water mark, run one step; MB and seconds."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from distillscope.config import load_run_config
    from distillscope.rollout.rollouts import Rollouts, micro_batches
    from distillscope.teacher.scorer import TeacherScorer
    from distillscope.train.loop import Learner, StepBatch, forward_backward
    from distillscope.train.machinery import PhaseTimer
    from distillscope.train.step import Objective

    torch.set_num_threads(2)
    models = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        cfg = Qwen2Config(
            vocab_size=vocab,
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=512,
            tie_word_embeddings=seed == 1,
        )
        models.append(Qwen2ForCausalLM(cfg))
    batch, prompt, width = 8, 32, 128
    g = torch.Generator().manual_seed(0)
    prompt_B_P = torch.randint(0, vocab, (batch, prompt), generator=g)
    mask_B_T = torch.ones(batch, width, dtype=torch.long)
    rollouts = Rollouts(
        prompt_ids_B_P=prompt_B_P,
        prompt_mask_B_P=torch.ones_like(prompt_B_P),
        teacher_prompt_ids_B_Q=prompt_B_P,
        teacher_prompt_mask_B_Q=torch.ones_like(prompt_B_P),
        completion_B_T=torch.randint(0, vocab, (batch, width), generator=g),
        completion_mask_B_T=mask_B_T,
        logp_student_B_T=None,
        logp_teacher_B_T=None,
        logp_behavior_B_T=torch.full((batch, width), -12.0),
        lengths_B=mask_B_T.sum(1),
        truncated_B=torch.ones(batch, dtype=torch.bool),
        source="student",
        source_B=torch.ones(batch, dtype=torch.int8),
    )
    run_cfg = load_run_config(None, [f"objective.kind={kind}", f"objective.path={path}"])
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status_kb("VmRSS")
    t0 = time.perf_counter()
    objective = Objective.from_config(run_cfg.objective, vocab)
    batches = micro_batches(rollouts, run_cfg.optim.grad_accum)
    t_scores, _ = TeacherScorer(run_cfg, models[1], objective).scores(0, None, batches)
    learner = Learner(run_cfg, objective, models[0])
    forward_backward(learner, StepBatch(0, rollouts, batches), t_scores, PhaseTimer())
    seconds = time.perf_counter() - t0
    return {"extra_mb": (_status_kb("VmHWM") - before) / 1024, "seconds": seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=151_936)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--kinds", nargs="+", default=["forward_kl", "opd", "reverse_sampled"])
    ap.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_step(*args.child, args.vocab, args.hidden)))
        return
    print(
        f"V = {args.vocab:,}, hidden {args.hidden}, 2 layers, B = 8, 32 + 128 tokens; "
        f"{platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d')}"
    )
    print(
        "\n| objective | plain: extra peak RSS | default (fused): extra peak RSS | ratio "
        "| plain time | fused time |\n|---|---|---|---|---|---|"
    )
    for kind in args.kinds:
        res = {}
        for path in ("plain", "auto"):
            cmd = [
                sys.executable,
                __file__,
                "--child",
                kind,
                path,
                "--vocab",
                str(args.vocab),
                "--hidden",
                str(args.hidden),
            ]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            res[path] = json.loads(out.strip().splitlines()[-1])
        plain, fused = res["plain"], res["auto"]
        print(
            f"| {kind} | {plain['extra_mb']:,.0f} MB | {fused['extra_mb']:,.0f} MB | "
            f"{fused['extra_mb'] / plain['extra_mb']:.2f}× | {plain['seconds']:.1f} s | "
            f"{fused['seconds']:.1f} s |",
            flush=True,
        )


if __name__ == "__main__":
    main()
