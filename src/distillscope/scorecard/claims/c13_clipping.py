"""Claim 13 (an instrument check: no seed states it): clipping is active throughout;
reverse-KL gradient norms are larger.

On the main grid, per KL direction × LR (not pooled: forward KL at the high LR may be clipped on
fewer steps): the share of steps whose pre-clip norm exceeded the threshold, a level (the seed
as replicate) over that cell's rollouts, above 80%; and per LR, reverse − forward KL mean
pre-clip gradient norm over matched rollout cells of the seed-blocked fit, above 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.results.aggregate import row_keys
from distillscope.scorecard.claim_columns import FORWARD, KIND, LR, MAIN, REVERSE
from distillscope.scorecard.claim_spec import ABOVE, EVERY, INSTRUMENT, Claim, Offsets, Part, Quote
from distillscope.scorecard.contrasts import blocks, matched, stratum_name
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.planting import axes
from distillscope.scorecard.selection import grid_rows

CLIPPED = "train/grad_clipped_frac"
NORM = "train/grad_norm_mean"
CLIPPED_PCT = 80.0


def clipped_share(view: ClaimEvidence) -> list[Estimate]:
    """The mean clipped share (%) of the main grid's runs in every KL direction × LR cell (over
    its rollouts), the seed as replicate."""
    b = blocks(view, MAIN, grid_rows(view, MAIN), CLIPPED)
    if isinstance(b, str):
        return [not_tested("clipped share", b)]
    strata = [c for c in (KIND, LR) if c in b.cells.columns]
    cells = b.labelled
    keys = row_keys(cells, strata)
    out = []
    for key in dict.fromkeys(keys):
        m = keys == key
        out.append(b.level(m, stratum_name(cells, int(np.flatnonzero(m)[0]), strata)))
    return out


def norm_gap(view: ClaimEvidence) -> list[Estimate]:
    """Reverse − forward KL mean pre-clip gradient norm at every LR, over matched cells."""
    b = blocks(view, MAIN, grid_rows(view, MAIN), NORM)
    if isinstance(b, str):
        return [not_tested("Δ norm", b)]
    return matched(b, KIND, REVERSE, FORWARD, (LR,), "Δ norm")


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
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                13,
                "KL token-level sobre vocabulario completo y clipping de gradiente 1.0",
                "token-level KL over the full vocabulary and gradient clipping at 1.0",
                "§4.1",
            ),
        ),
        kind=INSTRUMENT,
        experiments=(MAIN,),
        parts=(
            Part(
                "clipped share",
                "mean share of steps whose pre-clip norm exceeded the threshold, per KL "
                "direction × LR cell of the main grid over its rollouts (the seed as "
                "replicate)",
                clipped_share,
                EVERY,
                ABOVE,
                CLIPPED_PCT,
                "'active throughout' is every step (100%); 80% allows warm-up and the "
                "occasional quiet step.",
                published=100.0,
                over="KL × LR cell",
                unit="%",
            ),
            Part(
                "Δ norm",
                "reverse − forward KL mean pre-clip gradient norm per LR, over matched rollout "
                "cells of the main grid's cell + seed fit",
                norm_gap,
                EVERY,
                ABOVE,
                0.0,
                "'larger' is a sign (no seed gives a size): any positive gap; the power "
                "analysis asks for one clip threshold (1.0) of difference.",
                published=1.0,
                over="LR",
                unit="",
                sized=False,
            ),
        ),
        plant=plant,
        levels=(CLIPPED,),
        needs="the main grid (`main`) with both KL directions, train/grad_clipped_frac and "
        "train/grad_norm_mean",
    ),
)
