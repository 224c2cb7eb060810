"""Calibrate the testbed's RLVR stage: held-out accuracy before and after RLVR, per setting.

    python bench/rlvr_calibration.py STUDY_DIR --out /tmp/rlvr-cal \\
        --steps 60 --lr 5e-5 --group-size 8 --prompts 8 [--parents RUN_ID ...]

Starts one RLVR run (``distillscope.study.run_one``, the study's own code path) from each named
finished run of ``STUDY_DIR`` (default: the first OnPD and the first OffPD forward-KL run of its
main grid) with the given ``rlvr`` settings, in ``--out``, and prints the before/after accuracy
on the RLVR task, the first/final training reward and the wall time of each. The parent runs
are linked, not copied; nothing in ``STUDY_DIR`` is written.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from distillscope.config import load_run_config
from distillscope.store import read_status
from distillscope.study.run_one import run_one


def default_parents(runs: Path) -> list[str]:
    """The first finished OnPD and OffPD forward-KL runs of the main grid."""
    out = []
    for policy in ("student", "teacher"):
        for d in sorted(runs.glob(f"main_policy-{policy}_kind-forward_kl_*")):
            if read_status(d)["status"] == "done":
                out.append(d.name)
                break
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study", type=Path)
    p.add_argument("--parents", nargs="+", default=[], metavar="RUN_ID")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--task", default="tb-countdown3-hard")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    runs = a.study / "runs"
    (a.out / "runs").mkdir(parents=True, exist_ok=True)
    for name in a.parents or default_parents(runs):
        link = a.out / "runs" / name
        if not link.exists():
            link.symlink_to((runs / name).resolve())
        settings = {"steps": a.steps, "lr": a.lr, "group_size": a.group_size}
        settings |= {"prompts_per_step": a.prompts, "task": a.task}
        cfg = load_run_config(
            str(runs / name / "config.yaml"),
            [f"rlvr.parent={name}", "eval.coverage_items=0"]
            + [f"rlvr.{k}={v}" for k, v in settings.items()],
        )
        child = a.out / "runs" / f"rlvr-{a.steps}-{a.lr:g}-{a.group_size}x{a.prompts}-{name}"
        start = time.perf_counter()
        out = run_one(cfg, child)
        row = {k: round(v, 3) for k, v in out.items() if k.startswith("rlvr/")}
        row |= {"parent": name, **settings, "seconds": round(time.perf_counter() - start, 1)}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
