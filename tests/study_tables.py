"""Synthetic study directories for the results, scorecard and report tests: numbers chosen so
that answers are known.

Tests reach the builders through the ``synth`` fixture, which the conftest.py of
tests/results/, tests/scorecard/ and tests/report/ import from here.

Three seeds per cell with offsets −d, 0, +d around the cell value (in a rotating order of seeds,
``grid``), so a cell's mean is the value, its sample standard deviation is d and its SEM d / √3.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

SEEDS = {42: -1.0, 43: 0.0, 44: 1.0}  # multiplier of the per-cell spread `d`
LOW, HIGH = 1e-5, 5e-5


def run_row(experiment: str, policy: str, kind: str, lr: float, seed: int, **values) -> dict:
    """One results.parquet row; ``values`` are metric columns (cell value before seed offset)."""
    lam = {"student": 1.0, "teacher": -1.0}.get(policy, values.pop("lam", math.nan))
    tag = values.pop("tag", "")
    run_id = f"{experiment}-{policy}{lam:+g}-{kind}{tag}-{lr:.0e}-s{seed}"
    row = {
        "run_id": values.pop("run_id", run_id),
        "experiment": experiment,
        "status": values.pop("status", "done"),
        "reason": values.pop("reason", ""),
        "rollout.policy": policy,
        "rollout.lam": lam,
        "objective.kind": kind,
        "objective.regulation": values.pop("regulation", "none"),
        "optim.lr": lr,
        "optim.grad_clip": values.pop("grad_clip", 1.0),
        "seed": seed,
        "task.name": "countdown3",
        "lr_label": "low" if lr == LOW else "high" if lr == HIGH else "sweep",
    }
    row.update(values)
    return row


def grid(experiment: str, cells: dict[tuple, dict], spread: float = 0.01, **extra) -> list[dict]:
    """Rows for ``cells`` {(policy, kind, lr): {metric: value}} × SEEDS, each value ± spread.

    Fraction metrics (accuracy, sparsity …) get ``spread``; pp-valued metrics get 100 × spread.
    """
    rows = []
    ks = list(SEEDS.values())
    for i, ((policy, kind, lr), metrics) in enumerate(cells.items()):
        # each cell takes the offsets −d, 0, +d in its own order of seeds (a rotation): every
        # cell's mean and SD stay as stated, and no seed shifts every cell alike, so a
        # seed-blocked analysis sees the spread too
        for j, seed in enumerate(SEEDS):
            k = ks[(i + j) % len(ks)]
            vals = {}
            for m, v in metrics.items():
                step = spread * (100.0 if m == "eval/forgetting_pp" else 1.0)
                step *= 0.5 if m == "eval/pass@10" else 1.0  # gains vary over seeds too
                step *= 0.2 if m.startswith("eval/sparsity") else 1.0  # barely varies by seed
                vals[m] = v + k * step if isinstance(v, float) else v
            rows.append(run_row(experiment, policy, kind, lr, seed, **extra, **vals))
    return rows


def main_cells(acc: dict[tuple, float], forget=None, sparsity=None) -> dict[tuple, dict]:
    """Main-grid cells from {(policy, kind, lr): accuracy}; forgetting/sparsity given per LR."""
    forget = forget or {LOW: -1.0, HIGH: -12.0}
    sparsity = sparsity or {LOW: 0.88, HIGH: 0.55}
    return {
        key: {
            "eval/accuracy": a,
            "eval/pass@1": 0.58,  # similar pass@1 (T = 1.0) whatever the accuracy at T = 0.5
            "eval/pass@10": 0.58 + (0.15 if key[1] == "forward_kl" else 0.05),
            "eval/harder_accuracy": a / 3 + (0.05 if key[0] == "student" else 0.0),
            "eval/harder/pass@10": a / 2 + (0.12 if key[0] == "student" else 0.0),
            "eval/forgetting_pp": forget[key[2]],
            "eval/sparsity_fp32_tau1e-06": sparsity[key[2]],
            "eval/sparsity_bf16_tau1e-06": sparsity[key[2]] + 0.05,
            "train/grad_clipped_frac": 0.95,
            "train/grad_norm_mean": 3.0 if key[1] == "forward_kl" else 9.0,
            "train/grad_norm_max": 8.0 if key[1] == "forward_kl" else 40.0,
        }
        for key, a in acc.items()
    }


# The published picture: forward KL 72% everywhere, reverse KL 35–72%, no rollout effect on FKL.
PAPER_ACC = {
    ("student", "forward_kl", LOW): 0.72,
    ("teacher", "forward_kl", LOW): 0.72,
    ("student", "forward_kl", HIGH): 0.72,
    ("teacher", "forward_kl", HIGH): 0.72,
    ("student", "reverse_kl", LOW): 0.72,
    ("teacher", "reverse_kl", LOW): 0.50,
    ("student", "reverse_kl", HIGH): 0.60,
    ("teacher", "reverse_kl", HIGH): 0.35,
}


def baseline_row(acc: float = 0.30, **values) -> dict:
    """The untrained student's row as the study writes it: experiment and run_id "baseline"."""
    row = run_row("baseline", "student", "forward_kl", LOW, 42, run_id="baseline", **values)
    for axis in ("rollout.policy", "rollout.lam", "objective.kind", "objective.regulation"):
        row[axis] = math.nan
    row.update({"optim.lr": math.nan, "optim.grad_clip": math.nan, "seed": math.nan})
    row.update({"lr_label": math.nan, "eval/accuracy": acc})
    return row


