"""Regime premises (docs/method.md §9 "Regime premises"): the conditions a claim's statement
presupposes, each measured in the study and shown with its value.

A regime premise is a ``Part`` in a claim's ``premises`` with ``regime`` set to the condition
in words. The runner (``scorecard.runner``) decides it like any part; a claim whose regime is
absent (the premise contradicted) or not established (undecided) is *not applicable —
condition: measured value*, and one whose regime the study did not measure is *not tested*,
naming what is missing: never supported, never contradicted.

A level identical in every seed (an untrained student's pass@32 of exactly 0 in each of three
seeds) has no spread to build an interval from; ``exact`` decides it by its value, since
every seed measured it on its own evaluation stream and found the same number.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import pandas as pd

from distillscope.scorecard.claim_columns import LR, SPARSITY
from distillscope.scorecard.claim_spec import ABOVE, POOLED, Part
from distillscope.scorecard.estimate import Estimate, not_tested, seed_level
from distillscope.scorecard.evidence import ClaimEvidence, missing_metric

#: bf16 sparsity at the low LR below which the metric sits on its floor (docs/method.md §9,
#: claim 4): [P]'s low-LR levels are 85.3–89.6%.
SPARSITY_FLOOR_PCT = 20.0
#: The SE given to a level identical in every seed: far below any display digit, so the
#: interval is the value itself.
EXACT_SE = 1e-9
EXACT_NOTE = "identical in every seed"


def exact(x: Estimate) -> Estimate:
    """``x`` decided by its value when every seed gave the same number (SE 0 on ≥ 2 seeds);
    any other estimate unchanged."""
    if x.missing or x.se != 0 or x.seeds < 2 or not math.isfinite(x.value):
        return x
    note = f"{x.note}; {EXACT_NOTE}" if x.note else EXACT_NOTE
    return replace(x, se=EXACT_SE, dof=float(x.seeds - 1), note=note)


def exact_levels(fn: Callable[[ClaimEvidence], list[Estimate]]):
    """``fn`` with each of its estimates passed through ``exact``."""

    def estimate(view: ClaimEvidence) -> list[Estimate]:
        return [exact(x) for x in fn(view)]

    estimate.__doc__ = fn.__doc__
    return estimate


def low_lr_level(rows: pd.DataFrame, metric: str, label: str, where: str) -> Estimate:
    """Mean of ``metric`` over ``rows`` at their smallest LR, per seed (the seed as replicate);
    not tested when a run lacks it or the rows name no LR."""
    lack = missing_metric(rows, metric, where)
    if lack:
        return not_tested(label, lack)
    lr = pd.to_numeric(rows[LR], errors="coerce") if LR in rows.columns else None
    if lr is None or lr.dropna().empty:
        return not_tested(label, f"optim.lr of {where}")
    return exact(seed_level(rows[lr == lr.min()], metric, label))


def sparsity_floor(experiment: str, rows: Callable[[ClaimEvidence], pd.DataFrame]) -> Part:
    """The regime premise "updates small against bf16 resolution": the bf16 sparsity of
    ``experiment``'s runs (``rows(view)``) at its smallest LR ≥ ``SPARSITY_FLOOR_PCT``."""
    where = f"`{experiment}`"

    def estimate(view: ClaimEvidence) -> list[Estimate]:
        return [low_lr_level(rows(view), SPARSITY, "low-LR sparsity", where)]

    return Part(
        "low-LR sparsity",
        f"bf16 sparsity (τ = 1e-6) of the {where} runs at their smallest LR, mean over the "
        "cells per seed (the seed as replicate)",
        estimate,
        POOLED,
        ABOVE,
        SPARSITY_FLOOR_PCT,
        "updates small against bf16 resolution: [P]'s low-LR sparsity is 85.3–89.6%; below "
        "20% the metric sits on its floor, where an LR or λ can move it only a little.",
        published=87.5,
        unit="%",
        regime=f"low-LR bf16 sparsity of `{experiment}`",
    )
