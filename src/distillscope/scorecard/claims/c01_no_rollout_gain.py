"""Claim 1 ([P] §4.2): rollout policy gives no consistent in-distribution gain.

Per task (``task.dataset``, else ``task.name``), the best OnPD configuration (over KL × LR) is
compared with the best OffPD configuration on the seed-blocked main-grid fit of accuracy; the
per-task contrasts are averaged over tasks. A no-effect claim: equivalence within ±5 pp, and it
applies only when the students learned.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import ACC, POLICY, STUDENT, TEACHER
from distillscope.scorecard.claim_spec import POOLED, WITHIN, Claim, MarginCase, Part, Quote
from distillscope.scorecard.contrasts import blocks, stratum_name, tasks_of
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.learned import grid_learned
from distillscope.scorecard.planting import in_pp, rows_mask
from distillscope.scorecard.selection import MAIN_GRID, Grid

MARGIN_PP = 5.0
NAME = "Δ_best"


def best_on_minus_best_off(view: ClaimEvidence, grid: Grid = MAIN_GRID) -> list[Estimate]:
    """Best OnPD − best OffPD configuration's accuracy, per task, averaged over tasks."""
    b = blocks(view, grid.experiment, grid.rows(view), ACC)
    if isinstance(b, str):
        return [not_tested(NAME, b)]
    if b.thin:  # the best configuration is chosen among every cell: each needs its seeds
        return [not_tested(NAME, f"{b.cell_names(b.thin)} has fewer than 2 seeds")]
    task = tasks_of(b)
    tasks = b.cells[task].map(str) if task else pd.Series("", index=b.cells.index)
    mu = b.cells["mu"].to_numpy(dtype=float)
    w = np.zeros(len(b.cells))
    names, family = [], 1
    for t in dict.fromkeys(tasks):
        here = (tasks == t).to_numpy()
        on, off = here & b.mask(**{POLICY: STUDENT}), here & b.mask(**{POLICY: TEACHER})
        if not on.any() or not off.any():
            return [not_tested(NAME, f"OnPD and OffPD cells of task {t}")]
        i_on = np.flatnonzero(on)[np.argmax(mu[on])]
        i_off = np.flatnonzero(off)[np.argmax(mu[off])]
        w[i_on] += 1.0
        w[i_off] -= 1.0
        family *= int(on.sum() * off.sum())  # every (OnPD, OffPD) pair the data could pick
        shown = [c for c in ("objective.kind", "optim.lr") if c in b.cells]
        names.append(
            f"{stratum_name(b.cells, i_on, shown)} vs {stratum_name(b.cells, i_off, shown)}"
        )
    x = b.contrast(w / len(names), NAME)
    return [x.selected(family, f"best: {'; '.join(names)}")]


def onpd_at_margin(d: pd.DataFrame, grid: Grid = MAIN_GRID) -> dict[str, np.ndarray]:
    """The grid's OnPD runs MARGIN_PP more accurate: "no gain" false at its margin."""
    on = rows_mask(d, grid.experiment, **{POLICY: STUDENT})
    return {ACC: np.where(on, in_pp(ACC, MARGIN_PP), 0.0)}


def specify(grid: Grid = MAIN_GRID) -> Claim:
    """Claim 1 reading ``grid`` (the main grid; claims 14 and 15 replay it on an ablation)."""
    return Claim(
        id=1,
        title="Rollout policy gives no consistent in-distribution gain (best mean over tasks "
        "72% OnPD vs 73% OffPD).",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                5,
                "mejor media en las 3 tareas, 72% para on-policy (OnPD) y 73% para "
                "off-policy (OffPD)",
                "best mean over the 3 tasks, 72% for on-policy (OnPD) and 73% for "
                "off-policy (OffPD)",
                "§4.2",
            ),
            Quote(
                "000_4fa7018284e9b536.txt",
                30,
                "Os autores relatam não haver vantagem consistente da destilação "
                "on-policy em acurácia na distribuição de treino",
                "The authors report no consistent advantage of on-policy distillation in "
                "in-distribution accuracy",
            ),
        ),
        experiments=(grid.experiment,),
        premises=(grid_learned(grid),),
        parts=(
            Part(
                NAME,
                "per task, the best OnPD configuration's accuracy (over KL × LR) − the best "
                "OffPD configuration's, on the main grid's cell + seed fit, averaged over tasks",
                partial(best_on_minus_best_off, grid=grid),
                POOLED,
                WITHIN,
                MARGIN_PP,
                "[P]'s gap is 1 pp (72% vs 73%); ±5 pp is five times it and a third of the KL "
                "direction's ≈ 17 pp pooled effect — a gain smaller than that is not "
                "'central'.",
                published=-1.0,
            ),
        ),
        needs="the main grid (`main`) with OnPD and OffPD runs and eval/accuracy, and the "
        "untrained-student baseline",
        margin_cases=(
            MarginCase(f"OnPD +margin in the {grid.name}", partial(onpd_at_margin, grid=grid)),
        ),
        null_true=True,
    )


CLAIMS = (specify(),)
