"""The evidence says what each interval covers (docs/method.md §9 "What an interval covers"):
"over seeds and items" where the runs' per-item outcomes of the metric exist (accuracy,
pass@k, forgetting), "over seeds only" where none do (sparsity, gradient norms, style share,
lengths) or where the table comes without them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from distillscope.scorecard import score_claims
from distillscope.scorecard.claim_spec import ABOVE, POOLED, Part
from distillscope.scorecard.estimate import OVER_ITEMS, OVER_SEEDS, Blocks
from distillscope.scorecard.verdicts import decide_stratum

QUICK = Path(__file__).resolve().parents[3] / "bench" / "records" / "quick-2026-12-02"


def fit(metric: str, with_items: bool) -> Blocks:
    rng = np.random.default_rng(0)
    rows = pd.DataFrame(
        [{"c.x": c, "seed": s, metric: 0.5 + 0.1 * c + rng.normal(0, 0.02)} for c in (0, 1)
         for s in range(3)]
    )  # fmt: skip
    x = rng.normal(50.0, 20.0, (len(rows), 40)) if with_items else None
    if x is not None:
        x += (100 * rows[metric].to_numpy() - x.mean(axis=1))[:, None]
    return Blocks(rows, metric, ["c.x"], x)


@pytest.mark.parametrize(("with_items", "said"), [(True, OVER_ITEMS), (False, OVER_SEEDS)])
def test_contrast_level_and_range_say_what_they_cover(with_items: bool, said: str) -> None:
    b = fit("eval/accuracy", with_items)
    a, other = b.mask(c__x=1), b.mask(c__x=0)
    part = Part("Δ", "a − b", lambda v: [], POOLED, ABOVE, 0.0, "a sign", published=10.0)
    for x in (b.difference(a, other, "Δ"), b.level(a, "L"), b.range(a | other, "R")):
        assert x.covers == said
        assert f"(95% CI) over {said}" in decide_stratum(part, x, 0.025).text


def test_the_quick_record_says_seeds_and_items_or_seeds_only() -> None:
    """Claim 2 reads accuracy (per-item outcomes in every run): seeds and items. Claim 4's
    premise reads bf16 sparsity (no per-item outcomes): seeds only."""
    df = pd.read_parquet(QUICK / "results.parquet")
    got = {r.id: r for r in score_claims(df, study_dir=QUICK, claims=[2, 4])}
    assert f"over {OVER_ITEMS}" in got[2].evidence
    assert f"over {OVER_SEEDS}" in got[4].evidence
    assert f"over {OVER_ITEMS}" not in got[4].evidence.split("|")[0]
