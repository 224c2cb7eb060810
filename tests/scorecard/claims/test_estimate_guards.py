"""Guards of the seed-blocked estimates (scorecard/estimate.py) on small planted tables whose
numbers follow by hand: the balanced two-way fit's closed form, ranges of cells, levels and
seed-levels with seeds missing, and what each estimate says when it cannot be made.

A balanced C × S table fitted by y_cs = μ_c + β_s + ε has μ̂_a − μ̂_b = ȳ_a· − ȳ_b·, residuals
y_cs − ȳ_c· − ȳ_·s + ȳ_··, ν = (C − 1)(S − 1) and SE(μ̂_a − μ̂_b) = σ̂ √(2 / S).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from distillscope.scorecard.estimate import Blocks, seed_level
from distillscope.scorecard.interval import Estimate, RangeEstimate, not_tested, t_quantile

ACC = "eval/accuracy"  # a fraction: display units are pp (× 100)
SEEDS = (42, 43, 44)
#: cells a, b, c × seeds 42, 43, 44 (accuracy, fractions): cell effects, a seed effect, noise
Y = np.array(
    [
        [0.700, 0.742, 0.651],
        [0.640, 0.695, 0.598],
        [0.610, 0.640, 0.575],
    ]
)


def _rows(y: np.ndarray = Y, cells: str = "abc", seeds=SEEDS, **const) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"c.x": c, "seed": s, ACC: y[i, j], **const}
            for i, c in enumerate(cells)
            for j, s in enumerate(seeds)
            if not math.isnan(y[i, j])
        ]
    )


def _two_way(y: np.ndarray) -> tuple[float, float]:
    """σ̂² and ν of the balanced two-way fit, by its closed form (pp)."""
    y = 100 * y
    resid = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    dof = (y.shape[0] - 1) * (y.shape[1] - 1)
    return float((resid**2).sum() / dof), float(dof)


def test_t_quantiles_and_when_an_estimate_decides():
    assert t_quantile(0.975, math.inf) == pytest.approx(1.959964, abs=1e-6)
    assert t_quantile(0.975, 3.0) == pytest.approx(3.182446, abs=1e-6)
    assert Estimate("x", 1.0, 1.0, 0.5, 2).decidable()  # any ν > 0
    assert not Estimate("x", 1.0, 1.0, 0.0, 2).decidable()
    assert not Estimate("x", 1.0, math.inf, 3.0, 2).decidable()
    x = Estimate("x", 0.0, 2.0, math.inf, 9)
    z = stats.norm.ppf
    assert x.reach(0.025, 0.8, two_sided=True) == pytest.approx((z(0.975) + z(0.9)) * 2.0)
    gone = not_tested("Δ", "eval/accuracy of main")
    assert (gone.label, gone.missing, gone.decidable()) == ("Δ", "eval/accuracy of main", False)


def test_a_range_bounds_each_pair_by_its_own_se():
    z = stats.norm.ppf
    x = RangeEstimate("r", 6.0, 2.0, math.inf, 3, diffs=(6.0, 1.0), ses=(2.0, 0.5))
    lo, hi = x.bounds(0.025)
    assert lo == pytest.approx(6.0 - z(1 - 0.025 / 2) * 2.0)  # Bonferroni over 2 pairs
    assert hi == pytest.approx(6.0 + z(0.975) * 2.0)
    # a lower bound below 0 is 0: a range is never negative
    assert RangeEstimate("r", 1.0, 1.0, math.inf, 3, diffs=(1.0,), ses=(1.0,)).bounds(0.025)[0] == 0
    assert all(map(math.isnan, RangeEstimate("r", 1.0, 1.0, math.inf, 3).bounds(0.025)))


def test_the_fit_is_the_balanced_two_way_closed_form():
    b = Blocks(_rows(), ACC, ["c.x"])
    sigma2, dof = _two_way(Y)
    assert b.sigma2 == pytest.approx(sigma2) and b.dof == dof
    assert list(b.cells.columns) == ["c.x", "n", "mean", "mu"]
    assert b.cells["mean"].tolist() == pytest.approx((100 * Y).mean(1).tolist())
    x = b.difference(b.mask(c__x="a"), b.mask(c__x="b") | b.mask(c__x="c"), "a − rest")
    assert x.label == "a − rest" and x.seeds == 3 and x.note == ""
    assert x.value == pytest.approx(100 * (Y[0].mean() - (Y[1].mean() + Y[2].mean()) / 2))
    assert x.se == pytest.approx(math.sqrt(sigma2 * 1.5 / 3))  # Σw² = 1 + 2·¼
    # the joint covariance gives the same SE for any contrast
    w = np.array([1.0, -0.5, -0.5])
    assert w @ b.covariance([0, 1, 2]) @ w == pytest.approx(x.se**2)
    ac = b.covariance([0, 2])  # cells a and c only
    assert ac.shape == (2, 2) and [1, -1] @ ac @ [1, -1] == pytest.approx(2 * sigma2 / 3)
    rest = b.difference(b.mask(c__x="b") | b.mask(c__x="c"), b.mask(c__x="a"), "rest − a")
    assert rest.value == pytest.approx(-x.value) and rest.se == pytest.approx(x.se)
    lvl = b.level(b.mask(c__x="a") | b.mask(c__x="b"), "L")
    assert (lvl.label, lvl.note, lvl.seeds) == ("L", "", 3)
    assert lvl.value == pytest.approx(100 * Y[:2].mean())


def test_a_range_of_cells_on_the_fit():
    b = Blocks(_rows(), ACC, ["c.x"])
    sigma2, dof = _two_way(Y)
    x = b.range(np.ones(3, bool), "range")
    means = 100 * Y.mean(1)
    assert isinstance(x, RangeEstimate) and x.label == "range" and x.dof == dof
    assert x.value == pytest.approx(means.max() - means.min()) and x.seeds == 3
    pairs = [abs(means[i] - means[j]) for i, j in ((0, 1), (0, 2), (1, 2))]
    assert list(x.diffs) == pytest.approx(pairs)
    assert list(x.ses) == pytest.approx([math.sqrt(2 * sigma2 / 3)] * 3)
    assert x.se == pytest.approx(math.sqrt(2 * sigma2 / 3)) and x.note == "" and not x.missing
    two = b.range(b.mask(c__x="a") | b.mask(c__x="c"), "a, c")
    assert two.value == pytest.approx(means[0] - means[2]) and two.missing == ""
    one = b.range(b.mask(c__x="a"), "range")
    assert one.missing == "fewer than 2 cells for range" and one.label == "range"
    thin = Blocks(_rows(np.where([[0, 0, 0], [0, 1, 1], [0, 0, 0]], np.nan, Y)), ACC, ["c.x"])
    x = thin.range(np.ones(3, bool), "range")
    assert x.missing == "x=b has fewer than 2 seeds" and x.label == "range"


def test_a_missing_seed_leaves_its_pairs_and_is_named():
    y = Y.copy()
    y[2, 2] = np.nan  # seed 44 has no run in cell c
    b = Blocks(_rows(y), ACC, ["c.x"])
    assert b.incomplete == ["44"] and b.thin == []
    assert b.dof == 8 - 3 - 2  # N − C − (S − 1)
    x = b.difference(b.mask(c__x="a"), b.mask(c__x="b"), "a − b")
    assert x.note == "seed(s) 44 missing in some cell: left those pairs" and x.seeds == 3
    lvl = b.level(np.ones(3, bool), "mean")
    assert lvl.note == "seed(s) 44 missing in some cell: left out"
    per = 100 * y[:, :2].mean(0)  # seeds 42 and 43 are in every cell
    assert (lvl.value, lvl.seeds, lvl.dof) == (pytest.approx(per.mean()), 2, 1.0)
    assert lvl.se == pytest.approx(per.std(ddof=1) / math.sqrt(2))
    y[1, 1] = np.nan
    two = Blocks(_rows(y), ACC, ["c.x"])
    assert two.seed_note() == "seed(s) 43, 44 missing in some cell: left those pairs"
    y4 = np.column_stack([Y, Y[:, 0] + 0.01])  # a fourth seed, 45
    y4[2, 2] = y4[1, 3] = np.nan  # 44 and 45 each miss one cell; 42 and 43 are complete
    four = Blocks(_rows(y4, seeds=(*SEEDS, 45)), ACC, ["c.x"]).level(np.ones(3, bool), "L")
    assert four.note == "seed(s) 44, 45 missing in some cell: left out" and four.seeds == 2


def test_one_degree_of_freedom_still_gives_an_se():
    vals = np.array([[0.50, 0.60, 0.70], [0.40, 0.52, np.nan]])
    b = Blocks(_rows(vals, "ab"), ACC, ["c.x"])
    x = b.difference(b.mask(c__x="a"), b.mask(c__x="b"), "a − b")
    d = np.array([10.0, 8.0])  # the two paired seeds
    assert x.dof == 1 and x.se == pytest.approx(d.std(ddof=1) / math.sqrt(2))


def test_a_missing_seed_raises_no_warning():
    y = Y.copy()
    y[0, 1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Blocks(_rows(y), ACC, ["c.x"])


def test_a_thin_cell_blocks_only_the_estimates_that_read_it():
    y = Y.copy()
    y[2, 1:] = np.nan  # cell c has one seed
    b = Blocks(_rows(y), ACC, ["c.x"])
    assert b.thin == [2] and b.cells["mean"].tolist()[2] == pytest.approx(100 * Y[2, 0])
    ab = b.difference(b.mask(c__x="a"), b.mask(c__x="b"), "a − b")
    assert not ab.missing and ab.seeds == 3
    ac = b.difference(b.mask(c__x="a"), b.mask(c__x="c"), "a − c")
    assert ac.missing == "x=c has fewer than 2 seeds" and ac.label == "a − c"
    lvl = b.level(np.ones(3, bool), "mean")
    assert lvl.missing == "x=c has fewer than 2 seeds" and lvl.label == "mean"


def test_what_each_estimate_says_when_it_cannot_be_made():
    b = Blocks(_rows(), ACC, ["c.x"])
    none = np.zeros(3, bool)
    first = b.difference(none, b.mask(c__x="a"), "d")
    assert (first.label, first.missing) == ("d", "no cell on the first side of d")
    second = b.difference(b.mask(c__x="a"), none, "d")
    assert second.missing == "no cell on the second side of d"
    assert b.level(none, "L").missing == "no cell for L" and b.level(none, "L").label == "L"
    empty = b.contrast(np.zeros(3), "0")
    assert empty.seeds == 0 and empty.value == 0 and not empty.decidable()
    disjoint = np.array([[0.5, 0.6, np.nan], [np.nan, np.nan, 0.4]])
    lvl = Blocks(_rows(disjoint, "ab", (1, 2, 3)), ACC, ["c.x"]).level(np.ones(2, bool), "L")
    assert lvl.missing == "x=b has fewer than 2 seeds"
    apart = np.array([[0.5, 0.6, np.nan, np.nan], [np.nan, np.nan, 0.4, 0.45]])
    lvl = Blocks(_rows(apart, "ab", (1, 2, 3, 4)), ACC, ["c.x"]).level(np.ones(2, bool), "L")
    assert (lvl.label, lvl.missing) == ("L", "fewer than 2 seeds common to the cells of L")


def test_masks_and_cell_names_use_every_column_given():
    rows = pd.concat([_rows(Y[:2], "ab", lr=1e-4), _rows(Y[1:], "ab", lr=3e-4)])
    rows = rows.rename(columns={"lr": "optim.sched.lr"}).assign(**{"k.const": "same"})
    b = Blocks(rows, ACC, ["c.x", "optim.sched.lr", "k.const"])
    m = b.mask(c__x="a", optim__sched__lr=3e-4)
    assert m.tolist() == [False, True, False, False]  # cells sorted: (a, 1e-4), (a, 3e-4), …
    # named by the columns that vary between the cells, last dotted component
    assert b.cell_names([0, 3]) == "x=a, lr=0.0001; x=b, lr=0.0003"
    one = Blocks(_rows(Y[:1], "a"), ACC, ["c.x"])
    assert one.cell_names([0]) == "x=a"  # nothing varies: every column


def test_without_a_seed_column_every_run_is_a_replicate():
    rows = _rows().drop(columns=["seed"])
    b = Blocks(rows, ACC, ["c.x"])
    assert b.dof == 9 - 3  # N − C: no seed blocks
    assert b.cells["mu"].tolist() == pytest.approx((100 * Y).mean(1).tolist())
    whole = Blocks(_rows(), ACC, [])
    assert len(whole.cells) == 1 and whole.cells["n"].tolist() == [9]


def test_a_value_that_is_not_a_number_is_left_out():
    rows = _rows()
    rows[ACC] = rows[ACC].astype(object)
    rows.loc[len(rows)] = {"c.x": "a", "seed": 45, ACC: "n/a"}
    b = Blocks(rows, ACC, ["c.x"])
    assert b.cells["n"].tolist() == [3, 3, 3] and b.sigma2 == pytest.approx(_two_way(Y)[0])
    lvl = seed_level(rows, ACC, "L")
    assert lvl.seeds == 3 and lvl.value == pytest.approx(100 * Y.mean())


def test_an_exactly_additive_table_on_a_large_scale_decides_nothing():
    # a token count ≈ 10⁶: the fit's rounding leaves RSS ≈ 10⁻¹⁸, far below 10⁻²⁰·Σy²
    rows = pd.DataFrame(
        [
            {"c.x": c, "seed": s, "train/tokens": 1e6 + 1000.1 * (c == "a") + 333.7 * s}
            for c in "abc"
            for s in range(3)
        ]
    )
    b = Blocks(rows, "train/tokens", ["c.x"])
    x = b.difference(b.mask(c__x="a"), b.mask(c__x="b"), "a − b")
    assert x.value == pytest.approx(1000.1) and x.se == 0.0 and not x.decidable()


def test_no_value_at_all_has_no_degrees_of_freedom():
    rows = _rows().assign(**{ACC: math.nan})
    b = Blocks(rows, ACC, ["c.x"])
    assert b.dof == 0 and math.isnan(b.sigma2) and b.cells.empty


def test_seed_level_against_a_reference_per_seed_or_its_mean():
    rows = _rows()
    per = 100 * Y.mean(0)  # each seed's mean over its runs
    plain = seed_level(rows, ACC, "L")
    assert (plain.label, plain.note, plain.seeds, plain.dof) == ("L", "", 3, 2.0)
    assert plain.value == pytest.approx(per.mean())
    assert plain.se == pytest.approx(per.std(ddof=1) / math.sqrt(3))
    ref = pd.DataFrame({"seed": [42, 43, 99], ACC: [0.30, 0.34, 0.90]})
    paired = seed_level(rows, ACC, "gain", ref)  # two seeds in common: paired on them
    d = per[:2] - np.array([30.0, 34.0])
    assert paired.value == pytest.approx(d.mean()) and paired.seeds == 2 and paired.dof == 1
    assert paired.se == pytest.approx(d.std(ddof=1) / math.sqrt(2)) and paired.note == ""
    other = pd.DataFrame({"seed": [7, 8], ACC: [0.30, 0.36]})
    against = seed_level(rows, ACC, "gain", other)  # no common seed: the reference's mean
    assert against.value == pytest.approx(per.mean() - 33.0) and against.seeds == 3
    assert against.note == "no seed of the reference matches: against its overall mean"
    nan_ref = other.assign(**{ACC: math.nan})
    gone = seed_level(rows, ACC, "gain", nan_ref)
    assert (gone.label, gone.missing) == ("gain", "eval/accuracy of the untrained student")
    one = seed_level(rows[rows["seed"] == 42], ACC, "L")
    assert (one.label, one.missing) == ("L", "L: fewer than 2 seeds")
    text_ref = other.astype({ACC: object})
    text_ref.loc[2] = {"seed": 9, ACC: "n/a"}
    assert seed_level(rows, ACC, "gain", text_ref).value == pytest.approx(against.value)
