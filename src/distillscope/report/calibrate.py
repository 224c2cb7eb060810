"""The scorecard calibrated by simulation: how often each rule gives a false verdict.

    from distillscope.report.calibrate import calibrate
    cal = calibrate(results_df, draws=200, seed=0)   # → dict, written as calibration.json
    cal["false_rate"]["2"], cal["power"]["2"]

Synthetic tables keep the study's exact design (the same rows: experiments, cells, seeds,
baseline) and replace every metric by a model value plus Gaussian seed noise:

- **noise**: per metric, the pooled within-cell standard deviation of the study's finished runs,
  √(Σ (nᵢ − 1) sᵢ² / Σ (nᵢ − 1)) over cells with nᵢ ≥ 2 seeds; a metric with no such cell gets
  ``DEFAULT_SD`` for its unit (3 pp for fractions, 3 pp for pp-valued metrics, else 5% of its
  typical size).
- **null**: no axis has any effect; every run's accuracy is ``LEARNED_BY`` above the untrained
  student, so that no-effect claims have power.
- **zeros** / **constant**: degenerate tables (every value 0; every value the same, no noise).
- **margin**: each no-effect part of a claim planted at exactly its margin, where "no effect"
  is false (``MARGIN_CASES``: e.g. OnPD +5 pp in the main grid for claim 1, forward KL's band
  5 pp wide for claim 2, the low LR's forgetting at −2 pp for claim 3); a case of a claim that
  also states effects sits on the planted effects, and each case's tables are scored for its
  claim only.
- **planted**: the published effects of docs/method.md §9 (``planted_offsets``), so that each
  claim is true.

A verdict is *false* under null, zeros and constant when it is "supported" or "contradicted" —
except "supported" for the claims a null table makes true (``NO_EFFECT_CLAIMS``) — and under
margin when "supported" (a claim's worst case). A rule's false-verdict rate is its worst rate
over those scenarios; its power is its "supported" rate under the
planted effects. Seeded and deterministic; torch-free.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from distillscope.metric_keys import unit
from distillscope.report.aggregate import (
    cell_columns,
    done,
    hashable_axes,
    metric_columns,
    with_labels,
)
from distillscope.report.claimkit import experiment_rows, is_baseline
from distillscope.report.claims_grid import (
    CLAIM_01_MARGIN_PP,
    CLAIM_02_RANGE_PP,
    CLAIM_03_LOW_LR_MARGIN_PP,
    CLAIM_03_ROLLOUT_MARGIN_PP,
    CLAIM_04_NONINFERIOR_PP,
    CLAIM_09_SIMILAR_PP,
    CLAIM_19_GAIN_PP,
    CLAIM_19_HIGH_RATIO,
    EARLY_ENTROPY,
)
from distillscope.report.claims_reach import CLAIM_23_MARGIN_PP
from distillscope.report.claims_spectrum import CLAIM_06_FORWARD_MARGIN_PP, CLAIM_07_MARGIN_PP
from distillscope.report.load import CALIBRATION_FILE, load_study
from distillscope.report.matching import LAMBDA
from distillscope.report.scorecard import RULES, score_claims
from distillscope.store import atomic_write_text

SCENARIOS = ("null", "zeros", "constant", "margin", "planted")
NULL_SCENARIOS = ("null", "zeros", "constant")
#: Claims that a null table (no axis effect, students learned) makes true: "supported" is
#: right there (no-effect claims, and the robustness claims whose conclusions carry over).
NO_EFFECT_CLAIMS = (1, 7, 14, 15)
MARGIN = "margin"  # the scenario that plants each no-effect claim's effect at its margin
DEFAULT_DRAWS = 200
#: Seed-noise standard deviation by unit when no cell has two seeds (stored units).
DEFAULT_SD = {"fraction": 0.03, "pp": 3.0}
DEFAULT_REL_SD = 0.05  # other units: this fraction of the metric's typical size
LEARNED_BY = 0.30  # simulated students' accuracy above the untrained student (fraction)
ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY = "eval/sparsity_bf16_tau1e-06"
#: Planted forgetting (pp): −1 at the low LR to −12.6 at the high LR ([P]: ≤ 1.3 and
#: 11.2–14.0), OffPD forgetting this much less (within claim 3's ±2 pp, above claim 5's 0).
PLANT_LOW_FORGET_PP, PLANT_HIGH_FORGET_PP = -1.0, 12.6
PLANT_OFFPD_FORGETS_LESS_PP = 1.0
#: Trajectory features of OPD runs (claim 16) with their null value and noise.
TRAJ = {
    "traj/reward_drop_pp": (0.0, 2.0),  # pp
    "traj/len_rise": (0.0, 1.0),  # tokens, from the reward's peak quarter to the last
    "traj/len_rise_sem": (1.0, 0.0),
    "traj/advantage_rise": (0.0, 0.05),  # nats
    "traj/advantage_rise_sem": (0.05, 0.0),
    EARLY_ENTROPY: (1.0, 0.1),  # student ÷ teacher entropy early in OnPD forward-KL runs
}


def noise_model(df: pd.DataFrame, metrics: list[str]) -> dict[str, float]:
    """Per-metric seed noise (SD, stored units) pooled over the study's cells with ≥ 2 seeds."""
    rows = done(df)
    rows = rows[~is_baseline(rows)]
    cells = cell_columns(rows)
    out = {}
    for m in metrics:
        if m in TRAJ:
            out[m] = TRAJ[m][1]
            continue
        sd = math.nan
        if m in rows.columns and cells:
            vals = pd.to_numeric(rows[m], errors="coerce")
            g = vals.groupby([rows[c].map(str) for c in cells])
            var, n = g.var(ddof=1), g.count()
            ok = (n >= 2) & var.notna()
            ok = ok if float(var[ok].sum()) > 0 else ok & False  # all-equal seeds: no estimate
            if ok.any():
                sd = math.sqrt(float((var[ok] * (n[ok] - 1)).sum() / (n[ok] - 1).sum()))
        out[m] = sd if not math.isnan(sd) else _default_sd(m, _typical(rows, m))
    return out


