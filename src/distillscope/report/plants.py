"""Planted effects and margin cases of the scorecard's calibration (``calibrate``).

``planted_offsets`` plants the published effects of docs/method.md §9 in a study's design;
``MARGIN_CASES`` put each no-effect part of a claim exactly at its margin, where "supported"
is false (``MarginCase``). Offsets are in stored units (fractions, pp), one value per row of
the design. Rule modules' effects and cases are registered here (``PLANTERS``,
``MARGIN_CASES``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

from distillscope.report.aggregate import with_labels
from distillscope.report.claimkit import experiment_rows
from distillscope.report.claims import CLAIMS
from distillscope.report.claims.rank import spectrum_top_lr
from distillscope.report.claims_entropy import CLAIM_19_GAIN_PP, CLAIM_19_HIGH_RATIO, EARLY_ENTROPY
from distillscope.report.claims_grid import CLAIM_01_MARGIN_PP
from distillscope.report.claims_reach import CLAIM_23_MARGIN_PP
from distillscope.report.matching import LAMBDA
from distillscope.report.plants_rlvr import claim_11_margin, rlvr_planted

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
    """Mask of the rows a rule reads as experiment ``name`` (``claimkit.experiment_rows``: those
    named so, or every row when none is, so a custom study's grid gets its effects too)."""
    return d.index.isin(experiment_rows(d, name).index)


def planted_offsets(d: pd.DataFrame, noise: dict[str, float]) -> dict[str, np.ndarray]:
    """Per metric, offsets (stored units) that plant the published effects of §9 in design d.

    Forward KL 72% vs reverse KL 10 pp (OnPD) / 30 pp (OffPD) lower (35–72%); λ-spectrum reverse KL
    35% → 72% from λ = −2 to +2; forgetting −1 pp (low LR) → −12.6 pp (high LR), OffPD
    0.5 pp less; bf16 sparsity 87.5% → 56% with LR; pass@10 gain 10 pp larger under forward
    KL; harder variant +12.5% (relative) on-policy; style share 10% for OnPD + reverse KL vs 70%;
    95% of steps clipped, reverse-KL norms 2× forward; token probabilities moving ±2 SD per
    unit λ; unregulated `opd` runs 15 pp below their reward peak while length and mean advantage
    rise 10 SEM; most prompts +6 pp per budget;
    without clipping reverse KL −15 pp.
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
    clip_off = np.zeros(n, bool)
    if "optim.grad_clip" in d:
        clip_off = d["optim.grad_clip"].isna().to_numpy()
    acc = np.where(reverse, np.where(teacher, -0.30, -0.10), 0.0)  # reverse KL prefers OnPD
    acc = np.where(reverse & spectrum, -0.37 + 0.0925 * (np.clip(lam, -2, 2) + 2), acc)
    acc = acc + np.where(reverse & clip_off, -0.15, 0.0)
    if "rollout.prompts_per_step" in d.columns:
        p = np.log2(pd.to_numeric(d["rollout.prompts_per_step"], errors="coerce").to_numpy())
        lo, hi = np.nanmin(p), np.nanmax(p)
        acc = acc + np.where(
            (exp == "diversity").to_numpy() & (hi > lo),
            0.06 * (p - lo) / (hi - lo if hi > lo else 1.0),
            0.0,
        )
    opd_none = _experiment(L, "opd") & (kind == "opd").to_numpy()
    opd_none &= (_column(L, "objective.regulation") == "none").to_numpy()
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
    out["traj/reward_drop_pp"] = np.where(opd_none, 15.0, 0.0)  # while length and advantage
    out[EARLY_ENTROPY] = np.where(onpd_forward(d), 2 * CLAIM_19_HIGH_RATIO, 0.0)
    out["traj/len_rise"] = np.where(opd_none, 10.0, 0.0)  # rise 10 SEM (TRAJ's SEMs)
    out["traj/advantage_rise"] = np.where(opd_none, 0.5, 0.0)
    specs = [c.plant(d) for c in CLAIMS if c.plant is not None]
    return summed([out, *(plant(d, noise) for plant in PLANTERS), *specs], n)


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


def _rows(d: pd.DataFrame, experiment: str, **values: str) -> np.ndarray:
    """Mask of the rows of ``experiment`` (``_experiment``) whose columns equal ``values``
    (keys with dots written as double underscores: ``rollout__policy="student"``)."""
    mask = _experiment(d, experiment)
    for key, value in values.items():
        mask = mask & (_column(d, key.replace("__", ".")) == value).to_numpy()
    return mask


def _lr_end(d: pd.DataFrame, experiment: str, high: bool) -> np.ndarray:
    """Mask of the rows of ``experiment`` at its smallest (or largest) LR."""
    rows = _experiment(d, experiment)
    lr = pd.to_numeric(d.get("optim.lr", pd.Series(np.nan, index=d.index)), errors="coerce")
    lrs = lr[rows].dropna()
    if lrs.empty:
        return np.zeros(len(d), dtype=bool)
    return rows & (lr == (lrs.max() if high else lrs.min())).to_numpy()


def _onpd_margin(experiment: str) -> Callable[[pd.DataFrame], Offsets]:
    """Claim 1's margin in ``experiment``: its OnPD runs CLAIM_01_MARGIN_PP more accurate (the
    robustness claims re-run claim 1 on the no-clip and sampled grids)."""

    def offsets(d: pd.DataFrame) -> Offsets:
        on = _rows(d, experiment, rollout__policy="student")
        return {ACC: np.where(on, CLAIM_01_MARGIN_PP / 100, 0.0)}

    return offsets


def onpd_forward(d: pd.DataFrame) -> np.ndarray:
    """Mask of the on-policy forward-KL runs (claim 19's; their early entropy is drawn)."""
    return (
        (_column(d, "rollout.policy") == "student") & (_column(d, "objective.kind") == "forward_kl")
    ).to_numpy()


def _claim_19_margin(d: pd.DataFrame) -> Offsets:
    """Claim 19: high-entropy early rollouts in every OnPD forward-KL run, whose students gain
    exactly CLAIM_19_GAIN_PP over the untrained student (``LEARNED_BY`` in the null)."""
    rows = onpd_forward(d)
    return {
        EARLY_ENTROPY: np.where(rows, 2 * CLAIM_19_HIGH_RATIO, 0.0),
        ACC: np.where(rows, CLAIM_19_GAIN_PP / 100 - LEARNED_BY, 0.0),
    }


#: Every no-effect part of a claim, planted at its margin (the ``margin`` scenario): rule
#: modules' cases are registered here. Each case's tables are scored for its claim only.
MARGIN_CASES: list[MarginCase] = [
    MarginCase(14, "no-clip OnPD +margin (claim 1)", _onpd_margin("no_clip")),
    MarginCase(15, "sampled OnPD +margin (claim 1)", _onpd_margin("sampled")),
    MarginCase(19, "high-entropy runs gaining exactly the margin", _claim_19_margin),
]

#: Published effects planted by other modules: functions of the design returning offsets
#: (stored units) that ``planted_offsets`` adds to its own.
PLANTERS: list[Callable[[pd.DataFrame, dict[str, float]], Offsets]] = []


def all_margin_cases() -> list[MarginCase]:
    """The specified claims' margin cases (``Claim.margin_cases``), then the legacy ones."""
    spec = [
        MarginCase(c.id, m.name, m.offsets, m.on_planted) for c in CLAIMS for m in c.margin_cases
    ]
    specified = {c.id for c in CLAIMS}
    legacy = [c for c in MARGIN_CASES if c.claim not in specified]
    return sorted([*spec, *legacy], key=lambda c: c.claim)


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
    "eval/informativeness",  # claim 18's I per teacher (``_claims_18_22_planted``)
)


