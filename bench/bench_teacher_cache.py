"""What sharing the teacher's work saves off-policy runs at a real vocabulary (V = 128,256).

    python bench/bench_teacher_cache.py [--steps 3] [--topk 64] [--out /tmp/bench-teacher-cache]

On the random Llama-3-vocabulary pair of ``bench/random_models.py`` (teacher 256×4, student
128×2), off-policy forward-KL runs on Countdown-3 with chat prompts: one without a cache (the
teacher generates and scores every step), then for each cached teacher form — its final hidden
states (the exact objective) and its top-k fold (``objective.teacher_topk``, another objective) —
a first run that fills the cache and a second that reads it. Prints per form the step time, the
teacher time the reading run skipped (``time/teacher_saved``) and the bytes of teacher scores
cached per step.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import torch

from distillscope.config import load_run_config
from distillscope.store import read_metrics
from distillscope.train.loop import distill

try:
    from random_models import save_pair
except ImportError:  # run as a module from the repository root
    from bench.random_models import save_pair


def _run(pair: Path, out: Path, steps: int, cache: Path | None, **over) -> dict:
    items = {
        "model.teacher": pair / "teacher",
        "model.student": pair / "student",
        "task.name": "countdown3",
        "task.prompt_format": "chat",
        "task.max_new_tokens": 32,
        "rollout.policy": "teacher",
        "rollout.prompts_per_step": 8,
        "rollout.cache_teacher_rollouts": cache is not None,
        "optim.steps": steps,
        "optim.lr": 1e-4,
        "checkpoint_every": 0,
        **over,
    }
    cfg = load_run_config(None, [f"{k}={v}" for k, v in items.items()])
    t0 = time.perf_counter()
    distill(cfg, out, rollout_cache=cache, overwrite=True)
    wall = time.perf_counter() - t0
    rows = read_metrics(out)
    return {
        "step_s": sum(r["time/step"] for r in rows) / len(rows),
        "saved_s": sum(r["time/teacher_saved"] for r in rows) / len(rows),
        "wall_s": wall,
    }


def _score_bytes(cache: Path, steps: int) -> float:
    """Bytes of teacher scores per step: every entry but the rollouts (the larger files are the
    scores at this V; rollouts are a few kB)."""
    sizes = sorted(p.stat().st_size for p in cache.glob("*.safetensors"))
    return sum(sizes[len(sizes) // 2 :]) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--topk", type=int, default=64)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-teacher-cache"))
    args = ap.parse_args()
    pair = save_pair(args.out / "pairs", "llama-128256")
    base = _run(pair, args.out / "none", args.steps, None)
    print("| teacher scores | run | step (s) | teacher time skipped (s/step) | cached per step |")
    print("|---|---|---|---|---|")
    print(f"| recomputed every step | no cache | {base['step_s']:.2f} | – | – |")
    for form, over in (
        ("hidden states (exact)", {}),
        (f"top-{args.topk} fold (another objective)", {"objective.teacher_topk": args.topk}),
    ):
        cache = args.out / f"cache-{len(over)}"
        shutil.rmtree(cache, ignore_errors=True)
        fill = _run(pair, args.out / "fill", args.steps, cache, **over)
        read = _run(pair, args.out / "read", args.steps, cache, **over)
        size = _score_bytes(cache, args.steps) / 1e6
        for name, r in (("fills the cache", fill), ("reads it", read)):
            saved = f"{r['saved_s']:.2f}" if r["saved_s"] else "–"
            print(f"| {form} | {name} | {r['step_s']:.2f} | {saved} | {size:.2f} MB |")
    print(
        f"\nV = 128,256; 8 prompts × ≤ 32 new tokens per step, {args.steps} steps, "
        f"{torch.get_num_threads()} threads."
    )


if __name__ == "__main__":
    main()
