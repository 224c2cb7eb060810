"""Scorecard rules on gradient clipping in [P]: docs/method.md §9 claims 13 and 14.

Whether clipping is active throughout the main grid and reverse KL's gradients are larger, and
whether the conclusions hold without clipping (``optim.grad_clip`` null). Margins are named
constants from which each rule's prose is rendered; ``claimkit`` says what "beyond" and
"within" mean.
"""

from __future__ import annotations

import math

import pandas as pd

from distillscope.labels import is_label_column
from distillscope.report.aggregate import objective_label
from distillscope.report.claimkit import (
    MAIN,
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    experiment_rows,
    finished,
    has,
    where,
)
from distillscope.report.matching import (
    CLIP_ON,
    CLIP_ON_VS_OFF,
    FORWARD_VS_REVERSE,
    cell_means,
    describe_pairs,
    paired,
    seed_dof,
)
from distillscope.report.stats import ALPHA, Pair, beyond, interval, num, pooled_pair, pp, within

ACC = "eval/accuracy"
CLIPPED, NORM_MEAN = "train/grad_clipped_frac", "train/grad_norm_mean"
KINDS = ("forward_kl", "reverse_kl")
CI = f"one-sided {1 - ALPHA:.0%} t-interval"


# 13 -----------------------------------------------------------------------------------------
CLAIM_13_ACTIVE_PCT, CLAIM_13_RARE_PCT = 80.0, 50.0  # % of steps clipped: throughout / clearly not
CLAIM_13_RULE = (
    f"Main grid with clipping on. Active: the pooled share of clipped steps > "
    f"{CLAIM_13_ACTIVE_PCT:g}% beyond its {CI}. Larger norms: reverse-KL − forward-KL mean "
    f"pre-clip norm, pooled over matched cells, > 0 beyond its {CI}. Supported: both. "
    f"Contradicted: the clipped share < {CLAIM_13_RARE_PCT:g}%, or the norm difference < 0, "
    f"beyond {1 - ALPHA / 2:.1%} intervals. Else inconclusive."
)
#: The config values a main-grid cell of claim 13 is made of (rollout × KL × LR).
CLAIM_13_CELL = ("rollout.policy", "objective.kind", "objective.teacher_topk", "optim.lr")
REVERSE_VS_FORWARD = FORWARD_VS_REVERSE.reversed()


def claim_13_applicable(s: Scoring) -> bool:
    """Claim 13 is testable: clipped shares and matched forward/reverse KL norms."""
    m = s.grid(MAIN)
    return has(m, CLIPPED, NORM_MEAN) and bool(s.pairs(MAIN, NORM_MEAN, REVERSE_VS_FORWARD))


def claim_13_clipping(s: Scoring) -> Verdict:
    """Claim 13's verdict (``CLAIM_13_RULE``) on the main grid."""
    m = s.grid(MAIN)
    cells = cell_means(m, CLIPPED, [c for c in CLAIM_13_CELL if c in m.columns])
    share = pooled_pair(
        [
            Pair("", r["mean"], r["sem"], 0.0, 0.0, seed_dof(r["runs"]), math.inf)
            for _, r in cells.iterrows()
        ],
        "clipped share",
    )
    norms = pooled_pair(s.pairs(MAIN, NORM_MEAN, REVERSE_VS_FORWARD), "norm")
    ev = (
        f"steps clipped {num(share.a)}% {interval(share)} (cells {num(cells['mean'].min())}–"
        f"{num(cells['mean'].max())}%). Mean pre-clip norm reverse − forward {pp(norms.diff, 2)} "
        f"{interval(norms)}"
    )
    active = Pair("active", share.a, share.a_sem, CLAIM_13_ACTIVE_PCT, 0.0, share.a_dof, math.inf)
    rare = Pair("rare", share.a, share.a_sem, CLAIM_13_RARE_PCT, 0.0, share.a_dof, math.inf)
    contradicted = beyond(rare, 0.0, ALPHA / 2) == -1 or beyond(norms, 0.0, ALPHA / 2) == -1
    supported = beyond(active, 0.0) == 1 and beyond(norms, 0.0) == 1
    return decide(CLAIM_13_RULE, ev, contradicted, supported)


