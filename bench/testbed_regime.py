"""The testbed's study-level regime values, from a study's results, into ``testbed.json``.

    distillscope study configs/studies/testbed-regime.yaml \
        model.student=bench/records/testbed-regime-2026-12-06/student --out runs/regime
    python bench/testbed_regime.py runs/regime \
        --testbed bench/records/testbed-regime-2026-12-06      # prints; --write records them

From the study's runs at ``--high-lr`` (3e-4, the presets' high LR): per cell (rollout × KL
direction × LR) with ≥ 3 seeds, the runs that collapse — failed or non-finite, or ending
≥ 15 pp below the mean of their cell's other seeds (002: "a LR alto es inestable y colapsa") —
counted per KL direction, and the forward-KL runs' bf16 update sparsity ([P]: 52–60% at its
high LR). From its ``grpo`` runs: held-out accuracy after GRPO minus before, per seed, with the
binomial standard error of a difference of two accuracies on the same items (an upper bound
for paired items), and their mean over the standard error of the mean. ``--write`` stores each
value with its source under ``regime`` (``testbed info`` prints them).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

ACC, SPARSE = "eval/accuracy", "eval/sparsity_bf16_tau1e-06"
CELL = ["rollout.policy", "objective.kind", "optim.lr"]
COLLAPSE_PP = 15.0


def _results(study: Path) -> pd.DataFrame:
    path = study / "results.parquet"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run the study first (module doc)")
    return pd.read_parquet(path)


def collapses(df: pd.DataFrame) -> pd.DataFrame:
    """Per run of a cell with ≥ 3 seeds: accuracy, its cell's other seeds' mean, collapsed."""
    out = []
    finished = df[df["status"].isin(["done", "failed"])]  # a running run is not judged
    for key, cell in finished.groupby(CELL):
        if len(cell) < 3:
            continue
        for _, run in cell.iterrows():
            others = cell.drop(index=run.name)[ACC].mean()
            acc = run[ACC]
            bad = run["status"] != "done" or not math.isfinite(acc)
            collapsed = bad or 100 * (others - acc) >= COLLAPSE_PP
            out.append((*key, run["seed"], acc, others, collapsed))
    return pd.DataFrame(out, columns=[*CELL, "seed", "accuracy", "others_mean", "collapsed"])


def grpo_gain(df: pd.DataFrame, items: int) -> tuple[float, float, int]:
    """(mean gain, its standard error, seeds) of GRPO's held-out accuracy on ``items`` items:
    per run the binomial SE of after − before, √(a(1−a)/n + b(1−b)/n), combined over seeds."""
    runs = df[(df["experiment"] == "grpo") & (df["status"] == "done")]
    after, before = runs["rlvr/eval_accuracy"], runs["rlvr/eval_accuracy_before"]
    var = (after * (1 - after) + before * (1 - before)) / items
    n = len(runs)
    return float((after - before).mean()), float(math.sqrt(var.sum()) / n), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("study", type=Path, help="the study directory (module doc)")
    ap.add_argument("--high-lr", type=float, default=3e-4)
    ap.add_argument("--items", type=int, default=200, help="held-out items of the evaluation")
    ap.add_argument("--testbed", type=Path, default=Path("src/distillscope/testbed/weights"))
    ap.add_argument("--write", action="store_true", help="record the values in testbed.json")
    args = ap.parse_args()
    df = _results(args.study)
    table = collapses(df)
    print(table.to_markdown(index=False, floatfmt=".3g"))
    at_high = table[table["optim.lr"] == args.high_lr]
    src = f"{args.study} (LR {args.high_lr:g}, {COLLAPSE_PP:g} pp rule)"
    regime: dict[str, dict] = {}
    for kind in ("reverse_kl", "forward_kl"):
        rows = at_high[at_high["objective.kind"] == kind]
        n = int(rows["collapsed"].sum())
        regime[f"{kind}_collapses"] = {"value": n, "source": f"{src}, {len(rows)} runs"}
    fwd = df[(df["optim.lr"] == args.high_lr) & (df["objective.kind"] == "forward_kl")]
    regime["bf16_sparsity"] = {
        "value": float(fwd[SPARSE].mean()),
        "source": f"{args.study} (forward KL, LR {args.high_lr:g}, {len(fwd)} runs)",
    }
    mean, se, n = grpo_gain(df, args.items) if "rlvr/eval_accuracy" in df else (0.0, 0.0, 0)
    if n:  # else not measured: no GRPO run finished
        print(f"GRPO held-out accuracy gain {100 * mean:+.1f} pp ± {100 * se:.1f} (SE, {n} runs)")
        regime["grpo_gain_z"] = {
            "value": mean / se if se > 0 else math.nan,
            "source": f"{args.study} ({100 * mean:+.1f} pp ± {100 * se:.1f}, {n} seeds)",
        }
    print(json.dumps(regime, indent=1))
    if args.write:
        path = args.testbed / "testbed.json"
        info = json.loads(path.read_text())
        info["regime"] = regime
        path.write_text(json.dumps(info, indent=2) + "\n")
        print(f"wrote the regime entry of {path}")


if __name__ == "__main__":
    main()
