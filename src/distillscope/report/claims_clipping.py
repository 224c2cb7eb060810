"""Scorecard rules on gradient clipping in [P]: docs/method.md §9 claim 13.

Whether clipping is active throughout the main grid and reverse KL's gradients are larger
(whether the conclusions hold without clipping is claim 14, in ``claims_robustness``).
Margins are named constants from which each rule's prose is rendered; ``claimkit`` says what
"beyond" and "within" mean.
"""

from __future__ import annotations

import math

from distillscope.report.claimkit import (
    MAIN,
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    has,
)
from distillscope.report.matching import (
    FORWARD_VS_REVERSE,
    cell_means,
    seed_dof,
)
from distillscope.report.stats import ALPHA, Pair, beyond, interval, num, pooled_pair, pp

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
    head = f"{num(share.a)}% of steps clipped; reverse − forward norm {pp(norms.diff, 2)}"
    return decide(CLAIM_13_RULE, ev, contradicted, supported, head)


RULES_CLIPPING = [
    ClaimRule(
        13,
        "Clipping is active throughout (pre-clip norms > threshold); reverse-KL norms "
        "are larger/spikier.",
        "main grid with both KL directions, train/grad_clipped_frac and train/grad_norm_mean",
        claim_13_applicable,
        claim_13_clipping,
    ),
]
