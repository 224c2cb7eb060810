"""Time one on-policy testbed run with the quick-study settings, evaluation included.

    python bench/bench_train.py [--preset quick] [--out /tmp/bench-train]

Prints the wall time of training and of evaluation, and the per-phase split of a training step
(rollout, teacher forward, student forward/backward, optimizer) from metrics.jsonl.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import time
from pathlib import Path

import torch

from distillscope.eval.evaluate import evaluate
from distillscope.store import read_metrics
from distillscope.study.spec import expand, load_spec
from distillscope.train.loop import distill


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-train"))
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    # The first on-policy (student-written), forward-KL run of the preset's main grid.
    run = next(
        r
        for r in expand(load_spec(args.preset))
        if r.config.rollout.policy == "student" and r.config.objective.kind == "forward_kl"
    )
    t0 = time.perf_counter()
    student = distill(run.config, args.out)
    t_train = time.perf_counter() - t0
    evaluate(run.config, args.out, student)
    t_eval = time.perf_counter() - t0 - t_train
    rows = read_metrics(args.out)
    phases = {k: sum(r[k] for r in rows) for k in rows[0] if k.startswith("time/")}
    result = {
        "run": run.run_id,
        "steps": len(rows),
        "train_s": round(t_train, 1),
        "eval_s": round(t_eval, 1),
        "total_s": round(t_train + t_eval, 1),
        "phase_s": {k: round(v, 1) for k, v in phases.items()},
        "tokens_per_s": round(sum(r["perf/tokens_per_s"] for r in rows) / len(rows), 1),
        "machine": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
