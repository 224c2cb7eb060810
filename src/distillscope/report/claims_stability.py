"""Scorecard rule on training stability at the high LR: docs/method.md §9 claim 24 ([P] §5.2).

A run *collapses* when it diverged (status ``diverged``: NaN/inf loss, gradient or sampling
distribution) or when it finished ≥ ``CLAIM_24_COLLAPSE_PP`` below its counterpart: the mean
accuracy (over seeds) of the matched cell of the other KL direction — same experiment, same
value of every other axis. The definition is symmetric in the two directions, so with no
difference between them both collapse equally often. The runs are those of the main grid and
of the λ-spectrum at the high LR: the highest LR of a sub-grid that ran at two or more, or a
one-LR spectrum whose LR is the main grid's high LR.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from distillscope.report.aggregate import comparable_spectrum, lr_text
from distillscope.report.claimkit import (
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    has,
    main_grid,
    spectrum_grid,
)
from distillscope.report.matching import match_columns, match_keys
from distillscope.report.stats import ALPHA, fisher_greater

ACC = "eval/accuracy"
DIVERGED = "_diverged"  # marks the diverged runs passed through the sub-grid filters
KINDS = ("forward_kl", "reverse_kl")

CLAIM_24_COLLAPSE_PP = 15.0  # a finished run this far below its counterpart collapsed
CLAIM_24_RULE = (
    f"Runs of the main grid and the λ-spectrum at the high LR (the highest of a sub-grid with "
    f"≥ 2 LRs; a one-LR spectrum at the main grid's high LR). A run collapsed when it diverged "
    f"or ended ≥ {CLAIM_24_COLLAPSE_PP:g} pp below the mean accuracy of its counterpart (the "
    f"matched cell of the other KL direction). Supported: reverse-KL runs collapse in a larger "
    f"share than forward-KL runs, one-sided Fisher exact test p ≤ {ALPHA:g}. Contradicted: "
    f"forward-KL runs in a larger share at the same level. Else inconclusive."
)


def high_lr_runs(s: Scoring) -> pd.DataFrame:
    """Finished and diverged runs of the main grid and λ-spectrum at the high LR, with
    ``sub_grid`` ("main grid" / "λ-spectrum"), DIVERGED and ``collapsed`` columns (NaN where a
    finished run has no accuracy)."""
    return s.cached(_high_lr_runs)


def _high_lr_runs(s: Scoring) -> pd.DataFrame:
    df = s.df
    status = df["status"].map(str) if "status" in df.columns else pd.Series("done", df.index)
    marked = df.assign(**{DIVERGED: status.eq("diverged")})
    marked["status"] = status.where(~status.eq("diverged"), "done")  # the grids keep "done"
    main = main_grid(marked)
    spectrum, _ = comparable_spectrum(spectrum_grid(marked))
    spectrum = spectrum[~spectrum.index.isin(main.index)]  # a table without experiment names
    high = _highest(main)
    parts = []
    for name, rows in (("main grid", main), ("λ-spectrum", spectrum)):
        top = _highest(rows)
        lrs = _lrs(rows)
        if top is None and high is not None and lrs == [high]:
            top = high  # a one-LR spectrum at the main grid's high LR
        if top is not None:
            at = rows[rows["optim.lr"] == top]
            parts.append(_collapsed(at.assign(sub_grid=name)))
    return pd.concat(parts) if parts else df.iloc[0:0]


def _lrs(rows: pd.DataFrame) -> list[float]:
    return sorted(rows["optim.lr"].dropna().unique()) if "optim.lr" in rows.columns else []


def _highest(rows: pd.DataFrame) -> float | None:
    lrs = _lrs(rows)
    return lrs[-1] if len(lrs) >= 2 else None


def _collapsed(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with ``collapsed``: diverged, or ≥ CLAIM_24_COLLAPSE_PP below the counterpart."""
    acc = pd.to_numeric(rows[ACC], errors="coerce") * 100 if ACC in rows else np.nan
    rows = rows.assign(_acc=acc, _match=match_keys(rows, match_columns(rows, "objective.kind")))
    ok = rows[~rows[DIVERGED] & rows["_acc"].notna()]
    means = ok.groupby(["_match", "objective.kind"])["_acc"].mean().to_dict()
    other = {"forward_kl": "reverse_kl", "reverse_kl": "forward_kl"}
    counterpart = [
        means.get((m, other.get(k)), math.nan)
        for m, k in zip(rows["_match"], rows["objective.kind"], strict=True)
    ]
    # a finished run whose counterpart has no finished run cannot end below it: not collapsed
    below = (pd.Series(counterpart, index=rows.index) - rows["_acc"]) >= CLAIM_24_COLLAPSE_PP
    known = rows["_acc"].notna()
    collapsed = np.where(rows[DIVERGED], 1.0, np.where(known, below.astype(float), np.nan))
    return rows.assign(collapsed=collapsed)


