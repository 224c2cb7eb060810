"""Claim 24 ([P] §5.2): reverse KL at the high LR is unstable and occasionally collapses.

Reads only the main grid and the λ-spectrum, at the high LR: the highest LR of each that ran
at two or more (a one-LR spectrum counts when its LR is the main grid's high LR). A run
*collapses* when it diverged (status ``diverged``) or ended ≥ 15 pp below the mean accuracy of
the other seeds of its own cell: an outlier within its configuration. A whole configuration
that sits stably lower is not a collapse. Part: the share of reverse-KL runs that collapse −
the share of forward-KL runs, above 0 by Fisher's exact test.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.results.aggregate import percent_scale
from distillscope.scorecard.claim_columns import ACC, FORWARD, KIND, LR, MAIN, REVERSE
from distillscope.scorecard.claim_spec import ABOVE, POOLED, Claim, Part, Quote
from distillscope.scorecard.contrasts import cell_by
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence, config_key, missing_metric
from distillscope.scorecard.exact import share_gap

SPECTRUM = "spectrum"
COLLAPSE_PP = 15.0
DIVERGED = "diverged"


def _with_diverged(view: ClaimEvidence, experiment: str) -> pd.DataFrame:
    """Finished runs of ``experiment`` plus its diverged ones (each config once), marked."""
    done = view.rows(experiment).assign(_diverged=False)
    df = view.ev.df
    if "status" not in df.columns or "experiment" not in df.columns:
        return done
    div = df[(df["experiment"].map(str) == experiment) & (df["status"].map(str) == DIVERGED)]
    div = div[~config_key(div).duplicated()]
    div = div[~config_key(div).isin(set(config_key(done)))]
    return pd.concat([done, div.assign(_diverged=True)])


def _lrs(rows: pd.DataFrame) -> list[float]:
    if LR not in rows.columns:
        return []
    return sorted(pd.to_numeric(rows[LR], errors="coerce").dropna().unique())


def high_lr_runs(view: ClaimEvidence) -> pd.DataFrame:
    """The forward- and reverse-KL runs of `main` and `spectrum` at the high LR."""
    grids = {e: _with_diverged(view, e) for e in (MAIN, SPECTRUM)}
    main_lrs = _lrs(grids[MAIN])
    parts = []
    for name, rows in grids.items():
        lrs = _lrs(rows)
        top = lrs[-1] if len(lrs) >= 2 else None
        if top is None and len(main_lrs) >= 2 and lrs == [main_lrs[-1]]:
            top = lrs[0]
        if top is not None and KIND in rows.columns:
            at = rows[(pd.to_numeric(rows[LR]) == top) & rows[KIND].isin([FORWARD, REVERSE])]
            parts.append(at.assign(_grid=name))
    return pd.concat(parts) if parts else pd.DataFrame()


def collapsed(runs: pd.DataFrame) -> tuple[pd.Series, str]:
    """Per run, whether it collapsed; or what is missing (a cell without another seed, a
    finished run without accuracy)."""
    lack = missing_metric(runs[~runs["_diverged"]], ACC, "the high-LR runs")
    if lack:
        return pd.Series(dtype=bool), lack
    by = ["_grid", *[c for c in cell_by(runs) if c != "_grid"]]
    key = runs[by].apply(lambda c: c.map(str)).agg("|".join, axis=1)
    acc = pd.to_numeric(runs[ACC], errors="coerce") * percent_scale(ACC)
    out = runs["_diverged"].astype(bool).copy()
    for _, idx in key.groupby(key).groups.items():
        cell = runs.loc[idx]
        ok = acc.loc[idx][~cell["_diverged"].astype(bool)]
        if len(idx) < 2:
            return out, f"{_name(cell.iloc[0])} has fewer than 2 seeds"
        for i in ok.index:
            others = ok.drop(i)
            if not others.empty:
                out.loc[i] = bool(others.mean() - ok.loc[i] >= COLLAPSE_PP)
    return out, ""


def _name(run: pd.Series) -> str:
    lam = f", λ={run['rollout.lam']:g}" if run.get("_grid") == SPECTRUM else ""
    return f"{run['_grid']} {run[KIND]}{lam} at LR {run[LR]:g}"


def reverse_collapses_more(view: ClaimEvidence) -> list[Estimate]:
    """Share of reverse-KL high-LR runs that collapse − share of forward-KL ones."""
    runs = high_lr_runs(view)
    if runs.empty or not {FORWARD, REVERSE} <= set(runs[KIND]):
        return [
            not_tested(
                "Δ collapse", "forward- and reverse-KL runs of `main` or `spectrum` at a high LR"
            )
        ]
    runs = runs.reset_index(drop=True)
    hit, lack = collapsed(runs)
    if lack:
        return [not_tested("Δ collapse", lack)]
    rev, fwd = (runs[KIND] == REVERSE).to_numpy(), (runs[KIND] == FORWARD).to_numpy()
    h_r, h_f = int(hit[rev].sum()), int(hit[fwd].sum())
    diverged = int(runs["_diverged"].sum())
    note = (
        f"collapsed: reverse KL {h_r}/{int(rev.sum())}, forward KL {h_f}/{int(fwd.sum())} "
        f"({diverged} diverged)"
    )
    return [share_gap("Δ collapse", h_r, int(rev.sum()), h_f, int(fwd.sum()), note)]


def plant(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """[P] §5.2: in the spectrum at its highest LR (when it ran at two), the first seed of
    every reverse-KL cell ends 20 pp below the others."""
    rows = (d.get("experiment", pd.Series("", index=d.index)).map(str) == SPECTRUM).to_numpy()
    lr = pd.to_numeric(d.get(LR, pd.Series(np.nan, index=d.index)), errors="coerce")
    lrs = lr[rows].dropna().unique()
    if len(lrs) < 2:
        return {}
    seed = pd.to_numeric(d.get("seed", pd.Series(np.nan, index=d.index)), errors="coerce")
    rev = rows & (d[KIND].map(str) == REVERSE).to_numpy() & (lr == lrs.max()).to_numpy()
    first = (seed == seed[rev].min()).to_numpy()
    return {ACC: np.where(rev & first, -0.20, 0.0)}


CLAIMS = (
    Claim(
        id=24,
        title="Reverse KL at the high LR is unstable and occasionally collapses.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                38,
                "a LR alto es inestable y colapsa ocasionalmente",
                "at the high LR it is unstable and occasionally collapses",
                "§5.2",
            ),
        ),
        experiments=(MAIN, SPECTRUM),
        parts=(
            Part(
                "Δ collapse",
                "share of the high-LR reverse-KL runs of `main` and `spectrum` that collapse "
                f"(diverged, or ≥ {COLLAPSE_PP:g} pp below the other seeds of their own cell) − "
                "the forward-KL share; bounds from Fisher's exact test",
                reverse_collapses_more,
                POOLED,
                ABOVE,
                0.0,
                "'occasionally collapses' is an occurrence: reverse KL collapsing more often "
                f"than forward KL beyond chance; {COLLAPSE_PP:g} pp below its own seeds is a "
                "collapse no seed noise of the testbed (≈ 2 pp) makes.",
                published=20.0,
                sized=False,
            ),
        ),
        needs="the main grid or the λ-spectrum at a high LR (two LRs) under both KL "
        "directions, with eval/accuracy or diverged runs",
        plant=plant,
    ),
)