def write_study(
    root: Path,
    rows: list[dict],
    *,
    spec: dict | None = None,
    provenance: dict | None = None,
    metrics: dict[str, list[dict]] | None = None,
) -> Path:
    """Write a study directory: results.parquet, runs/<id>/status.json (+ metrics.jsonl)."""
    root.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(rows)
    assert df["run_id"].is_unique, "synthetic run ids collide"
    df.to_parquet(root / "results.parquet", index=False)
    spec = spec or {}
    name, description = (
        json.dumps(spec.get("name", "synthetic")),
        json.dumps(spec.get("description", "")),
    )
    (root / "study.yaml").write_text(f"name: {name}\ndescription: {description}\n")
    prov = provenance or {
        "command": "distillscope study --preset paper --out study",
        "version": "0.1.0",
        "started": "2026-10-01T10:00:00",
        "finished": "2026-10-01T11:30:00",
        "machine": "testbox (2 CPU)",
    }
    (root / "provenance.json").write_text(json.dumps(prov))
    for row in rows:
        if "/" in row["run_id"]:
            continue  # a hostile id cannot name a directory; the table alone carries it
        run = root / "runs" / row["run_id"]
        run.mkdir(parents=True, exist_ok=True)
        (run / "status.json").write_text(
            json.dumps({"status": row["status"], "reason": row["reason"]})
        )
        for line in (metrics or {}).get(row["run_id"], []):
            with (run / "metrics.jsonl").open("a") as f:
                f.write(json.dumps(line) + "\n")
    return root


def curve(
    steps: int, seed: int, clip: float = 1.0, grow: float = 0.0, fall: float = 0.0
) -> list[dict]:
    """A metrics.jsonl trajectory: loss decays, length grows ``grow``×, reward falls ``fall``."""
    out = []
    for s in range(steps):
        t = s / max(steps - 1, 1)
        out.append(
            {
                "step": s,
                "train/loss": 2.0 * math.exp(-3 * t) + 0.01 * seed % 3,
                "train/grad_norm": clip * (3.0 - t) + 0.1 * (s % 3),
                "train/lr": 1e-5,
                "rollout/len_mean": 20.0 * (1 + grow * t),
                "rollout/reward": 0.3 + 0.3 * min(t * 2, 1) - fall * max(t - 0.5, 0) * 2,
                "rollout/student_token_prob": 0.4 + 0.3 * t,
                "rollout/teacher_token_prob": 0.6 - 0.1 * t,
                # incoherent early rollouts: the student far less certain than the teacher
                "objective/student_entropy": 2.4 - 1.6 * t,
                "objective/teacher_entropy": 0.8,
            }
        )
    return out


