"""Results tables for the claim tests: cells × seeds with a shared seed effect and run noise.

Tests reach the builders through the ``tb`` fixture (the suite runs with
``--import-mode=importlib``). A value is the cell's value + the seed's shared effect (the same
for every cell of a seed: common random numbers) + independent run noise, all drawn from a
generator seeded by the table's ``rng`` argument, so a table is the same on every machine.
Values are in stored units: fractions for accuracy and sparsity, pp for forgetting_pp.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from distillscope.metric_keys import is_fraction
from distillscope.scorecard.runner import ClaimResult, score_claims

SEEDS = (42, 43, 44)
LOW, HIGH = 1e-4, 3e-4
ON, OFF, FWD, REV = "student", "teacher", "forward_kl", "reverse_kl"
#: [P]'s picture: forward KL ≈ 72% in every cell; reverse KL 35–72%, better on-policy.
PAPER_ACC = {
    (ON, FWD, LOW): 0.72,
    (OFF, FWD, LOW): 0.72,
    (ON, FWD, HIGH): 0.72,
    (OFF, FWD, HIGH): 0.72,
    (ON, REV, LOW): 0.72,
    (OFF, REV, LOW): 0.50,
    (ON, REV, HIGH): 0.60,
    (OFF, REV, HIGH): 0.35,
}
#: Forgetting_pp per LR (skills after − before) and bf16 sparsity per LR.
PAPER_FORGET = {LOW: -1.0, HIGH: -12.6}
PAPER_SPARSITY = {LOW: 0.875, HIGH: 0.56}


def row(experiment: str, policy: str, kind: str, lr: float, seed: int, **values) -> dict:
    """One results row of a finished run."""
    lam = {ON: 1.0, OFF: -1.0}.get(policy, values.pop("lam", math.nan))
    tag = values.pop("tag", "")
    return {
        "run_id": values.pop("run_id", f"{experiment}-{policy}-{kind}-{lr:g}{tag}-s{seed}"),
        "experiment": experiment,
        "status": values.pop("status", "done"),
        "reason": "",
        "rollout.policy": policy,
        "rollout.lam": lam,
        "objective.kind": kind,
        "objective.regulation": "none",
        "optim.lr": lr,
        "optim.grad_clip": 1.0,
        "seed": seed,
        "task.name": values.pop("task", "tb-countdown3"),
        **values,
    }


def cells_table(
    cells: dict[tuple, dict[str, float]],
    experiment: str = "main",
    seeds: tuple[int, ...] = SEEDS,
    seed_sd: float = 0.02,
    noise: float = 0.003,
    rng: int = 0,
    **extra,
) -> list[dict]:
    """Rows for ``cells`` {(policy, kind, lr): {metric: value}} × ``seeds``: value + the seed's
    shared effect (SD ``seed_sd``, one draw per seed and metric) + run noise (SD ``noise``);
    pp-valued metrics get 100× both."""
    gen = np.random.default_rng(rng)
    metrics = sorted({m for v in cells.values() for m in v})
    shared = {(m, s): gen.normal(0, seed_sd) for m in metrics for s in seeds}
    rows = []
    for (policy, kind, lr), values in cells.items():
        for s in seeds:
            vals = {}
            for m, v in values.items():
                scale = 1.0 if is_fraction(m) else 100.0
                vals[m] = v + scale * (shared[(m, s)] + gen.normal(0, noise))
            rows.append(row(experiment, policy, kind, lr, s, **extra, **vals))
    return rows


def main_cells(acc=None, forget=None, sparsity=None, offpd_forgets_less: float = 1.0) -> dict:
    """Main-grid cells with the published picture (``PAPER_*``) unless given."""
    acc = acc or PAPER_ACC
    forget, sparsity = forget or PAPER_FORGET, sparsity or PAPER_SPARSITY
    return {
        key: {
            "eval/accuracy": a,
            "eval/forgetting_pp": forget[key[2]] + (offpd_forgets_less if key[0] == OFF else 0),
            "eval/sparsity_bf16_tau1e-06": sparsity[key[2]],
            "eval/pass@1": 0.58,  # similar pass@1 (T = 1.0) whatever the accuracy at T = 0.5
            "eval/pass@10": 0.58 + (0.15 if key[1] == FWD else 0.05),  # coverage: +10 pp
            "eval/harder/pass@10": 0.30 + (0.125 if key[0] == ON else 0.0),  # +12.5 pp OnPD
            "train/grad_clipped_frac": 0.95,
            "train/grad_norm_mean": 3.0 if key[1] == FWD else 9.0,  # not a fraction: ×100 noise
        }
        for key, a in acc.items()
    }


def baseline(acc: float = 0.30, seeds: tuple[int, ...] = SEEDS, rng: int = 1) -> list[dict]:
    """The untrained student's rows, one per seed (its evaluation shares the seed's stream)."""
    gen = np.random.default_rng(rng)
    out = []
    for s in seeds:
        r = row("baseline", ON, FWD, LOW, s, run_id=f"baseline-{s}")
        for axis in ("rollout.policy", "rollout.lam", "objective.kind", "objective.regulation"):
            r[axis] = math.nan
        r.update({"optim.lr": math.nan, "optim.grad_clip": math.nan})
        r["eval/accuracy"] = acc + gen.normal(0, 0.01)
        out.append(r)
    return out


def paper_main(rng: int = 0, **kw) -> pd.DataFrame:
    """The published main grid with the baseline: every claim of 1–3 holds."""
    return pd.DataFrame(cells_table(main_cells(), rng=rng, **kw) + baseline())


LAMS = (-1.0, -0.5, 0.0, 0.5, 1.0)


def spectrum_table(
    cell,
    lrs: tuple[float, ...] = (LOW,),
    seeds: tuple[int, ...] = SEEDS,
    seed_sd: float = 0.01,
    noise: float = 0.002,
    rng: int = 0,
    experiment: str = "spectrum",
    lams: tuple[float, ...] = LAMS,
) -> pd.DataFrame:
    """λ-spectrum runs (policy ``spectrum``) for ``cell(kind, λ, lr) -> {metric: value}`` over
    forward/reverse KL × ``lams`` × ``lrs`` × ``seeds``, noise as ``cells_table``; with the
    baseline's rows."""
    gen = np.random.default_rng(rng)
    rows = []
    for s in seeds:
        shared = gen.normal(0, seed_sd)
        for lr in lrs:
            for kind in (FWD, REV):
                for lam in lams:
                    vals = {}
                    for m, v in cell(kind, lam, lr).items():
                        scale = 1.0 if is_fraction(m) else 100.0
                        vals[m] = v + scale * (shared + gen.normal(0, noise))
                    tag = f"-l{lam:+g}"
                    rows.append(row(experiment, "spectrum", kind, lr, s, lam=lam, tag=tag, **vals))
    return pd.DataFrame(rows + baseline(seeds=seeds))


def judge(df: pd.DataFrame, claim: int) -> ClaimResult:
    """The scorecard's result for ``claim`` (strict: a rule that raises fails the test)."""
    (result,) = score_claims(df, strict=True, claims=[claim])
    return result


@pytest.fixture(scope="session")
def tb() -> SimpleNamespace:
    """The builders and constants of this module."""
    names = (
        "SEEDS LOW HIGH ON OFF FWD REV PAPER_ACC PAPER_FORGET PAPER_SPARSITY row cells_table "
        "main_cells baseline paper_main judge LAMS spectrum_table"
    ).split()
    return SimpleNamespace(**{n: globals()[n] for n in names})
