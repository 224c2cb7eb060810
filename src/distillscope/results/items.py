"""Per-item outcomes of a study's runs, as the scorecard's estimators read them.

    items = load_items(study_dir, results_df)      # every run's eval_items.parquet, once
    x = items.matrix(rows, "eval/accuracy")        # rows × items, display units (pp)

Every run of a study is evaluated on the same items (``eval_items.parquet``,
:mod:`distillscope.eval.outcomes`), so an item's difficulty is shared by every configuration
and its interaction with the configuration is a variance component of every contrast
(docs/method.md §9 "What an interval covers"). ``ItemTable`` keeps, per evaluation block, each
run's mean score per item and its samples per item; ``matrix`` turns them into one metric's
per-item values (pass@k from the item's successes with the unbiased estimator of
:func:`~distillscope.scorecard.noise.pass_k_table`; the skill suite's items for the skill
metrics; forgetting = after − the untrained students' mean per item, in pp), each row shifted
so that its mean is the row's own value of the metric (the skill suite's mean of per-skill
means, a forgetting's ``before`` from its own baseline): the estimators read the item
*variation*, the run's value stays the run's. Metrics no evaluation sampling produces
(sparsity, gradient norms, trajectory features) have no items: ``matrix`` gives None.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from distillscope.metric_keys import unit
from distillscope.results.aggregate import is_baseline, percent_scale
from distillscope.store import read_eval_items, run_dir

SKILLS = "skill/"  # prefix of the skill suite's blocks, read together as one block
SKILL_WIDTH = 1 << 20  # a skill's items are numbered from its rank in the suite × this
FORGET = "eval/forgetting_pp"


@dataclass
class ItemTable:
    """Per block: ``means`` (runs × items, index run id) and ``samples`` (per run) of its items;
    ``baseline`` the untrained-student run ids (the ``before`` of forgetting); ``frames`` each
    run's outcomes as read (block, item, score), for :meth:`outcomes`."""

    means: dict[str, pd.DataFrame]
    samples: dict[str, pd.Series]
    baseline: tuple[str, ...] = ()
    frames: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    _cache: dict = field(default_factory=dict, repr=False)

    def outcomes(self, run_ids: Iterable[str]) -> pd.DataFrame | None:
        """The outcomes of ``run_ids`` (those with any), in that order, as one frame (block,
        item, score, run); None when none has any."""
        frames = [self.frames[r].assign(run=r) for r in run_ids if r in self.frames]
        return pd.concat(frames, ignore_index=True) if frames else None

    def matrix(self, rows: pd.DataFrame, metric: str) -> np.ndarray | None:
        """Per row of ``rows`` (by ``run_id``), the per-item values of ``metric`` in display
        units, shifted to the row's value (module docstring); NaN rows where the row has no
        value or no items; None when the metric has no items (or fewer than 2 rows have)."""
        spec = eval_block(metric)
        if spec is None or "run_id" not in rows or metric not in rows:
            return None
        block, k, _ = spec
        table = self.means.get(block)
        y = pd.to_numeric(rows[metric], errors="coerce").to_numpy(dtype=float)
        ids = rows["run_id"].map(str).to_numpy()
        has = ~np.isnan(y)
        if table is None or np.isin(ids[has], table.index).sum() < 2:
            return None  # a row without the block's items (a baseline's skills) stays NaN
        x = table.reindex(ids).to_numpy(dtype=float)
        if k > 1:
            n = self.samples[block].reindex(ids).to_numpy(dtype=float)
            got = has & ~np.isnan(n)
            if (n[got] < k).any() or (n[got] != n[got][0]).any():
                return None  # pass@k needs the same n ≥ k samples in every run
            n0 = int(n[got][0])
            c = np.rint(np.nan_to_num(x) * n0).astype(int).clip(0, n0)
            x = np.where(got[:, None], pass_k_table(n0, k)[c], np.nan)
        x = x * percent_scale(metric if metric != FORGET else "eval/skills_after")
        if metric == FORGET:
            before = table.reindex([b for b in self.baseline if b in table.index])
            if len(before):
                x = x - 100.0 * before.mean(axis=0).to_numpy(dtype=float)[None, :]
        return shifted(x, y * percent_scale(metric))


