"""The variance-component model of ``scorecard.noise`` recovers known components from simulated
studies, within their sampling error (derived from the simulation's size, not from one run)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from distillscope.scorecard.noise import Components, estimate_noise, pass_k_var
from distillscope.store import write_eval_items


def _study(cells: int, seeds: int, seed_sd: float, train_sd: float, shift: np.ndarray, rng):
    """Rows of a ``cells`` × ``seeds`` study (one LR axis) and its value without evaluation
    noise: cell effect + a seed effect shared by the seed's cells + per-run training noise."""
    beta = rng.normal(0.0, seed_sd, seeds)
    rows = [
        {
            "run_id": f"c{c}-s{s}",
            "experiment": "main",
            "status": "done",
            "optim.lr": 1e-5 * (c + 1),
            "seed": s,
            "_true": 0.5 + shift[c] + beta[s] + rng.normal(0.0, train_sd),
        }
        for c in range(cells)
        for s in range(seeds)
    ]
    return pd.DataFrame(rows)


def _write_items(run: Path, block: str, scores: np.ndarray) -> None:
    """A run's eval_items.parquet for one block: ``scores`` (items, samples) of successes."""
    items, samples = scores.shape
    write_eval_items(
        run,
        {
            "block": [block] * scores.size,
            "task": ["t"] * scores.size,
            "item": np.repeat(np.arange(items), samples).tolist(),
            "item_id": np.repeat(np.arange(items), samples).astype(str).tolist(),
            "sample": np.tile(np.arange(samples), items).tolist(),
            "score": scores.astype(float).ravel().tolist(),
            "length": [1] * scores.size,
            "truncated": [False] * scores.size,
        },
    )


def _var_se(var: float, dof: float) -> float:
    """Standard error of a variance estimate on ``dof`` degrees of freedom: var · √(2/ν)."""
    return var * math.sqrt(2.0 / dof)


def test_components_recovered_without_per_item_data():
    """Binomial evaluation noise at the metric's level (no eval_items): seed and training SDs.

    C = 20 cells × S = 60 seeds. The seed variance's estimate has SE ≈ √(2/(S−1)) ·
    (σ_β² + σ²/C), the residual's √(2/ν) σ² with ν = (C−1)(S−1); bounds are 4 SEs.
    """
    rng = np.random.default_rng(0)
    cells, seeds, seed_sd, train_sd, items, samples = 20, 60, 0.02, 0.015, 200, 2
    df = _study(cells, seeds, seed_sd, train_sd, np.linspace(0.0, 0.1, cells), rng)
    succ = rng.binomial(items * samples, df["_true"].clip(0, 1))
    df["eval/accuracy"] = succ / (items * samples)
    df["eval/accuracy_samples"] = samples
    df["split/eval_items"] = items
    comp = estimate_noise(df.drop(columns="_true"), None)["eval/accuracy"]
    assert (comp.items, comp.samples, comp.p_items) == (items, samples, None)
    level = float(df["eval/accuracy"].mean())
    assert comp.eval_var() == pytest.approx(level * (1 - level) / (items * samples))
    resid = train_sd**2 + comp.eval_var()
    dof = (cells - 1) * (seeds - 1)
    assert abs(comp.train_sd**2 - train_sd**2) < 4 * _var_se(resid, dof)
    seed_var_se = _var_se(seed_sd**2 + resid / cells, seeds - 1)
    assert abs(comp.seed_sd**2 - seed_sd**2) < 4 * seed_var_se
    assert comp.run_var() == pytest.approx(comp.seed_sd**2 + comp.train_sd**2 + comp.eval_var())


def test_per_item_outcomes_give_item_probabilities(tmp_path):
    """With eval_items.parquet, p_items are the items' pooled success rates: each within 4
    binomial SEs √(p(1−p)/(R·n)) of the truth, and eval_var = mean p(1−p)/n / I."""
    rng = np.random.default_rng(1)
    cells, seeds, items, samples = 2, 20, 30, 8
    p_true = np.linspace(0.05, 0.95, items)
    df = _study(cells, seeds, 0.0, 0.0, np.zeros(cells), rng)
    runs = len(df)
    means = []
    for run_id in df["run_id"]:
        scores = rng.random((items, samples)) < p_true[:, None]  # (items, samples)
        means.append(scores.mean())
        _write_items(tmp_path / "runs" / run_id, "accuracy", scores)
    df["eval/accuracy"] = means
    comp = estimate_noise(df.drop(columns="_true"), tmp_path)["eval/accuracy"]
    assert (comp.items, comp.samples) == (items, samples)
    se = np.sqrt(p_true * (1 - p_true) / (runs * samples))
    assert np.all(np.abs(comp.p_items - p_true) < 4 * se)
    p = comp.p_items
    assert comp.eval_var() == pytest.approx(float(np.mean(p * (1 - p)) / samples / items))
    assert comp.eval_var(items=10, samples=1) == pytest.approx(float(np.mean(p * (1 - p)) / 10))


