"""Claim 23 ([D]): OPD is a catalyst, not a ceiling breaker — it speeds up early learning but
pass@k at large k converges to the base student's.

Reads only the `opd` experiment's runs against the untrained student (the study's baseline
rows), per seed (the seed as replicate): pass@1 above the untrained student's by 5 pp, and
pass@K at the largest K measured on both (K ≥ 32) within ±3 pp of it. Regime premise: the base
student has latent capability, its pass@K at that K ≥ 10% — a base at 0 has no ceiling to
converge to (``regime``).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from distillscope.results.aggregate import SEED
from distillscope.scorecard.claim_spec import ABOVE, POOLED, WITHIN, Claim, MarginCase, Part, Quote
from distillscope.scorecard.contrasts import blocks
from distillscope.scorecard.estimate import Estimate, not_tested, seed_level
from distillscope.scorecard.evidence import ClaimEvidence, missing_metric
from distillscope.scorecard.planting import in_pp, rows_mask
from distillscope.scorecard.regime_premises import exact

OPD = "opd"
PASS1 = "eval/pass@1"
MIN_K = 32  # "pass@k at large k"
GAIN_PP, GAP_PP = 5.0, 3.0
BASE_PASS_K_PCT = 10.0  # the regime: "a base pass@k well above 0" (docs/method.md §9)
_PASS = re.compile(r"eval/pass@(\d+)")


def _ks(rows: pd.DataFrame) -> set[int]:
    """The k of every pass@k measured (some finite value) in ``rows``."""
    out = set()
    for c in rows.columns:
        m = _PASS.fullmatch(c)
        if m and pd.to_numeric(rows[c], errors="coerce").notna().any():
            out.add(int(m.group(1)))
    return out


def _versus(view: ClaimEvidence, metric: str, label: str) -> list[Estimate]:
    rows, base = view.rows(OPD), view.baseline(metric)
    lack = missing_metric(rows, metric, f"the `{OPD}` runs")
    lack = lack or missing_metric(base, metric, "the untrained student")
    # per-seed rows that measured it (one evaluation setting) must hold every seed of the runs:
    # a seed whose row lacks it is a failed measurement, not another setting (a reference with
    # no seed of the runs is read as its overall mean, ``seed_level``)
    run_seeds, base_seeds = set(rows[SEED].map(str)), set(base[SEED].map(str))
    unmatched = sorted(run_seeds - base_seeds) if run_seeds & base_seeds else []
    if not lack and unmatched:
        lack = f"{metric} of the untrained student for seed {', '.join(unmatched)}"
    if lack:
        return [not_tested(label, lack)]
    fit = blocks(view, OPD, rows, metric)
    if fit.thin:  # every cell of the `opd` runs needs its seeds, as any pooled level
        return [not_tested(label, f"{fit.cell_names(fit.thin)} has fewer than 2 seeds")]
    return [seed_level(rows, metric, label, base, view.ev.item_matrix)]


def pass1_gain(view: ClaimEvidence) -> list[Estimate]:
    """pass@1 of the `opd` runs − the untrained student's, per seed."""
    return _versus(view, PASS1, "pass@1 gain")


def _large_k(view: ClaimEvidence, label: str) -> int | Estimate:
    """The largest K both the `opd` runs and the untrained student measured, or not tested."""
    k = max(_ks(view.rows(OPD)) & _ks(view.baseline()), default=0)
    if k < MIN_K:
        what = f"eval/pass@{MIN_K} of the `{OPD}` runs and the untrained student"
        return not_tested(label, f"{what} (eval.coverage_samples ≥ {MIN_K})")
    return k


def large_k_gap(view: ClaimEvidence) -> list[Estimate]:
    """pass@K of the `opd` runs − the untrained student's at the largest K both measured."""
    k = _large_k(view, "pass@K gap")
    return [k] if isinstance(k, Estimate) else _versus(view, f"eval/pass@{k}", f"pass@{k} gap")