def shifted(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-item values ``x`` (rows × items) moved so that each row's mean is its value ``y``
    (display units); NaN rows where ``y`` is NaN."""
    count = (~np.isnan(x)).sum(axis=1)
    mean = np.nansum(x, axis=1) / np.maximum(count, 1)  # a row without items: NaN below
    with np.errstate(invalid="ignore"):
        out = x + (y - np.where(count > 0, mean, np.nan))[:, None]
    out[np.isnan(y)] = np.nan
    return out


def block_of(block: str) -> str:
    """The block a stored block is read as: every skill's block is the skill suite's."""
    return SKILLS if block.startswith(SKILLS) else block


def item_table(frames: dict[str, pd.DataFrame], baseline: tuple[str, ...] = ()) -> ItemTable:
    """An ``ItemTable`` from each run's per-item outcomes (block, item, score), by run id: per
    block, sums and counts over a runs × items grid (``np.bincount``; a skill's items
    numbered apart within the suite)."""
    parts: dict[str, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for r, f in enumerate(frames.values()):
        codes, names = pd.factorize(f["block"])
        item = f["item"].to_numpy(dtype=np.int64)
        score = f["score"].to_numpy(dtype=float)
        skills = sorted(n for n in names if n.startswith(SKILLS))
        for j, name in enumerate(names):
            sel = codes == j
            offset = skills.index(name) * SKILL_WIDTH if name in skills else 0
            parts.setdefault(block_of(name), []).append((r, item[sel] + offset, score[sel]))
    runs = list(frames)
    means, samples = {}, {}
    for block, got in parts.items():
        keys, key = np.unique(np.concatenate([k for _, k, _ in got]), return_inverse=True)
        width = len(keys)
        flat = np.concatenate([np.full(len(k), r) for r, k, _ in got]) * width + key
        score = np.concatenate([s for _, _, s in got])
        size = len(runs) * width
        total = np.bincount(flat, score, size).reshape(len(runs), width)
        count = np.bincount(flat, minlength=size).reshape(len(runs), width)
        keep = count.any(axis=0)
        present = count.any(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)[:, keep]
        index = pd.Index([runs[i] for i in np.flatnonzero(present)], name="run")
        means[block] = pd.DataFrame(mean[present], index=index)
        c = np.where(count[present][:, keep] > 0, count[present][:, keep], np.nan)
        samples[block] = pd.Series(np.nanmedian(c, axis=1), index=index)
    return ItemTable(means, samples, baseline, dict(frames))


def load_items(study_dir: Path | None, df: pd.DataFrame) -> ItemTable | None:
    """Every run's ``eval_items.parquet`` of ``df`` under ``study_dir`` (None: no directory,
    no run with per-item outcomes)."""
    if study_dir is None or "run_id" not in df:
        return None
    frames = {}
    for run_id in dict.fromkeys(df["run_id"].map(str)):
        table = read_eval_items(run_dir(Path(study_dir), run_id))
        if table is not None and len(table):
            frames[run_id] = table[["block", "item", "score"]]
    if not frames:
        return None
    base = tuple(df.loc[is_baseline(df), "run_id"].map(str))
    return item_table(frames, base)


def pass_k_table(n: int, k: int) -> np.ndarray:
    """f_k(c) = 1 − C(n − c, k)/C(n, k) for c = 0 … n (the unbiased pass@k of c correct of n;
    1 − Π_{i=n−c+1..n} (1 − k/i), 1 when n − c < k; k = 1 gives c/n)."""
    out = np.ones(n + 1)
    for c in range(n + 1):
        if n - c >= k:
            out[c] = 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
    return out


def eval_block(metric: str) -> tuple[str, int, float] | None:
    """(evaluation block, k, scale) behind ``metric``; None for a metric no sampling produces."""
    name = metric.split("/", 1)[-1]
    if metric == "eval/accuracy":
        return "accuracy", 1, 1.0
    if metric == "eval/harder_accuracy":
        return "harder", 1, 1.0
    if metric in ("eval/skills_after", "eval/forgetting_pp"):
        return SKILLS, 1, 100.0 if metric == "eval/forgetting_pp" else 1.0
    if metric.startswith("eval/skill-"):
        return SKILLS + name, 1, 1.0
    m = re.fullmatch(r"eval/(harder/)?(pass|avg)@(\d+)", metric)
    if m:
        block = "harder_coverage" if m.group(1) else "coverage"
        return block, int(m.group(3)) if m.group(2) == "pass" else 1, 1.0
    if metric.startswith("rlvr/") and unit(metric) == "fraction":
        return metric, 1, 1.0
    return None
