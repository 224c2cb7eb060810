"""Time the main job: a whole study preset (default: quick) with the default executor.

    python bench/bench_study.py [--preset quick] [--executor pool] [--workers 2] [--out DIR]

Prints the wall time of the study (training + evaluation of every run) and of the report.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import time
from pathlib import Path

from distillscope.report import write_report
from distillscope.study.runner import run_study
from distillscope.study.spec import expand, load_spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--executor", default="pool")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-study"))
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    spec = load_spec(args.preset)
    t0 = time.perf_counter()
    run_study(spec, args.out, executor=args.executor, workers=args.workers)
    t_study = time.perf_counter() - t0
    write_report(args.out)
    t_report = time.perf_counter() - t0 - t_study
    print(json.dumps({
        "preset": args.preset,
        "runs": len(expand(spec)),
        "executor": f"{args.executor} ({args.workers} workers)",
        "study_s": round(t_study, 1),
        "report_s": round(t_report, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
