"""Coverage of a seed level's interval over seeds *and* items (docs/method.md §9 "What an
interval covers"): students − the untrained student (``seed_level``: claims 18, 19, 23 and the
"learned" premise) is a difference of two configurations evaluated on the same items, so it
carries their item × configuration interaction. On simulated tables with such an interaction
the two-sided 95% interval covers the true difference at ≈ 95% when the per-item values are
read, and visibly less with the seed-only estimator. Tolerances are the Monte-Carlo error of a
coverage rate over ``TABLES`` tables (binomial SE), never one run's result."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest

from distillscope.scorecard.estimate import OVER_ITEMS, OVER_SEEDS, seed_level

TABLES = 240
SEEDS, ITEMS = 4, 120
ALPHA = 0.025  # each one-sided bound: a two-sided 95% interval
ACC = "eval/accuracy"
STUDENTS = {"a": 62.0, "b": 58.0}  # two student configurations (pp), averaged per seed
UNTRAINED = 20.0
TRUE = float(np.mean(list(STUDENTS.values()))) - UNTRAINED
ITEM_SD = 25.0  # item × configuration interaction (pp per item): ~2.3 pp over 120 items
NOISE_SD = 20.0  # per item and run: sampling noise (pp)
RUN_SD = 1.0  # a run's own training noise (pp)


def table(rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """One study: student rows, baseline rows (one per seed), and every row's per-item values
    (students first, then the baseline), in display units."""
    item = rng.normal(0.0, 10.0, ITEMS)
    configs = {**STUDENTS, "untrained": UNTRAINED}
    inter = {c: rng.normal(0.0, ITEM_SD, ITEMS) for c in configs}
    seed = rng.normal(0.0, 2.0, SEEDS)
    rows, x = [], []
    for c, level in configs.items():
        for s in range(SEEDS):
            run = 0.0 if c == "untrained" else rng.normal(0.0, RUN_SD)
            v = level + item + inter[c] + seed[s] + run + rng.normal(0.0, NOISE_SD, ITEMS)
            rows.append({"config": c, "seed": s, ACC: v.mean() / 100})
            x.append(v)
    df = pd.DataFrame(rows)
    base = df["config"] == "untrained"
    return df[~base], df[base], np.array(x)


def interval(with_items: bool, rng: np.random.Generator) -> tuple[float, float, str]:
    """(lower, upper, what it covers) of one table's students − untrained."""
    students, base, x = table(rng)
    items = (lambda rows, metric: x[rows.index.to_numpy()]) if with_items else None
    est = seed_level(students, ACC, "students − untrained", base, items)
    lo, hi = est.bounds(ALPHA)
    return lo, hi, est.covers


@lru_cache(maxsize=2)
def coverage(with_items: bool) -> float:
    """The share of ``TABLES`` tables whose 95% interval covers the true difference."""
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(TABLES):
        lo, hi, _ = interval(with_items, rng)
        hits += lo <= TRUE <= hi
    return hits / TABLES


def se_of(rate: float) -> float:
    """The binomial SE of a coverage rate estimated from ``TABLES`` tables."""
    return math.sqrt(rate * (1 - rate) / TABLES)


def test_seed_level_with_items_covers_at_nominal() -> None:
    nominal = 1 - 2 * ALPHA
    got = coverage(True)
    assert got >= nominal - 3 * se_of(nominal), f"coverage {got:.3f}"


def test_seed_only_seed_level_covers_less() -> None:
    nominal = 1 - 2 * ALPHA
    got = coverage(False)
    assert got < nominal - 3 * se_of(nominal), f"seed-only coverage {got:.3f}"


@pytest.mark.parametrize(("with_items", "said"), [(True, OVER_ITEMS), (False, OVER_SEEDS)])
def test_seed_level_says_what_it_covers(with_items: bool, said: str) -> None:
    *_, covers = interval(with_items, np.random.default_rng(0))
    assert covers == said


def test_plain_level_reads_items_too() -> None:
    """A level without a reference (the untrained student's own pass@k, claim 23's premise)
    generalises over items as well: its SE grows with the item spread."""
    students, _, x = table(np.random.default_rng(3))
    plain = seed_level(students, ACC, "level")
    crossed = seed_level(students, ACC, "level", None, lambda r, m: x[r.index.to_numpy()])
    assert crossed.se > plain.se
    assert (crossed.covers, plain.covers) == (OVER_ITEMS, OVER_SEEDS)
