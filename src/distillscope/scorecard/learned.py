"""The premise "the students learned": their accuracy above the untrained student's, which a
no-effect claim needs before it can say there was no effect (docs/method.md §10)."""

from __future__ import annotations

import pandas as pd

from distillscope.scorecard.claim_columns import ACC, MAIN
from distillscope.scorecard.claim_spec import ABOVE, POOLED, Part
from distillscope.scorecard.estimate import Estimate, not_tested, seed_level
from distillscope.scorecard.evidence import (
    ClaimEvidence,
    missing_metric,
)
from distillscope.scorecard.selection import MAIN_GRID, Grid, plain_runs

#: Students "learned" when their mean accuracy beats the untrained student by this many pp.
LEARNED_PP = 5.0


def learned(view: ClaimEvidence, rows: pd.DataFrame, where: str) -> list[Estimate]:
    """Students of ``rows`` − the untrained student, accuracy in pp, seed-blocked: per seed the
    mean over that seed's runs minus the baseline's same-seed accuracy (``seed_level``)."""
    base = view.baseline()
    lack = missing_metric(rows, ACC, where) or missing_metric(base, ACC, "the baseline")
    if lack:
        return [not_tested("students − untrained", lack)]
    return [seed_level(rows, ACC, "students − untrained", base, view.ev.item_matrix)]


def learned_premise_why() -> str:
    """The premise's justification (shared by the no-effect claims)."""
    return (
        "A no-effect claim needs a study that could have seen an effect (docs/method.md §10): "
        "[P]'s students reach 71–73% where the untrained student is far lower (not printed; "
        f"the calibration plants 30 pp); {LEARNED_PP:g} pp is a floor any real distillation "
        "clears."
    )


def grid_learned(grid: Grid) -> Part:
    """The premise "the students of ``grid`` learned" (the main grid: its plain runs)."""
    return learned_part(MAIN) if grid == MAIN_GRID else learned_part(grid.experiment, grid)


def learned_part(experiment: str, grid: Grid | None = None) -> Part:
    """The premise "the students of ``experiment`` learned": their accuracy − the untrained
    student's ≥ LEARNED_PP, seed-blocked (``learned``); over ``grid``'s runs when given."""

    def rows(view: ClaimEvidence) -> pd.DataFrame:
        return plain_runs(view, experiment) if grid is None else grid.rows(view)

    return Part(
        "gain",
        f"accuracy of `{experiment}`'s {'plain' if grid is None else grid.name} runs − the "
        "untrained student's, per seed (the seed as replicate)",
        lambda view: learned(view, rows(view), experiment),
        POOLED,
        ABOVE,
        LEARNED_PP,
        learned_premise_why(),
        published=30.0,
    )
