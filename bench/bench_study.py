"""Time the main job as ``make demo`` runs it: ``distillscope study`` in its own process.

    python bench/bench_study.py [--preset quick] [--executor pool] [--workers 2] [--out DIR]

Prints the command's wall time (start-up, baselines, runs and report, as a user waits for them)
and, from the study's ``provenance.json``, the part spent inside the study itself; from its
``calibration.json``, the report's calibration time (``seconds``) and its share of the wall
time (the target: ≤ 10%, issue 42).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--executor", default="pool")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-study"))
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "distillscope.cli",
        "study",
        "--preset",
        args.preset,
        "--out",
        str(args.out),
        "--executor",
        args.executor,
        "--workers",
        str(args.workers),
    ]
    t0 = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    provenance = json.loads((args.out / "provenance.json").read_text())
    inside = datetime.fromisoformat(provenance["finished"]) - datetime.fromisoformat(
        provenance["started"]
    )
    runs = [d for d in (args.out / "runs").iterdir() if not d.name.startswith("baseline")]
    calibration = calibration_seconds(args.out)
    print(
        json.dumps(
            {
                "command": f"distillscope study --preset {args.preset} --executor {args.executor} "
                f"--workers {args.workers}",
                "runs": len(runs),
                "wall_s": round(wall, 1),
                "study_s (baselines + runs, from provenance.json)": inside.total_seconds(),
                "calibration_s (from calibration.json)": calibration,
                "calibration share of wall_s": f"{calibration / wall:.1%}",
                "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            },
            indent=1,
        )
    )


def calibration_seconds(study: Path) -> float:
    """The report's calibration time, ``seconds`` of the study's ``calibration.json``."""
    path = study / "calibration.json"
    if not path.exists():
        sys.exit(f"{path}: missing: the study ran with --no-calibrate (run it without)")
    return float(json.loads(path.read_text())["seconds"])


if __name__ == "__main__":
    main()
