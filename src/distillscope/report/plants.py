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

from distillscope.report.aggregate import with_labels
from distillscope.report.claims import CLAIMS
from distillscope.report.grids import experiment_rows
from distillscope.report.matching import LAMBDA

LEARNED_BY = 0.30  # simulated students' accuracy above the untrained student (fraction)
ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY = "eval/sparsity_bf16_tau1e-06"
#: Planted forgetting (pp): −1 at the low LR to −12.6 at the high LR ([P]: ≤ 1.3 and
#: 11.2–14.0), OffPD forgetting this much less (within claim 3's ±2 pp, above claim 5's 0).
PLANT_LOW_FORGET_PP, PLANT_HIGH_FORGET_PP = -1.0, 12.6
PLANT_OFFPD_FORGETS_LESS_PP = 1.0


def _lr_position(d: pd.DataFrame) -> np.ndarray:
    """Per row, log-LR position in [0, 1] within its experiment (0 = lowest LR)."""
    pos = np.zeros(len(d))
    if "optim.lr" not in d.columns:
        return pos
    lr = pd.to_numeric(d["optim.lr"], errors="coerce")
    exp = d["experiment"].map(str) if "experiment" in d.columns else pd.Series("", index=d.index)
    for _, idx in d.groupby(exp).groups.items():
        x = np.log10(lr.loc[idx].to_numpy(dtype=float))
        span = np.nanmax(x) - np.nanmin(x) if np.isfinite(x).any() else 0.0
        pos[d.index.get_indexer(idx)] = np.nan_to_num((x - np.nanmin(x)) / span) if span else 0.0
    return pos


def _column(d: pd.DataFrame, column: str) -> pd.Series:
    """``column`` as strings ("" where the design has no such column)."""
    return d[column].map(str) if column in d.columns else pd.Series("", index=d.index)


def _experiment(d: pd.DataFrame, name: str) -> np.ndarray:
    """Mask of the rows a rule reads as experiment ``name`` (``grids.experiment_rows``: those
    named so, or every row when none is, so a custom study's grid gets its effects too)."""
    return d.index.isin(experiment_rows(d, name).index)


def planted_offsets(d: pd.DataFrame, noise: dict[str, float]) -> dict[str, np.ndarray]:
    """Per metric, offsets (stored units) that plant the published effects of §9 in design d.

    Forward KL 72% vs reverse KL 10 pp (OnPD) / 30 pp (OffPD) lower (35–72%); λ-spectrum reverse KL
    35% → 72% from λ = −2 to +2; forgetting −1 pp (low LR) → −12.6 pp (high LR), OffPD
    0.5 pp less; bf16 sparsity 87.5% → 56% with LR; pass@10 gain 10 pp larger under forward
    KL; harder variant +12.5% (relative) on-policy; style share 10% for OnPD + reverse KL vs 70%;
    95% of steps clipped, reverse-KL norms 2× forward; token probabilities moving ±2 SD per
    unit λ; without clipping reverse KL −15 pp. The specified claims' effects
    (``Claim.plant``: claims 16–24 among them) are added.
    """
    L = with_labels(d)
    n = len(d)
    kind, policy = _column(L, "objective.kind"), _column(L, "rollout.policy")
    lam = pd.to_numeric(L[LAMBDA], errors="coerce").fillna(0.0).to_numpy()
    reverse = kind.isin(["reverse_kl", "reverse_sampled"]).to_numpy()
    exp = _column(L, "experiment")
    spectrum = (exp == "spectrum").to_numpy()
    on = ((policy == "student").to_numpy() | (lam > 0)) & ~(policy == "teacher").to_numpy()
    teacher = (policy == "teacher").to_numpy()
    pos = _lr_position(d)
    acc = np.where(reverse, np.where(teacher, -0.30, -0.10), 0.0)  # reverse KL prefers OnPD
    acc = np.where(reverse & spectrum, -0.37 + 0.0925 * (np.clip(lam, -2, 2) + 2), acc)
    typical = {m: noise.get(m, 0.0) for m in noise}
    out: dict[str, np.ndarray] = {ACC: acc, "eval/pass@1": np.zeros(n)}  # similar pass@1
    out["eval/pass@10"] = np.where(reverse, 0.05, 0.15)
    forget = PLANT_LOW_FORGET_PP - (PLANT_HIGH_FORGET_PP + PLANT_LOW_FORGET_PP) * pos
    out[FORGET] = forget + np.where(policy == "teacher", PLANT_OFFPD_FORGETS_LESS_PP, 0.0)
    for view, shift in (("bf16", 0.0), ("fp32", -0.3)):
        out[f"eval/sparsity_{view}_tau1e-06"] = 0.875 + shift - 0.315 * pos
    out["eval/harder_accuracy"] = np.where(on, 0.05, 0.0)
    out["eval/harder/pass@10"] = np.where(on, 0.125, 0.0)  # claim 10: +10–15 pp
    style = (policy == "student").to_numpy() & (kind == "reverse_kl").to_numpy()
    out["eval/teacher_style_share"] = np.where(style, 0.10, 0.70)
    out["train/grad_clipped_frac"] = np.full(n, 0.95)
    out["train/grad_norm_mean"] = np.where(reverse, 1.0, 0.0)  # × typical norm, see _values
    for key, sgn in (("student", 1.0), ("teacher", -1.0)):
        m = f"rollout/{key}_token_prob_mean"
        out[m] = sgn * 2.0 * typical.get(m, 0.01) * np.where(spectrum, lam, 0.0)
    specs = [c.plant(d) for c in CLAIMS if c.plant is not None]
    return summed([out, *specs], n)


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


def onpd_forward(d: pd.DataFrame) -> np.ndarray:
    """Mask of the on-policy forward-KL runs (claim 19's; their early entropy is drawn)."""
    return (
        (_column(d, "rollout.policy") == "student") & (_column(d, "objective.kind") == "forward_kl")
    ).to_numpy()


def all_margin_cases() -> list[MarginCase]:
    """Every claim's margin cases (``Claim.margin_cases``), in claim order."""
    return [
        MarginCase(c.id, m.name, m.offsets, m.on_planted) for c in CLAIMS for m in c.margin_cases
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


#: Planted metrics set to a level (not an offset from the study's typical value).
LEVELS = (
    "eval/forgetting_pp",
    "eval/sparsity_bf16_tau1e-06",
    "eval/sparsity_fp32_tau1e-06",
    "eval/teacher_style_share",
    "train/grad_clipped_frac",
    "eval/informativeness",  # claim 18's I per teacher (its ``Claim.plant``)
)
