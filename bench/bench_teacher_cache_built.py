"""A teacher cache built once against a live testbed teacher: what each later run pays.

    python bench/bench_teacher_cache_built.py [--steps 6] [--topk 8] [--out /tmp/bench-tcb]

On the shipped testbed pair, off-policy forward-KL runs on tb-countdown3 (16 prompts × ≤ 24 new
tokens a step, a top-k teacher): ``distillscope teacher-cache build`` once, then one run with the
live top-k teacher (it samples and scores every step) and one reading the cache
(``model.teacher_cache``). Prints the build's seconds, each run's mean step, rollout and teacher
seconds, the cache's bytes per step, and the largest loss difference between the two runs (0:
the cache replays the same bits).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import torch

from distillscope.config import load_run_config
from distillscope.store import read_metrics
from distillscope.train.cache_build import build_teacher_cache
from distillscope.train.loop import distill


def _cfg(steps: int, topk: int, *extra: str):
    return load_run_config(
        None,
        [
            "rollout.policy=teacher",
            f"objective.teacher_topk={topk}",
            f"optim.steps={steps}",
            "rollout.prompts_per_step=16",
            "task.max_new_tokens=24",
            "checkpoint_every=0",
            *extra,
        ],
    )


def _run(cfg, out: Path) -> tuple[dict, list[float]]:
    distill(cfg, out, overwrite=True)
    rows = read_metrics(out)

    def mean(key: str) -> float:
        return sum(r.get(key, 0.0) for r in rows) / len(rows)

    phases = {k: mean(f"time/{k}") for k in ("step", "rollout", "teacher_forward")}
    return phases, [r["train/loss"] for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-tcb"))
    args = ap.parse_args()
    cache = args.out / "cache"
    shutil.rmtree(args.out, ignore_errors=True)
    t0 = time.perf_counter()
    manifest = build_teacher_cache([_cfg(args.steps, args.topk)], cache, "bench")
    build_s = time.perf_counter() - t0
    live, live_loss = _run(_cfg(args.steps, args.topk), args.out / "live")
    read, read_loss = _run(
        _cfg(args.steps, args.topk, f"model.teacher_cache={cache}"), args.out / "read"
    )
    size = sum(s["bytes"] for s in manifest["shards"].values()) / args.steps
    diff = max(abs(a - b) for a, b in zip(live_loss, read_loss, strict=True))
    print("| teacher | step (s) | rollout (s) | teacher scores (s) |")
    print("|---|---|---|---|")
    for name, r in (("live top-k testbed teacher", live), ("read from the cache", read)):
        print(f"| {name} | {r['step']:.3f} | {r['rollout']:.3f} | {r['teacher_forward']:.3f} |")
    print(
        f"\nBuilding the cache once: {build_s:.1f} s for {args.steps} steps "
        f"({size / 1e3:.1f} kB a step on disk, k = {args.topk}); step time read/live "
        f"{read['step'] / live['step']:.2f}; largest loss difference {diff:.1e}; "
        f"{torch.get_num_threads()} threads."
    )


if __name__ == "__main__":
    main()