# --- claim 24: planted effect (claims 6–8 plant theirs in their specifications)


def _claim_24_planted(d: pd.DataFrame, noise: dict[str, float]) -> Offsets:
    """Claim 24 ([P] §5.2): a third of the reverse-KL runs of the spectrum at the high LR (the
    first seed of each cell) end 20 pp lower — when the spectrum ran at two LRs."""
    rows, _, two_lrs = spectrum_top_lr(d)
    rows = rows & (_column(d, "objective.kind") == "reverse_kl").to_numpy() & two_lrs
    seed = pd.to_numeric(d.get("seed", pd.Series(np.nan, index=d.index)), errors="coerce")
    first = (seed == seed[rows].min()).to_numpy() if rows.any() else rows
    return {ACC: np.where(rows & first, -0.20, 0.0)}


PLANTERS.append(_claim_24_planted)
# --- claims 16–25 ([D] OPD): planted effects and margin cases

#: Published sizes: regulated OPD ≥ 3 pp more accurate than naive OPD (claim 21); OPD as a
#: catalyst, pass@1 +10 pp over the untrained student with pass@K unchanged (claim 23).
PLANT_REGULATED_GAIN = 0.03
PLANT_CATALYST_PASS1 = 0.10
#: The pass@k keys claim 23 reads at large k (the evaluation's k ≥ 32): a margin case plants
#: them all, and a table keeps those it measures.
LARGE_PASS_KS = (32, 64)