def full_rows() -> tuple[list[dict], dict[str, list[dict]]]:
    """Every sub-grid of the paper preset with the published picture (rows, metrics.jsonl)."""
    rows = grid("main", main_cells(PAPER_ACC))
    sweep = {}
    for i, lr in enumerate((1e-5, 2e-5, 4e-5, 6e-5)):
        for policy in ("student", "teacher"):
            sweep[(policy, "forward_kl", lr)] = {
                "eval/accuracy": 0.72,
                "eval/forgetting_pp": -1.0 - 4.0 * i - (2.0 if policy == "student" else 0.0),
                "eval/sparsity_fp32_tau1e-06": 0.58 - 0.1 * i,
                "eval/sparsity_bf16_tau1e-06": 0.88 - 0.1 * i,
            }
    rows += grid("lr_sweep", sweep)
    for kind in ("forward_kl", "reverse_kl"):
        for i, lam in enumerate((-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0)):
            wiggle = 0.01 * (i % 3 - 1)  # cells differ a little: the spread the rules measure
            acc = (0.72 if kind == "forward_kl" else 0.55 + 0.08 * lam) + wiggle
            for seed, k in SEEDS.items():
                jitter = 0.002 * k * (i % 2)  # seed × cell noise: a table not exactly additive
                rows.append(
                    run_row(
                        "spectrum",
                        "spectrum",
                        kind,
                        LOW,
                        seed,
                        lam=lam,
                        **{
                            "eval/accuracy": acc + 0.01 * k + jitter,
                            "eval/forgetting_pp": -1.0 + 0.5 * k + 100 * (wiggle + jitter),
                            "eval/sparsity_fp32_tau1e-06": 0.57 + 0.005 * k + wiggle + jitter,
                            "eval/sparsity_bf16_tau1e-06": 0.87 + 0.005 * k + wiggle + jitter,
                            "rollout/student_token_prob_mean": 0.5 + 0.1 * lam + jitter,
                            "rollout/teacher_token_prob_mean": 0.6 - 0.08 * lam + jitter,
                            "rollout/loglik_gap_mean": 0.4 * lam + jitter,
                        },
                    )
                )
    rows += grid("no_clip", main_cells(PAPER_ACC), grad_clip=math.nan)  # conclusions hold
    rows.append(
        run_row(
            "no_clip",
            "teacher",
            "reverse_kl",
            LOW,
            42,
            grad_clip=math.nan,
            tag="-diverged",
            status="diverged",
            reason="grad norm 1e9 at step 12",
        )
    )
    sampled = {
        (p, k.replace("_kl", "_sampled"), lr): {"eval/accuracy": acc}
        for (p, k, lr), acc in PAPER_ACC.items()
    }
    rows += grid("sampled", sampled)  # the main grid's picture with sampled estimators
    style = {
        (p, k, LOW): {
            "eval/teacher_style_share": 0.1 if (p, k) == ("student", "reverse_kl") else 0.8
        }
        for p in ("student", "teacher")
        for k in ("forward_kl", "reverse_kl")
    }
    rows += grid("style", style, **{"task.teacher_style_flag": True})
    metrics = {}
    for reg, grow, fall in (
        ("none", 1.5, 0.2),
        ("hard_clip", 0.0, 0.0),
        ("log_compress", 0.1, 0.0),
    ):
        for seed in (42, 43, 44):
            row = run_row(
                "opd",
                "student",
                "opd",
                LOW,
                seed,
                regulation=reg,
                tag=f"-{reg}",
                **{"eval/accuracy": (0.5 if reg == "none" else 0.65) + 0.01 * SEEDS[seed]},
            )
            rows.append(row)
            # the mean advantage rises with the length (length exploitation when reward falls)
            metrics[row["run_id"]] = [
                {**x, "opd/advantage_mean": x["rollout/len_mean"] / 20.0 - 2.0}
                for x in curve(40, seed, grow=grow, fall=fall)
            ]
    for p, g in ((32, 1), (8, 4)):
        for seed, k in SEEDS.items():
            rows.append(
                run_row(
                    "diversity",
                    "student",
                    "forward_kl",
                    LOW,
                    seed,
                    tag=f"-{p}x{g}",
                    **{
                        "rollout.prompts_per_step": p,
                        "rollout.rollouts_per_prompt": g,
                        "eval/accuracy": (0.7 if p == 32 else 0.62) + 0.01 * k,
                    },
                )
            )
    for row in rows:
        if row["experiment"] in ("main", "lr_sweep") and row["status"] == "done":
            metrics[row["run_id"]] = curve(30, row["seed"], clip=1.0)
    # the untrained student once per seed, as a study evaluates it, with its style share at
    # T = 1 (claim 12's regime premise: the style in its support)
    support = {"eval/style_share_t1": 0.2}
    rows += [
        {**baseline_row(**support), "seed": s, "run_id": f"baseline-{k}"}
        for k, s in enumerate(SEEDS, start=1)
    ]
    return rows, metrics


@pytest.fixture(scope="session")
def synth() -> SimpleNamespace:
    """The builders and constants of this module."""
    names = (
        "SEEDS",
        "LOW",
        "HIGH",
        "PAPER_ACC",
        "run_row",
        "baseline_row",
        "grid",
        "main_cells",
        "write_study",
        "curve",
        "full_rows",
    )
    return SimpleNamespace(**{n: globals()[n] for n in names})