def _default_sd(metric: str, typical: float) -> float:
    return DEFAULT_SD.get(unit(metric), DEFAULT_REL_SD * max(abs(typical), 1e-3))


def _typical(rows: pd.DataFrame, metric: str) -> float:
    """The metric's median over finished runs (defaults: 0.6 for fractions, else 1); 0 for a
    change in pp (forgetting_pp: after − before) — the null is a world without effects, and a
    study's median forgetting is itself its high LR's effect."""
    if metric in TRAJ:
        return TRAJ[metric][0]
    if unit(metric) == "pp":
        return 0.0
    vals = pd.to_numeric(rows.get(metric, pd.Series(dtype=float)), errors="coerce").dropna()
    if len(vals):
        return float(vals.median())
    return 0.6 if unit(metric) == "fraction" else 0.0 if unit(metric) == "pp" else 1.0


#: Typical values of the metrics the rules read, for a design that has no measurements yet.
TYPICAL = {
    "eval/accuracy": 0.6,
    "eval/pass@1": 0.6,
    "eval/pass@10": 0.75,
    "eval/harder/pass@10": 0.4,
    "eval/forgetting_pp": 0.0,
    "eval/sparsity_bf16_tau1e-06": 0.8,
    "eval/sparsity_fp32_tau1e-06": 0.3,
    "eval/teacher_style_share": 0.5,
    "train/grad_clipped_frac": 0.9,
    "train/grad_norm_mean": 3.0,
    "train/grad_norm_max": 9.0,
    "rollout/student_token_prob_mean": 0.5,
    "rollout/teacher_token_prob_mean": 0.5,
}


