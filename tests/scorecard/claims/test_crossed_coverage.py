"""Coverage of the scorecard's intervals over seeds *and* items (docs/method.md §9 "What an
interval covers"): on simulated tables with an item × configuration interaction and a residual
variance 3× larger in one KL direction, the two-sided 95% interval of a contrast covers the
true contrast at ≈ 95%; the seed-only estimator (no per-item outcomes, one pooled residual
variance) covers visibly less. Tolerances are the Monte-Carlo error of the coverage estimate
(binomial SE of a rate over ``TABLES`` tables), never one run's result."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

from distillscope.scorecard.estimate import Blocks
from distillscope.scorecard.strata import bartlett

TABLES = 240
SEEDS, ITEMS = 4, 120
ALPHA = 0.025  # each one-sided bound: a two-sided 95% interval
KIND, POLICY = "objective.kind", "rollout.policy"
CELLS = [(k, p) for k in ("forward_kl", "reverse_kl") for p in ("student", "teacher")]
TRUE = {("forward_kl", "student"): 70.0, ("forward_kl", "teacher"): 68.0}
TRUE |= {("reverse_kl", "student"): 55.0, ("reverse_kl", "teacher"): 50.0}
RUN_SD = {"forward_kl": 0.6, "reverse_kl": 1.8}  # a run's own noise (pp): 9× the variance
ITEM_SD = 25.0  # an item × configuration interaction (pp per item): 2.3 pp over 120 items
NOISE_SD = 30.0  # per item and run: sampling noise (pp)


def table(rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    """One study: rows (cell, seed, accuracy as a fraction) and each run's per-item values."""
    item = rng.normal(0.0, 10.0, ITEMS)
    inter = {c: rng.normal(0.0, ITEM_SD, ITEMS) for c in CELLS}
    seed = rng.normal(0.0, 2.0, SEEDS)
    rows, x = [], []
    for c in CELLS:
        for s in range(SEEDS):
            run = rng.normal(0.0, RUN_SD[c[0]])
            v = TRUE[c] + item + inter[c] + seed[s] + run + rng.normal(0.0, NOISE_SD, ITEMS)
            rows.append({KIND: c[0], POLICY: c[1], "seed": s, "eval/accuracy": v.mean() / 100})
            x.append(v)
    return pd.DataFrame(rows), np.array(x)


@lru_cache(maxsize=2)
def coverage(with_items: bool) -> dict[str, float]:
    """Per KL direction, the share of ``TABLES`` tables whose 95% interval of OnPD − OffPD
    covers the true contrast."""
    rng = np.random.default_rng(7)
    hits = dict.fromkeys(RUN_SD, 0)
    sides: dict[str, list[np.ndarray]] = {}
    for _ in range(TABLES):
        rows, x = table(rng)
        by = [KIND, POLICY]
        if not with_items:  # the seed-only estimator: no items, axes no stratum test reads
            rows, by = rows.rename(columns={KIND: "kl", POLICY: "rollout"}), ["kl", "rollout"]
        b = Blocks(rows, "eval/accuracy", by, x if with_items else None)
        sides = sides or {  # the cells come in the same order in every table
            k: [b.mask(**{by[0]: k, by[1]: p}) for p in ("student", "teacher")] for k in RUN_SD
        }
        for kind in RUN_SD:
            est = b.difference(*sides[kind], "Δ")
            lo, hi = est.bounds(ALPHA)
            hits[kind] += lo <= TRUE[(kind, "student")] - TRUE[(kind, "teacher")] <= hi
    return {k: h / TABLES for k, h in hits.items()}


def se_of(rate: float) -> float:
    """The binomial SE of a coverage rate estimated from ``TABLES`` tables."""
    return math.sqrt(rate * (1 - rate) / TABLES)


@pytest.mark.parametrize("kind", ["forward_kl", "reverse_kl"])
def test_crossed_intervals_cover_at_nominal(kind: str) -> None:
    nominal = 1 - 2 * ALPHA
    got = coverage(True)[kind]
    assert got >= nominal - 3 * se_of(nominal), f"{kind}: coverage {got:.3f}"


def test_seed_only_intervals_cover_less() -> None:
    nominal = 1 - 2 * ALPHA
    got = min(coverage(False).values())
    assert got < nominal - 3 * se_of(nominal), f"seed-only coverage {got:.3f}"


def test_bartlett_matches_scipy() -> None:
    from scipy import stats

    rng = np.random.default_rng(1)
    a, b = rng.normal(0, 1, 9), rng.normal(0, 2, 13)
    want = stats.bartlett(a, b).pvalue
    got = bartlett([a.var(ddof=1), b.var(ddof=1)], [8.0, 12.0])
    assert got == pytest.approx(want, rel=1e-10)
