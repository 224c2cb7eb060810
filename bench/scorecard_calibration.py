"""Scorecard calibration of a preset's design: false-verdict and power rates per claim.

    PYTHONPATH=src python bench/scorecard_calibration.py --preset paper --draws 100
    PYTHONPATH=src python bench/scorecard_calibration.py --draws 200 --claims 3,4,8,12

Builds the preset's planned runs plus a baseline row with the default noise (a residual of
3 pp for accuracies and pp-valued metrics, ``scorecard.noise.DEFAULT_SD``, or the binomial
evaluation noise at the planned item and sample counts where larger), runs ``calibrate`` and
prints a Markdown table: per claim its worst false-support rate (null for an effect claim, a
part planted at its margin, degenerate tables), its worst false-contradiction rate (planted
published effects, null for a no-effect claim, degenerate tables) and its power ("supported"
under the planted effects). Seeded and deterministic.
"""

from __future__ import annotations

import argparse
import time

from distillscope.scorecard.calibrate import calibrate, planned_table
from distillscope.scorecard.runner import CLAIM_IDS
from distillscope.study.spec import expand, load_spec
from distillscope.study.table import planned_row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--claims", help="comma-separated claim numbers (default: all)")
    args = parser.parse_args()
    claims = [int(c) for c in args.claims.split(",")] if args.claims else None
    df = planned_table([planned_row(r) for r in expand(load_spec(args.preset))])
    start = time.perf_counter()
    cal = calibrate(df, args.draws, args.seed, claims)
    took = time.perf_counter() - start
    print(f"preset {args.preset}: {len(df)} rows, {args.draws} draws, {took:.0f} s")
    head = (
        "| claim | null: supported | null: contradicted | false support | false contra. | power |"
    )
    print(head)
    print("|---|---|---|---|---|---|")
    for cid in CLAIM_IDS:
        c = str(cid)
        if c not in cal["false_rate"]:
            continue
        null = cal["rates"]["null"][c]
        if null.get("not implemented", 0) == 1:  # no code writes what it reads: nothing to rate
            print(f"| {cid} | not implemented | | | | |")
            continue
        print(
            f"| {cid} | {null.get('supported', 0):.1%} | {null.get('contradicted', 0):.1%} | "
            f"{cal['false_support'][c]:.1%} | {cal['false_contradiction'][c]:.1%} | "
            f"{cal['power'][c]:.0%} |"
        )


if __name__ == "__main__":
    main()