# 14 -----------------------------------------------------------------------------------------
CLAIM_14_MARGIN_PP = 5.0  # a clip-on − clip-off accuracy gap larger than this is deterioration
CLAIM_14_RULE = (
    "Δ = accuracy with clipping (main grid) − without (optim.grad_clip off), pooled over "
    "matched rollout×LR cells, per KL direction (the study's LR label is not part of the match). "
    f"Forward KL stays effective: Δ within ±{CLAIM_14_MARGIN_PP:g} pp (TOST), students learned, "
    f"no no-clip run diverged. Reverse KL deteriorates: Δ > {CLAIM_14_MARGIN_PP:g} pp beyond its "
    f"{CI}, or ≥ half its no-clip runs diverged or failed. Supported: both. Contradicted: forward "
    f"KL's Δ > {CLAIM_14_MARGIN_PP:g} pp beyond its {CI}, or ≥ half its no-clip runs diverged. "
    "Else inconclusive."
)


def no_clip_runs(s: Scoring, kind: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(all no-clip runs of ``kind`` whatever their status, matched clip/no-clip done rows)."""
    return s.cached(_no_clip_runs, kind)


def _no_clip_runs(s: Scoring, kind: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    df = s.df
    if "optim.grad_clip" not in df.columns or "objective.kind" not in df.columns:
        return df.iloc[0:0], df.iloc[0:0]
    rows = experiment_rows(df, "no_clip")
    rows = rows[rows["optim.grad_clip"].isna() & (rows["objective.kind"] == kind)]
    rows = where(rows, "rollout.policy", ["student", "teacher"])
    clip = s.grid(MAIN)
    clip = clip[clip["objective.kind"] == kind] if not clip.empty else clip
    both = pd.concat([finished(rows), clip], ignore_index=True)
    both = both.drop(columns=[c for c in both.columns if is_label_column(c)])
    both[CLIP_ON] = both["optim.grad_clip"].notna()
    return rows, both


def clip_pairs(s: Scoring, kind: str) -> list[Pair]:
    """Accuracy with clipping on vs off under ``kind``, matched on the other axes."""
    _, both = no_clip_runs(s, kind)
    return paired(both, ACC, CLIP_ON_VS_OFF) if not both.empty else []


def claim_14_applicable(s: Scoring) -> bool:
    """Claim 14 is testable: no-clip runs matched to clipped ones under both directions."""
    return all(len(no_clip_runs(s, k)[0]) > 0 and clip_pairs(s, k) for k in KINDS)


def claim_14_no_clip(s: Scoring) -> Verdict:
    """Claim 14's verdict (``CLAIM_14_RULE``)."""
    parts, pooled_by, bad_by = [], {}, {}
    for kind in KINDS:
        runs, _ = no_clip_runs(s, kind)
        pairs = clip_pairs(s, kind)
        bad = int(runs["status"].isin(["diverged", "failed"]).sum()) if "status" in runs else 0
        pooled_by[kind] = pooled_pair(pairs, "clip on vs off")
        bad_by[kind] = (bad, len(runs))
        parts.append(
            f"{objective_label(kind)}: clip on − off pooled {pp(pooled_by[kind].diff)} pp "
            f"{interval(pooled_by[kind])} [{describe_pairs(pairs)}]; {bad}/{len(runs)} no-clip "
            "runs diverged or failed"
        )
    ev = ". ".join(parts)
    f, r = pooled_by["forward_kl"], pooled_by["reverse_kl"]
    (f_bad, f_n), (r_bad, r_n) = bad_by["forward_kl"], bad_by["reverse_kl"]
    contradicted = beyond(f, CLAIM_14_MARGIN_PP) == 1 or 2 * f_bad >= f_n
    r_worse = beyond(r, CLAIM_14_MARGIN_PP) == 1 or 2 * r_bad >= r_n
    found = f_bad == 0 and within(f, CLAIM_14_MARGIN_PP) and r_worse
    if contradicted or not found:
        return decide(CLAIM_14_RULE, ev, contradicted, False)
    power, text = s.learned(MAIN)
    return decide(CLAIM_14_RULE, f"{ev}; {text}", False, power)


RULES_CLIPPING = [
    ClaimRule(
        13,
        "Clipping is active throughout (pre-clip norms > threshold); reverse-KL norms "
        "are larger/spikier.",
        "main grid with both KL directions, train/grad_clipped_frac and train/grad_norm_mean",
        claim_13_applicable,
        claim_13_clipping,
    ),
    ClaimRule(
        14,
        "Without clipping, forward KL stays effective; reverse KL deteriorates.",
        "runs with optim.grad_clip off matched to clipped runs, both KL directions",
        claim_14_applicable,
        claim_14_no_clip,
    ),
]