def planned_table(plan_rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A results table for planned runs (``study.table.plan_row``) plus a baseline row, every
    metric at its ``TYPICAL`` value: the design of a study before it runs (no seed variance,
    so ``noise_model`` falls back to ``DEFAULT_SD``)."""
    rows = [{**r, "status": "done", **TYPICAL} for r in plan_rows]
    rows.append({"run_id": "baseline", "experiment": "baseline", "status": "done", **TYPICAL})
    return pd.DataFrame(rows)


def design(df: pd.DataFrame) -> pd.DataFrame:
    """The study's rows without measurements: ids, experiment, axes; every run finished."""
    keep = [c for c in df.columns if c not in metric_columns(df)]
    out = hashable_axes(df[keep].copy())
    out["status"] = "done"
    if "reason" in out.columns:
        out["reason"] = ""
    return out.reset_index(drop=True)


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
    clip_off = d["optim.grad_clip"].isna().to_numpy() if "optim.grad_clip" in d else np.zeros(n)
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
    out["eval/harder/pass@10"] = np.where(on, 0.06, 0.0)
    style = (policy == "student").to_numpy() & (kind == "reverse_kl").to_numpy()
    out["eval/teacher_style_share"] = np.where(style, 0.10, 0.70)
    out["train/grad_clipped_frac"] = np.full(n, 0.95)
    out["train/grad_norm_mean"] = np.where(reverse, 1.0, 0.0)  # × typical norm, see _values
    for key, sgn in (("student", 1.0), ("teacher", -1.0)):
        m = f"rollout/{key}_token_prob_mean"
        out[m] = sgn * 2.0 * typical.get(m, 0.01) * np.where(spectrum, lam, 0.0)
    out["traj/reward_drop_pp"] = np.where(opd_none, 15.0, 0.0)  # while length and advantage
    out[EARLY_ENTROPY] = np.where(_onpd_forward(d), 2 * CLAIM_19_HIGH_RATIO, 0.0)
    out["traj/len_rise"] = np.where(opd_none, 10.0, 0.0)  # rise 10 SEM (TRAJ's SEMs)
    out["traj/advantage_rise"] = np.where(opd_none, 0.5, 0.0)
    return _summed([out, *(plant(d, noise) for plant in PLANTERS)], n)


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


def _claim_01_margin(d: pd.DataFrame) -> Offsets:
    """Claim 1: OnPD cells of the main grid CLAIM_01_MARGIN_PP more accurate."""
    main_on = _experiment(d, "main") & (_column(d, "rollout.policy") == "student").to_numpy()
    return {ACC: np.where(main_on, CLAIM_01_MARGIN_PP / 100, 0.0)}


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


def _onpd_forward(d: pd.DataFrame) -> np.ndarray:
    """Mask of the on-policy forward-KL runs (claim 19's; their early entropy is drawn)."""
    return (
        (_column(d, "rollout.policy") == "student") & (_column(d, "objective.kind") == "forward_kl")
    ).to_numpy()


def _claim_19_margin(d: pd.DataFrame) -> Offsets:
    """Claim 19: high-entropy early rollouts in every OnPD forward-KL run, whose students gain
    exactly CLAIM_19_GAIN_PP over the untrained student (``LEARNED_BY`` in the null)."""
    rows = _onpd_forward(d)
    return {
        EARLY_ENTROPY: np.where(rows, 2 * CLAIM_19_HIGH_RATIO, 0.0),
        ACC: np.where(rows, CLAIM_19_GAIN_PP / 100 - LEARNED_BY, 0.0),
    }


def _claim_02_margin(d: pd.DataFrame) -> Offsets:
    """Claim 2: forward KL's range exactly CLAIM_02_RANGE_PP (its OnPD cells at the high LR
    raised by it; the planted forward cells are otherwise equal)."""
    rows = _rows(d, "main", rollout__policy="student", objective__kind="forward_kl")
    return {ACC: np.where(rows & _lr_end(d, "main", True), CLAIM_02_RANGE_PP / 100, 0.0)}


def _claim_03_low_margin(d: pd.DataFrame) -> Offsets:
    """Claim 3: the low LR's pooled change exactly −CLAIM_03_LOW_LR_MARGIN_PP (planted −0.5)."""
    planted = PLANT_LOW_FORGET_PP + PLANT_OFFPD_FORGETS_LESS_PP / 2  # the low-LR mean
    shift = -CLAIM_03_LOW_LR_MARGIN_PP - planted
    return {FORGET: np.where(_lr_end(d, "main", False), shift, 0.0)}


def _claim_03_rollout_margin(d: pd.DataFrame) -> Offsets:
    """Claim 3: OffPD − OnPD forgetting at the high LR exactly CLAIM_03_ROLLOUT_MARGIN_PP."""
    off = _rows(d, "main", rollout__policy="teacher") & _lr_end(d, "main", True)
    return {FORGET: np.where(off, CLAIM_03_ROLLOUT_MARGIN_PP - PLANT_OFFPD_FORGETS_LESS_PP, 0.0)}


def _claim_04_margin(d: pd.DataFrame) -> Offsets:
    """Claim 4: OffPD − OnPD sparsity exactly −CLAIM_04_NONINFERIOR_PP in one matched pair
    (forward KL at the high LR)."""
    off = _rows(d, "main", rollout__policy="teacher", objective__kind="forward_kl")
    rows = off & _lr_end(d, "main", True)
    return {SPARSITY: np.where(rows, -CLAIM_04_NONINFERIOR_PP / 100, 0.0)}


def _claim_09_margin(d: pd.DataFrame) -> Offsets:
    """Claim 9: forward − reverse pass@1 exactly CLAIM_09_SIMILAR_PP (pass@10 moved with it,
    so that the coverage gain stays as planted)."""
    fwd = _rows(d, "main", objective__kind="forward_kl")
    shift = np.where(fwd, CLAIM_09_SIMILAR_PP / 100, 0.0)
    return {"eval/pass@1": shift, "eval/pass@10": shift}


#: Every no-effect part of a claim, planted at its margin (the ``margin`` scenario): rule
#: modules' cases are registered here. Each case's tables are scored for its claim only.
MARGIN_CASES: list[MarginCase] = [
    MarginCase(1, "OnPD +margin in the main grid", _claim_01_margin),
    MarginCase(2, "forward KL's range at the margin", _claim_02_margin, on_planted=True),
    MarginCase(3, "low-LR change at the margin", _claim_03_low_margin, on_planted=True),
    MarginCase(3, "rollout effect at the margin", _claim_03_rollout_margin, on_planted=True),
    MarginCase(4, "OffPD less sparse by the margin", _claim_04_margin, on_planted=True),
    MarginCase(9, "pass@1 gap at the margin", _claim_09_margin, on_planted=True),
    MarginCase(14, "no-clip OnPD +margin (claim 1)", _onpd_margin("no_clip")),
    MarginCase(15, "sampled OnPD +margin (claim 1)", _onpd_margin("sampled")),
    MarginCase(19, "high-entropy runs gaining exactly the margin", _claim_19_margin),
]

#: Published effects planted by other modules: functions of the design returning offsets
#: (stored units) that ``planted_offsets`` adds to its own.
PLANTERS: list[Callable[[pd.DataFrame, dict[str, float]], Offsets]] = []


def margin_cases(claims: Collection[int]) -> list[MarginCase]:
    """The margin cases of ``claims``, in registry order."""
    return [c for c in MARGIN_CASES if c.claim in claims]


def margin_offsets(d: pd.DataFrame) -> Offsets:
    """Every margin case's offsets summed (each touches only the experiment its rule reads)."""
    return _summed([c.offsets(d) for c in MARGIN_CASES if not c.on_planted], len(d))


def _summed(parts: list[Offsets], n: int) -> Offsets:
    out: Offsets = {}
    for part in parts:
        for m, v in part.items():
            out[m] = out.get(m, np.zeros(n)) + np.asarray(v, dtype=float)
    return out


#: Planted metrics set to a level (not an offset from the study's typical value).
_LEVELS = (
    "eval/forgetting_pp",
    "eval/sparsity_bf16_tau1e-06",
    "eval/sparsity_fp32_tau1e-06",
    "eval/teacher_style_share",
    "train/grad_clipped_frac",
)


def draw(
    d: pd.DataFrame,
    scenario: str,
    metrics: list[str],
    noise: dict[str, float],
    typical: dict[str, float],
    rng: np.random.Generator,
    case: MarginCase | None = None,
) -> pd.DataFrame:
    """One synthetic results table of design ``d`` under ``scenario`` (see module docstring);
    under ``margin``, ``case`` says which claim's part sits at its margin (default: every
    null-based case at once)."""
    out = d.copy()
    base = is_baseline(out).to_numpy()
    opd = out["objective.kind"].map(str).eq("opd").to_numpy() if "objective.kind" in out else None
    planted, levels = _effects(d, scenario, noise, case)
    values = {}
    for m in metrics:
        if scenario in ("zeros", "constant"):
            level = 0.0 if scenario == "zeros" else typical[m]
            values[m] = np.full(len(d), level)
            continue
        v = np.full(len(d), typical[m])
        if m in planted:
            if m in _LEVELS and levels:
                v = planted[m].astype(float)
            elif m == "train/grad_norm_mean":
                v = typical[m] * (1.0 + planted[m])
            else:
                v = v + planted[m]
        v = v + rng.normal(0.0, noise[m], len(d))
        if unit(m) == "fraction":
            v = np.clip(v, 0.0, 1.0)
        values[m] = v
    if ACC in values and scenario not in ("zeros", "constant"):
        values[ACC] = np.where(base, typical[ACC] - LEARNED_BY, values[ACC])
    for m in TRAJ:
        if m in values and opd is not None:
            values[m] = np.where(
                _onpd_forward(out) if m == EARLY_ENTROPY else opd, values[m], np.nan
            )
    return out.assign(**values)


def setup(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str], dict[str, float], dict[str, float]]:
    """(design, metrics, noise SD, typical value) of a study's table: what ``draw`` needs."""
    d = design(df)
    metrics = [m for m in metric_columns(df) if pd.to_numeric(df[m], errors="coerce").notna().any()]
    if "objective.kind" in d.columns and (d["objective.kind"].map(str) == "opd").any():
        metrics += [m for m in TRAJ if m not in metrics and m != EARLY_ENTROPY]
    if _onpd_forward(d).any() and EARLY_ENTROPY not in metrics:
        metrics.append(EARLY_ENTROPY)
    finished_runs = done(df)
    finished_runs = finished_runs[~is_baseline(finished_runs)]
    noise = noise_model(df, metrics)
    typical = {m: _typical(finished_runs, m) for m in metrics}
    if ACC in typical:
        typical[ACC] = float(np.clip(typical[ACC], LEARNED_BY + 0.1, 0.9))
    return d, metrics, noise, typical