def claim_24_applicable(s: Scoring) -> bool:
    """Claim 24 is testable: runs at the high LR under both KL directions."""
    runs = high_lr_runs(s)
    return not runs.empty and set(KINDS) <= set(runs["objective.kind"])


def claim_24_lacking(s: Scoring) -> list[str]:
    """Collapse is judged on accuracy (a diverged run needs none)."""
    runs = high_lr_runs(s)
    return [] if has(runs, ACC) or runs[DIVERGED].any() else [f"{ACC} of the high-LR runs"]


def _count(runs: pd.DataFrame, kind: str) -> tuple[int, int, int]:
    """(collapsed, compared, diverged) runs of one KL direction."""
    mine = runs[runs["objective.kind"] == kind]
    judged = mine["collapsed"].dropna()
    return int(judged.sum()), len(judged), int(mine[DIVERGED].sum())


def claim_24_reverse_unstable(s: Scoring) -> Verdict:
    """Claim 24's verdict (``CLAIM_24_RULE``) on the high-LR runs of both KL directions."""
    runs = high_lr_runs(s)
    (h_r, n_r, d_r), (h_f, n_f, d_f) = _count(runs, "reverse_kl"), _count(runs, "forward_kl")
    p_rev, p_fwd = fisher_greater(h_r, n_r, h_f, n_f), fisher_greater(h_f, n_f, h_r, n_r)
    per_grid = "; ".join(
        f"{name} at LR {lr_text(rows['optim.lr'].iloc[0])}: reverse KL "
        f"{_count(rows, 'reverse_kl')[0]}/{_count(rows, 'reverse_kl')[1]}, forward KL "
        f"{_count(rows, 'forward_kl')[0]}/{_count(rows, 'forward_kl')[1]}"
        for name, rows in runs.groupby("sub_grid", sort=False)
    )
    ev = (
        f"collapsed (diverged or ≥ {CLAIM_24_COLLAPSE_PP:g} pp below the other direction's "
        f"matched cell): reverse KL {h_r} of {n_r} runs ({d_r} diverged), forward KL {h_f} of "
        f"{n_f} ({d_f} diverged); one-sided Fisher p = {p_rev:.3g} (reverse more often), "
        f"{p_fwd:.3g} (forward more often). By sub-grid: {per_grid}"
    )
    head = f"reverse {h_r}/{n_r} vs forward {h_f}/{n_f} collapsed, p = {p_rev:.2g}"
    return decide(CLAIM_24_RULE, ev, p_fwd <= ALPHA, p_rev <= ALPHA, head)


RULES_STABILITY = [
    ClaimRule(
        24,
        "Reverse KL at the high LR is unstable and occasionally collapses.",
        "the main grid or a λ-spectrum at the high LR (a sub-grid with two LRs) under both "
        "KL directions, with eval/accuracy or diverged runs",
        claim_24_applicable,
        claim_24_reverse_unstable,
        lacking=claim_24_lacking,
    ),
]