def base_pass_k(view: ClaimEvidence) -> list[Estimate]:
    """The untrained student's pass@K at that K, per seed (the seed as replicate)."""
    k = _large_k(view, "base pass@K")
    if isinstance(k, Estimate):
        return [k]
    metric, label = f"eval/pass@{k}", f"base pass@{k}"
    base = view.baseline(metric)
    lack = missing_metric(base, metric, "the untrained student")
    if lack:
        return [not_tested(label, lack)]
    return [exact(seed_level(base, metric, label, None, view.ev.item_matrix))]


def plant(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """[D]'s picture: the `opd` runs' pass@1 10 pp above the untrained student, pass@K equal."""
    return {PASS1: np.where(rows_mask(d, OPD), in_pp(PASS1, 10.0), 0.0)}


def at_margin(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """The `opd` runs' pass@32 and pass@64 exactly GAP_PP above the untrained student."""
    gap = np.where(rows_mask(d, OPD), in_pp("eval/pass@32", GAP_PP), 0.0)
    return {"eval/pass@32": gap, "eval/pass@64": gap}


CLAIMS = (
    Claim(
        id=23,
        title="OPD is a catalyst, not a ceiling breaker: pass@k at large k converges to the "
        "base student's.",
        quotes=(
            Quote(
                "001_836273fe8eeeb907.txt",
                30,
                "sob grandes orçamentos de amostragem ($k$), o desempenho dos modelos "
                "treinados via OPD converge ao do modelo base, indicando que não há uma "
                "injeção fundamental de novas capacidades.",
                "under large sampling budgets (k), the performance of OPD-trained models "
                "converges to that of the base model, indicating no fundamental injection "
                "of new capabilities.",
            ),
            Quote(
                "001_836273fe8eeeb907.txt",
                28,
                "O estudo estabelece que a OPD funciona primariamente como um catalisador "
                "de exploração, e não como um mecanismo para expandir o teto de "
                "capacidade inerente do modelo.",
                "The study establishes that OPD works primarily as an exploration "
                "catalyst, not as a mechanism that expands the model's inherent "
                "capability ceiling.",
            ),
        ),
        experiments=(OPD,),
        premises=(
            Part(
                "base pass@K",
                f"pass@K of the untrained student (baseline rows) at the largest K ≥ {MIN_K} "
                f"measured on it and the `{OPD}` runs, per seed (the seed as replicate)",
                base_pass_k,
                POOLED,
                ABOVE,
                BASE_PASS_K_PCT,
                "a base student with latent capability on the task (docs/method.md §9): "
                "[D]'s base students reach high pass@k at large k; at 10% there is a ceiling "
                "to converge to.",
                published=50.0,
                unit="%",
                regime="latent capability of the untrained student (pass@K at the largest K)",
            ),
        ),
        parts=(
            Part(
                "pass@1 gain",
                "pass@1 of the `opd` runs − the untrained student's, per seed (the seed as "
                "replicate)",
                pass1_gain,
                POOLED,
                ABOVE,
                GAIN_PP,
                "'speeds up learning': a gain the scorecard calls learned (5 pp).",
                published=10.0,
            ),
            Part(
                "pass@K gap",
                f"pass@K of the `opd` runs − the untrained student's, K the largest k ≥ {MIN_K} "
                "measured on both, per seed",
                large_k_gap,
                POOLED,
                WITHIN,
                GAP_PP,
                "'converges to the base student's': equal within 3 pp, about one evaluation "
                "SE of pass@32 on 100 items.",
                published=0.0,
            ),
        ),
        needs=f"pass@k up to k ≥ {MIN_K} (eval.coverage_samples ≥ {MIN_K}) on the untrained "
        f"student (baseline rows) and the `{OPD}` experiment's OPD runs",
        plant=plant,
        margin_cases=(MarginCase("pass@K of the OPD runs +margin", at_margin, True),),
    ),
)