def _effects(
    d: pd.DataFrame, scenario: str, noise: dict[str, float], case: MarginCase | None
) -> tuple[Offsets, bool]:
    """(offsets of the scenario, whether the level metrics ``_LEVELS`` are set as levels)."""
    if scenario == "planted":
        return planted_offsets(d, noise), True
    if scenario != MARGIN:
        return {}, False
    if case is None:
        return margin_offsets(d), False
    if case.on_planted:
        return _summed([planted_offsets(d, noise), case.offsets(d)], len(d)), True
    return case.offsets(d), False


def simulate(df: pd.DataFrame, scenario: str, seed: int = 0) -> pd.DataFrame:
    """One synthetic table with the design and noise of ``df`` under ``scenario``."""
    d, metrics, noise, typical = setup(df)
    return draw(d, scenario, metrics, noise, typical, np.random.default_rng(seed))


def _false(claim: int, scenario: str, verdict: str) -> bool:
    if scenario == MARGIN:
        return verdict == "supported"  # only claims with a no-effect part are scored there
    if verdict not in ("supported", "contradicted"):
        return False
    return not (scenario == "null" and claim in NO_EFFECT_CLAIMS and verdict == "supported")


def _claim_ids(claims: Collection[int] | None) -> list[int]:
    """The ids of the rules to score, in claim order (None: all)."""
    return [r.id for r in RULES if claims is None or r.id in claims]