def test_pass_k_variance_closed_forms():
    """k = 1: p(1−p)/n; k = n: pass@n = 1[c > 0], a Bernoulli(1 − (1−p)^n)."""
    p = np.array([0.0, 0.1, 0.5, 0.9])
    assert pass_k_var(p, 10, 1) == pytest.approx(p * (1 - p) / 10)
    q = 1 - (1 - p) ** 10
    assert pass_k_var(p, 10, 10) == pytest.approx(q * (1 - q), abs=1e-12)


def test_no_sampling_and_pp_scale():
    """A metric without evaluation sampling has eval_var 0; a pp metric scales by 100²."""
    none = Components(0.1, 0.2, 0, 0, None)
    assert none.eval_var() == 0.0 and none.run_var() == pytest.approx(0.05)
    pp = Components(0.0, 0.0, 100, 1, None, level=0.5, scale=100.0)
    assert pp.eval_var() == pytest.approx(100.0**2 * 0.25 / 100)


def test_absorbed_fit_matches_dense_least_squares():
    """The cell-absorbed two-way fit gives the dense least-squares residual variance on an
    unbalanced design (seeds missing in some cells); an exactly additive table leaves none."""
    from distillscope.scorecard.noise import seed_and_residual

    rng = np.random.default_rng(2)
    cell = np.array([0, 0, 0, 1, 1, 2, 2, 2, 3, 3])
    seed = np.array([0, 1, 2, 0, 2, 0, 1, 2, 1, 2])
    y = rng.normal(size=len(cell))
    x = np.zeros((len(y), 4 + 2))
    x[np.arange(len(y)), cell] = 1.0
    x[seed == 1, 4], x[seed == 2, 5] = 1.0, 1.0
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    rss = float(((y - x @ beta) ** 2).sum())
    _, sigma2 = seed_and_residual(cell, seed, y)
    assert sigma2 == pytest.approx(rss / (len(y) - 6), rel=1e-9)
    additive = np.array([0.1, 0.2, 0.3, 0.4])[cell] + np.array([0.0, 1.0, -1.0])[seed]
    assert seed_and_residual(cell, seed, additive)[1] == pytest.approx(0.0, abs=1e-24)


def test_a_metric_some_runs_measure_reads_their_evaluation_design(tmp_path):
    """pass@32 is measured only by the runs evaluated with 32 coverage samples (the paper
    preset's `opd` runs); the others draw 10. Its evaluation design is theirs: 32 samples, k = 32,
    item rates from their outcomes alone, not the median run's 10 samples and pooled rates."""
    rng = np.random.default_rng(2)
    items = 20
    p_a, p_b = np.full(items, 0.1), np.full(items, 0.6)  # the two groups' item success rates
    rows = []
    for group, n, p, count in (("main", 10, p_a, 6), ("opd", 32, p_b, 3)):
        for s in range(count):
            run_id = f"{group}-{s}"
            scores = rng.random((items, n)) < p[:, None]
            _write_items(tmp_path / "runs" / run_id, "coverage", scores)
            row = {"run_id": run_id, "experiment": group, "status": "done", "seed": s}
            row["eval/pass@10"] = float(scores[:, :10].any(axis=1).mean())
            row["eval/pass@32"] = float(scores.any(axis=1).mean()) if n == 32 else math.nan
            rows.append(row)
    comps = estimate_noise(pd.DataFrame(rows), tmp_path)
    wide, narrow = comps["eval/pass@32"], comps["eval/pass@10"]
    assert (wide.samples, wide.k, wide.items) == (32, 32, items)
    assert np.all(np.abs(wide.p_items - 0.6) < 4 * np.sqrt(0.24 / (3 * 32)))  # the opd runs'
    assert (narrow.samples, narrow.k) == (10, 10)  # every run measured pass@10: the median's


def test_each_run_s_items_are_read_once_and_not_at_all_when_given(tmp_path, monkeypatch):
    """The noise model reads every run's eval_items.parquet once (it read the trained runs'
    twice: once for the evaluation design, once for the item interaction), and none when the
    caller hands it the study's ItemTable; both give the same components."""
    from distillscope.results import items as items_module
    from distillscope.results.items import load_items

    rng = np.random.default_rng(3)
    df = _study(2, 4, 0.0, 0.0, np.zeros(2), rng).drop(columns="_true")
    df.loc[len(df)] = {**df.iloc[0].to_dict(), "run_id": "baseline", "experiment": "baseline"}
    means = []
    for run_id in df["run_id"]:
        scores = rng.random((12, 4)) < 0.5
        means.append(scores.mean())
        _write_items(tmp_path / "runs" / run_id, "accuracy", scores)
    df["eval/accuracy"] = means
    reads = []
    real = items_module.read_eval_items
    monkeypatch.setattr(items_module, "read_eval_items", lambda run: reads.append(run) or real(run))
    read = estimate_noise(df, tmp_path)
    assert sorted(p.name for p in reads) == sorted(df["run_id"])
    per_item = load_items(tmp_path, df)
    reads.clear()
    given = estimate_noise(df, None, per_item)
    assert reads == []
    assert read["eval/accuracy"].p_items is not None and read["eval/accuracy"].crossed is not None
    assert repr(sorted(given.items())) == repr(sorted(read.items()))