def _opd_rows(d: pd.DataFrame) -> np.ndarray:
    """Mask of the OPD runs of the `opd` experiment (what claims 16, 21 and 23 read)."""
    return _experiment(d, "opd") & (_column(d, "objective.kind") == "opd").to_numpy()


def _claims_16_25_planted(d: pd.DataFrame, noise: dict[str, float]) -> Offsets:
    """Claim 21: hard clip and log compression +3 pp accuracy over none; claim 23: the `opd`
    runs' pass@1 +10 pp over the untrained student, pass@K unchanged (no offset)."""
    opd = _opd_rows(d)
    regulated = opd & _column(d, "objective.regulation").isin(["hard_clip", "log_compress"])
    return {
        ACC: np.where(regulated.to_numpy(), PLANT_REGULATED_GAIN, 0.0),
        "eval/pass@1": np.where(opd, PLANT_CATALYST_PASS1, 0.0),
    }


def _claim_23_margin(d: pd.DataFrame) -> Offsets:
    """Claim 23: the `opd` runs' pass@K exactly CLAIM_23_MARGIN_PP above the untrained student."""
    gap = np.where(_opd_rows(d), CLAIM_23_MARGIN_PP / 100, 0.0)
    return {f"eval/pass@{k}": gap for k in LARGE_PASS_KS}


PLANTERS.append(_claims_16_25_planted)
MARGIN_CASES.append(
    MarginCase(23, "pass@K of the OPD runs +margin over the untrained", _claim_23_margin, True)
)


# --- claims 18 and 22 (two teachers): planted effects

#: [D]'s picture in the `teacher_scale` experiment: the larger teacher is the stronger but
#: mismatched one — lower I (0.10 against 0.30) and students 10 pp less accurate than the
#: smaller teacher's; regulation adds claim 21's gain there too (when the `opd` rows do not
#: already carry it). Claim 22's contrast (smaller regulated − larger unregulated) is then
#: +13 pp; claim 18's (higher-I − lower-I accuracy) +10 pp.
PLANT_INFO_MISMATCHED, PLANT_INFO_MATCHED = 0.10, 0.30
PLANT_MATCHED_GAIN = 0.10
INFO = "eval/informativeness"
TEACHER, TEACHER_PARAMS = "model.teacher", "model/teacher_params"


def _larger_teacher(d: pd.DataFrame, rows: np.ndarray) -> str | None:
    """The largest teacher among ``rows`` by ``TEACHER_PARAMS`` (a design column), else the
    first by name; None with fewer than two teachers."""
    teachers = _column(d, TEACHER)[rows]
    if teachers.nunique() < 2:
        return None
    if TEACHER_PARAMS in d.columns:
        sizes = pd.to_numeric(d.loc[rows, TEACHER_PARAMS], errors="coerce")
        by = sizes.groupby(teachers).median().dropna()
        if by.nunique() >= 2:
            return str(by.idxmax())
    return str(sorted(teachers.unique())[0])


def _claims_18_22_planted(d: pd.DataFrame, noise: dict[str, float]) -> Offsets:
    """Claims 18 and 22: in the `teacher_scale` rows, I at the levels above (I is a level
    metric, ``LEVELS``; other rows keep level 0), the smaller teacher's students
    ``PLANT_MATCHED_GAIN`` more accurate, and regulated runs ``PLANT_REGULATED_GAIN`` more."""
    named = d[TEACHER].notna().to_numpy() if TEACHER in d.columns else np.zeros(len(d), bool)
    rows = _experiment(d, "teacher_scale") & named
    larger = _larger_teacher(d, rows)
    if larger is None:
        return {}
    mismatched = rows & (_column(d, TEACHER) == larger).to_numpy()
    regulated = _column(d, "objective.regulation").isin(["hard_clip", "log_compress"]).to_numpy()
    regulated = rows & regulated & ~_opd_rows(d)
    info = np.where(mismatched, PLANT_INFO_MISMATCHED, PLANT_INFO_MATCHED)
    return {
        INFO: np.where(rows, info, 0.0),
        ACC: np.where(rows & ~mismatched, PLANT_MATCHED_GAIN, 0.0)
        + np.where(regulated, PLANT_REGULATED_GAIN, 0.0),
    }


PLANTERS.append(_claims_18_22_planted)


# --- claims 11 and 20 (the RLVR stage): planted effects and a margin case
PLANTERS.append(rlvr_planted)
MARGIN_CASES.append(
    MarginCase(11, "OnPD ahead by the margin before and after RLVR", claim_11_margin)
)