def _scored(scenario: str, claims: Collection[int]) -> list[int]:
    """The claims a scenario's tables are scored for (margin: those with a margin case)."""
    if scenario == MARGIN:
        with_case = {c.claim for c in margin_cases(claims)}
        return [c for c in claims if c in with_case]
    return list(claims)


def _runs(scenario: str, ids: list[int], draws: int) -> list[tuple[MarginCase | None, list[int]]]:
    """(margin case, claims scored) of each batch of ``draws`` tables of a scenario."""
    if scenario == MARGIN:
        return [(c, [c.claim]) for c in margin_cases(ids)]
    return [(None, ids)] if ids else []


def calibrate(
    df: pd.DataFrame,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    claims: Collection[int] | None = None,
    on_table: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Verdict rates of every rule on ``draws`` synthetic tables per scenario (JSON-ready).

    Returns ``{"draws", "seed", "noise", "rates": {scenario: {claim: {verdict: rate}}},
    "false_rate": {claim: worst false rate over its false scenarios}, "power": {claim:
    supported rate under "planted"}}`` with claims as strings (the margin scenario holds the
    no-effect claims only); the degenerate scenarios are drawn once (they have no noise), so
    :func:`tables` tables in all. ``claims`` restricts the rules scored (default: all);
    ``on_table`` is called after each table is scored (progress).
    """
    ids = _claim_ids(claims)
    d, metrics, noise, typical = setup(df)
    rng = np.random.default_rng(seed)
    rates: dict[str, dict[str, dict[str, float]]] = {}
    for scenario in SCENARIOS:
        rates[scenario] = {}
        n = _tables_of(scenario, draws)
        for case, scored in _runs(scenario, ids, draws):
            counts: dict[int, dict[str, int]] = {c: {} for c in scored}
            for _ in range(n):
                table = draw(d, scenario, metrics, noise, typical, rng, case)
                for r in score_claims(table, claims=scored):
                    counts[r.id][r.verdict] = counts[r.id].get(r.verdict, 0) + 1
                if on_table is not None:
                    on_table()
            for c, vs in counts.items():
                got = {v: k / n for v, k in sorted(vs.items())}
                old = rates[scenario].get(str(c))
                if old is None or got.get("supported", 0.0) > old.get("supported", 0.0):
                    rates[scenario][str(c)] = got  # margin: the claim's worst case
    false_rate = {
        str(c): max(
            sum(x for v, x in rates[s][str(c)].items() if _false(c, s, v))
            for s in (*NULL_SCENARIOS, MARGIN)
            if str(c) in rates[s]
        )
        for c in ids
    }
    power = {str(c): rates["planted"][str(c)].get("supported", 0.0) for c in ids}
    out = {"draws": draws, "seed": seed, "noise": noise, "rates": rates}
    return {**out, "false_rate": false_rate, "power": power}


def _tables_of(scenario: str, draws: int) -> int:
    return 1 if scenario in ("zeros", "constant") else draws


def tables(draws: int, claims: Collection[int] | None = None) -> int:
    """How many synthetic tables :func:`calibrate` scores for ``draws`` per scenario."""
    ids = _claim_ids(claims)
    return sum(_tables_of(s, draws) * len(_runs(s, ids, draws)) for s in SCENARIOS)


def write_calibration(
    study_dir: Path,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    on_table: Callable[[], None] | None = None,
) -> Path:
    """Calibrate the scorecard against the study in ``study_dir``; writes calibration.json."""
    study = load_study(Path(study_dir))
    path = study.root / CALIBRATION_FILE
    result = calibrate(study.scored, draws, seed, on_table=on_table)
    atomic_write_text(path, json.dumps(result, indent=1))
    return path


# --- claims 6–8, 24: planted effects and margin cases


def _spectrum_top_lr(d: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, bool]:
    """(spectrum-policy rows of the λ-spectrum at its highest LR, their λ, whether it ran at
    ≥ 2 LRs); a design without spectrum runs has none (its OnPD/OffPD rows are not moved)."""
    L = with_labels(d)
    lam = pd.to_numeric(L[LAMBDA], errors="coerce").to_numpy()
    policy = (_column(L, "rollout.policy") == "spectrum").to_numpy()
    rows = _experiment(L, "spectrum") & policy & ~np.isnan(lam)
    lr = pd.to_numeric(L.get("optim.lr", pd.Series(np.nan, index=L.index)), errors="coerce")
    lrs = lr[rows].dropna().unique()
    if len(lrs):
        rows = rows & (lr == lrs.max()).to_numpy()
    return rows, np.nan_to_num(lam), len(lrs) >= 2


def _spectrum_ramp(d: pd.DataFrame, metric: str, kind: str, size: float) -> Offsets:
    """``metric`` of the ``kind`` spectrum cells at the highest LR rising linearly by ``size``
    (stored units) from the lowest λ to the highest: the curve's range is exactly ``size``."""
    rows, lam, _ = _spectrum_top_lr(d)
    rows = rows & (_column(d, "objective.kind") == kind).to_numpy()
    if not rows.any() or np.ptp(lam[rows]) == 0:
        return {metric: np.zeros(len(d))}
    lo, span = lam[rows].min(), np.ptp(lam[rows])
    return {metric: np.where(rows, size * (lam - lo) / span, 0.0)}


def _claim_06_margin(d: pd.DataFrame) -> Offsets:
    """Claim 6: forward KL's accuracy range over λ exactly CLAIM_06_FORWARD_MARGIN_PP at the
    spectrum's highest LR (one pair of cells at the margin, the others inside: the case
    closest to passing)."""
    return _spectrum_ramp(d, ACC, "forward_kl", CLAIM_06_FORWARD_MARGIN_PP / 100)


def _claim_07_forgetting_margin(d: pd.DataFrame) -> Offsets:
    """Claim 7: forward KL's forgetting range over λ exactly CLAIM_07_MARGIN_PP (pp)."""
    return _spectrum_ramp(d, "eval/forgetting_pp", "forward_kl", CLAIM_07_MARGIN_PP)


def _claim_07_sparsity_margin(d: pd.DataFrame) -> Offsets:
    """Claim 7: forward KL's bf16 sparsity range over λ exactly CLAIM_07_MARGIN_PP."""
    return _spectrum_ramp(d, "eval/sparsity_bf16_tau1e-06", "forward_kl", CLAIM_07_MARGIN_PP / 100)


def _claim_24_planted(d: pd.DataFrame, noise: dict[str, float]) -> Offsets:
    """Claim 24 ([P] §5.2): a third of the reverse-KL runs of the spectrum at the high LR (the
    first seed of each cell) end 20 pp lower — when the spectrum ran at two LRs."""
    rows, _, two_lrs = _spectrum_top_lr(d)
    rows = rows & (_column(d, "objective.kind") == "reverse_kl").to_numpy() & two_lrs
    seed = pd.to_numeric(d.get("seed", pd.Series(np.nan, index=d.index)), errors="coerce")
    first = (seed == seed[rows].min()).to_numpy() if rows.any() else rows
    return {ACC: np.where(rows & first, -0.20, 0.0)}


PLANTERS.append(_claim_24_planted)
MARGIN_CASES += [
    MarginCase(6, "forward KL's range over λ at the margin", _claim_06_margin, on_planted=True),
    MarginCase(7, "forgetting range over λ at the margin", _claim_07_forgetting_margin, True),
    MarginCase(7, "sparsity range over λ at the margin", _claim_07_sparsity_margin, True),
]


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
