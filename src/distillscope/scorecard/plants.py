"""Planted effects and margin cases of the scorecard's calibration (``calibrate``).

``planted_offsets`` plants the published effects of docs/method.md §9 in a study's design;
``all_margin_cases`` put each no-effect part of a claim exactly at its margin, where
"supported" is false (``MarginCase``, from each claim's ``Claim.margin_cases``). Offsets are
in stored units (fractions, pp), one value per row of the design.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

from distillscope.scorecard.claims import CLAIMS

LEARNED_BY = 0.30  # simulated students' accuracy above the untrained student (fraction)
ACC = "eval/accuracy"


def planted_offsets(d: pd.DataFrame, noise: dict[str, float]) -> dict[str, np.ndarray]:
    """Per metric, offsets (stored units) that plant the published effects of §9 in design d:
    every claim's ``Claim.plant`` summed, and its ``Claim.plant_sd`` (effects in units of a
    metric's seed-noise SD) times ``noise`` (0.01 for a metric without one)."""
    parts = [c.plant(d) for c in CLAIMS if c.plant is not None]
    for c in CLAIMS:
        if c.plant_sd is not None:
            parts.append({m: noise.get(m, 0.01) * v for m, v in c.plant_sd(d).items()})
    return summed(parts, len(d))


Offsets = dict[str, np.ndarray]


@dataclass(frozen=True)
class MarginCase:
    """One no-effect part of a claim planted exactly at its margin, where "supported" is false.

    ``offsets(d)`` gives the offsets (stored units) of design ``d`` that put the part at its
    margin; with ``on_planted`` they are added to the published effects (``planted_offsets``),
    so that every other part of the claim holds and only the planted-at-margin part can stop
    "supported" — the claims that combine effects with a no-effect part (2, 3, 6, …) need that;
    a claim that is only a no-effect statement (1, 7) sits on the null (``on_planted`` false).
    """

    claim: int
    name: str
    offsets: Callable[[pd.DataFrame], Offsets]
    on_planted: bool = False
    given: int | None = None  # false only where claim ``given`` is decided (``spec.MarginCase``)


def all_margin_cases() -> list[MarginCase]:
    """Every claim's margin cases (``Claim.margin_cases``), in claim order."""
    return [
        MarginCase(c.id, m.name, m.offsets, m.on_planted, m.given)
        for c in CLAIMS
        for m in c.margin_cases
    ]


def margin_cases(claims: Collection[int]) -> list[MarginCase]:
    """The margin cases of ``claims``, in claim order."""
    return [c for c in all_margin_cases() if c.claim in claims]


def margin_offsets(d: pd.DataFrame) -> Offsets:
    """Every margin case's offsets summed (each touches only the experiment its rule reads)."""
    return summed([c.offsets(d) for c in all_margin_cases() if not c.on_planted], len(d))


def summed(parts: list[Offsets], n: int) -> Offsets:
    out: Offsets = {}
    for part in parts:
        for m, v in part.items():
            out[m] = out.get(m, np.zeros(n)) + np.asarray(v, dtype=float)
    return out


#: Planted metrics set to a level (not an offset from the study's typical value): every
#: claim's ``Claim.levels``.
LEVELS = tuple(dict.fromkeys(m for c in CLAIMS for m in c.levels))
