"""Planted effects and a margin case of the RLVR claims (11 and 20) for the calibration
(:mod:`distillscope.report.plants` registers them; :mod:`distillscope.report.calibrate` runs
them). Offsets are in stored units (fractions) on the RLVR runs of a design (``parent_run``
set); every other row gets 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.report.claimkit import is_rlvr
from distillscope.report.claims_rlvr import CLAIM_11_MARGIN_PP, MEASURES

#: [P] §5.3's picture: on-policy students start the RLVR stage 10 pp ahead, RLVR lifts every
#: run by 10 pp, and after RLVR the off-policy starts lead by 10 pp — the advantage is reversed
#: (claim 11's "reversed" route) and the best sustained starts are off-policy (claim 20).
PLANT_GAP_BEFORE = 0.10
PLANT_RLVR_GAIN = 0.10
PLANT_GAP_AFTER = -0.10

Offsets = dict[str, np.ndarray]


def _on_rlvr(d: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the RLVR rows and of those started from an OnPD checkpoint."""
    rlvr = is_rlvr(d).to_numpy()
    policy = d["rollout.policy"].map(str) if "rollout.policy" in d.columns else None
    on = rlvr & (policy == "student").to_numpy() if policy is not None else np.zeros_like(rlvr)
    return rlvr, on


def _offsets(d: pd.DataFrame, before: float, gain: float, after: float) -> Offsets:
    """OnPD − OffPD ``before`` and ``after`` RLVR, every RLVR run ``gain`` higher after."""
    rlvr, on = _on_rlvr(d)
    out: Offsets = {}
    for name in MEASURES:
        out[f"rlvr/{name}_before"] = np.where(on, before, 0.0)
        out[f"rlvr/{name}"] = np.where(rlvr, gain, 0.0) + np.where(on, after, 0.0)
    return out


def rlvr_planted(d: pd.DataFrame, noise: dict[str, float]) -> Offsets:
    """Claims 11 and 20 true: the picture of ``PLANT_GAP_BEFORE`` … ``PLANT_GAP_AFTER``."""
    return _offsets(d, PLANT_GAP_BEFORE, PLANT_RLVR_GAIN, PLANT_GAP_AFTER)


def claim_11_margin(d: pd.DataFrame) -> Offsets:
    """Claim 11 at its margin: OnPD ahead by exactly the margin before and after RLVR (no
    smaller, not reversed), while RLVR lifts every run (so the rule has power)."""
    gap = CLAIM_11_MARGIN_PP / 100
    return _offsets(d, gap, PLANT_RLVR_GAIN, gap)
