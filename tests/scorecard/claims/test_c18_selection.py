"""Claim 18 orders its teachers from the data (the higher-I teacher is the one whose fitted I is
larger), so its I gap and accuracy gap are selected contrasts: their bounds are Bonferroni over
the ordered pairs of teachers, as the best-cell claims' are (``Estimate.selected``). Under a
null (two teachers with the same I) the picked gap's lower bound exceeds 0 at most at α;
uncorrected it would at ≈ 2α. The tolerance is the Monte-Carlo error of a rate over ``TABLES``
tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from distillscope.results.stats import ALPHA
from distillscope.scorecard.claims.c18_informativeness import accuracy_gap, info_gap
from distillscope.scorecard.evidence import Evidence
from distillscope.scorecard.interval import Estimate, Selected

TABLES = 800
SEEDS = 3
TEACHERS = ("small", "large")
REGS = ("none", "hard_clip")


def table(rng: np.random.Generator, info_gap_true: float = 0.0) -> pd.DataFrame:
    """`teacher_scale` runs: two teachers × two regulations × ``SEEDS`` seeds."""
    rows = []
    seed_effect = rng.normal(0.0, 0.02, SEEDS)
    for t in TEACHERS:
        for r in REGS:
            for s in range(SEEDS):
                info = 0.3 + (info_gap_true if t == "large" else 0.0)
                rows.append(
                    {
                        "run_id": f"{t}-{r}-{s}",
                        "experiment": "teacher_scale",
                        "status": "done",
                        "seed": s,
                        "model.teacher": t,
                        "objective.regulation": r,
                        "eval/informativeness": info + seed_effect[s] + rng.normal(0, 0.02),
                        "eval/accuracy": 0.5 + rng.normal(0, 0.02),
                    }
                )
    return pd.DataFrame(rows)


def view(df: pd.DataFrame):
    return Evidence(df).for_claim(("teacher_scale",))


def test_gaps_are_selected_over_the_teacher_pairs() -> None:
    df = table(np.random.default_rng(0), 0.1)
    for x in (*info_gap(view(df)), *accuracy_gap(view(df))):
        assert isinstance(x, Selected) and x.family == 2, x
        assert "ordered by the data's I" in x.note
        plain = Estimate(x.label, x.value, x.se, x.dof, x.seeds)
        assert x.bounds(ALPHA) == plain.bounds(ALPHA / 2)


def test_null_gap_is_positive_at_most_at_alpha() -> None:
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(TABLES):
        (x,) = info_gap(view(table(rng)))
        hits += x.bounds(ALPHA)[0] > 0.0
    rate = hits / TABLES
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / TABLES), f"rate {rate:.3f}"
