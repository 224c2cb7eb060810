"""A few training steps of OnPD and OffPD on real-vocabulary random models: speed, memory, time.

    python bench/random_models.py --out /tmp/pairs
    python bench/gpu_steps.py --pairs-dir /tmp/pairs --device cuda [--teacher-device cuda:1]

For every pair directory (``teacher/``, ``student/``) and policy (student = OnPD, teacher =
OffPD) it trains ``--steps`` steps of forward KL on Countdown-3 with chat prompts (no
evaluation) and prints one JSON line: completion tokens per second (after the first step),
peak device memory, and the per-phase time split from ``metrics.jsonl``. Runs on CPU too
(``--device cpu``, then peak memory is not measured).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import torch

from distillscope.config import load_run_config
from distillscope.store import read_metrics
from distillscope.train.loop import distill


def run(pair: Path, policy: str, args: argparse.Namespace) -> dict:
    out = args.out / f"{pair.name}-{policy}"
    shutil.rmtree(out, ignore_errors=True)
    cfg = load_run_config(
        None,
        [
            f"model.teacher={pair / 'teacher'}",
            f"model.student={pair / 'student'}",
            f"model.device={args.device}",
            f"model.teacher_device={args.teacher_device}",
            f"model.teacher_dtype={args.teacher_dtype}",
            "task.name=countdown3",
            "task.prompt_format=chat",
            f"task.max_new_tokens={args.max_new_tokens}",
            f"rollout.policy={policy}",
            f"rollout.prompts_per_step={args.prompts}",
            "objective.kind=forward_kl",
            f"objective.chunk_size={args.chunk_size}",
            f"optim.steps={args.steps}",
            "optim.warmup_steps=1",
            "checkpoint_every=0",
        ],
    )
    cuda = torch.device(args.device).type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    distill(cfg, out)
    wall = time.perf_counter() - t0
    rows = read_metrics(out)
    timed = rows[1:] or rows  # the first step pays for warm-up (kernels, allocator)
    phases = {k: sum(r[k] for r in timed) for k in timed[0] if k.startswith("time/")}
    tokens_per_s = sum(r["perf/tokens_per_s"] for r in timed) / len(timed)
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    return {
        "pair": pair.name,
        "policy": policy,
        "steps": len(rows),
        "wall_s_incl_load": round(wall, 1),
        "tokens_per_s": round(tokens_per_s, 1),
        "peak_gib": None if peak is None else round(peak, 2),
        "phase_s": {k.removeprefix("time/"): round(v, 2) for k, v in phases.items()},
        "loss": [round(r["train/loss"], 4) for r in rows],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs-dir", type=Path, default=Path("/tmp/distillscope-pairs"))
    ap.add_argument("--names", nargs="*", help="pair directories to run (default: all)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--teacher-device", default=None)
    ap.add_argument("--teacher-dtype", default="bfloat16")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--chunk-size", type=int, default=1024)
    ap.add_argument("--out", type=Path, default=Path("/tmp/distillscope-gpu-steps"))
    args = ap.parse_args()
    args.teacher_device = args.teacher_device or args.device
    names = args.names or sorted(p.name for p in args.pairs_dir.iterdir() if p.is_dir())
    for name in names:
        for policy in ("student", "teacher"):
            print(json.dumps(run(args.pairs_dir / name, policy, args)), flush=True)


if __name__ == "__main__":
    main()
