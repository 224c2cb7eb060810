"""Claim 13 ([P] App. A): clipping is active throughout; reverse-KL gradient norms are larger.

On the main grid: the share of steps whose pre-clip norm exceeded the threshold, a level (the
seed as replicate), above 80%; and reverse − forward KL mean pre-clip gradient norm, pooled
over matched rollout × LR cells of the seed-blocked fit, above 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.report.claims.common import (
    FORWARD,
    KIND,
    MAIN,
    REVERSE,
    axes,
    blocks,
    grid_rows,
    matched,
)
from distillscope.report.claims.estimate import Estimate, not_tested
from distillscope.report.claims.evidence import ClaimEvidence
from distillscope.report.claims.spec import ABOVE, POOLED, Claim, Offsets, Part

CLIPPED = "train/grad_clipped_frac"
NORM = "train/grad_norm_mean"
CLIPPED_PCT = 80.0


def clipped_share(view: ClaimEvidence) -> list[Estimate]:
    """The mean clipped share of the main grid's runs (%), the seed as replicate."""
    b = blocks(view, MAIN, grid_rows(view, MAIN), CLIPPED)
    if isinstance(b, str):
        return [not_tested("clipped share", b)]
    return [b.level(np.ones(len(b.cells), bool), "clipped share")]


def norm_gap(view: ClaimEvidence) -> list[Estimate]:
    """Reverse − forward KL mean pre-clip gradient norm, pooled over matched cells."""
    b = blocks(view, MAIN, grid_rows(view, MAIN), NORM)
    if isinstance(b, str):
        return [not_tested("Δ norm", b)]
    return matched(b, KIND, REVERSE, FORWARD, (), "Δ norm")


#: The planted clipping: 95% of steps clipped (a level) and reverse-KL mean norms 2× forward
#: (an offset of 1 × the typical norm: calibrate scales train/grad_norm_mean).
PLANT_CLIPPED, PLANT_REVERSE_NORM = 0.95, 1.0


def plant(d: pd.DataFrame) -> Offsets:
    """Every run clipped ``PLANT_CLIPPED`` of its steps; reverse KL's norms raised."""
    reverse = axes(d).reverse
    return {
        CLIPPED: np.full(len(d), PLANT_CLIPPED),
        NORM: np.where(reverse, PLANT_REVERSE_NORM, 0.0),
    }


CLAIMS = (
    Claim(
        id=13,
        title="Clipping is active throughout; reverse-KL gradient norms are larger and spikier "
        "(pre-clip norms above the threshold).",
        source="[P] App. A",
        quote="gradient clipping is active throughout training; reverse KL produces larger, "
        "spikier gradient norms",
        experiments=(MAIN,),
        parts=(
            Part(
                "clipped share",
                "mean share of steps whose pre-clip norm exceeded the threshold, over the main "
                "grid's runs (the seed as replicate)",
                clipped_share,
                POOLED,
                ABOVE,
                CLIPPED_PCT,
                "'active throughout' is every step (published ≈ 100%); 80% allows warm-up and "
                "the occasional quiet step.",
                published=100.0,
                unit="%",
            ),
            Part(
                "Δ norm",
                "reverse − forward KL mean pre-clip gradient norm, pooled over matched rollout × "
                "LR cells of the main grid's cell + seed fit",
                norm_gap,
                POOLED,
                ABOVE,
                0.0,
                "[P] prints no size, only 'larger': any positive gap; the power analysis asks "
                "for one clip threshold (1.0) of difference.",
                published=1.0,
                unit="",
            ),
        ),
        plant=plant,
        needs="the main grid (`main`) with both KL directions, train/grad_clipped_frac and "
        "train/grad_norm_mean",
    ),
)
