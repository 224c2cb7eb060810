"""Training-curve figures from ``runs/<id>/metrics.jsonl``: one figure per experiment (sub-grid),
one line per cell, each the mean over the cell's finished seeds at every optimizer step.

Panels (when logged): loss; pre-clip gradient norm with the clip threshold; mean response
length; mean per-token probability of the rollouts under the student (solid) and the teacher
(dashed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from distillscope.report.figures import (
    MARKERS,
    OKABE_ITO,
    FigureInfo,
    legend_below,
    log_axis,
    new_figure,
    save_figure,
    style,
)
from distillscope.results.aggregate import cell_columns
from distillscope.results.matching import cell_key
from distillscope.results.reader import Study

LOSS, GRAD, LENGTH = "train/loss", "train/grad_norm", "rollout/len_mean"
S_PROB, T_PROB = "rollout/student_token_prob", "rollout/teacher_token_prob"
KEYS = (LOSS, GRAD, LENGTH, S_PROB, T_PROB)
MAX_LINES = 8  # one colour each from the palette; more cells are split over several figures


def training_figures(study: Study, out_dir: Path) -> list[FigureInfo]:
    """Training curves averaged over seeds, per cell, for every experiment of ``study``."""
    rows = study.finished
    if rows.empty:
        return []
    exp = (
        rows["experiment"].map(str)
        if "experiment" in rows.columns
        else pd.Series("all runs", index=rows.index)
    )
    out = []
    for i, name in enumerate(sorted(exp.unique())):
        curves = _cell_curves(study, rows[exp == name])
        for j in range(0, len(curves), MAX_LINES):
            part = curves[j : j + MAX_LINES]
            suffix = f"_{j // MAX_LINES + 1}" if len(curves) > MAX_LINES else ""
            path = out_dir / f"training_{i:02d}_{_slug(name)}{suffix}.png"
            info = _draw(part, path, name)
            if info is not None:
                out.append(info)
    return out


def _cell_curves(study: Study, rows: pd.DataFrame) -> list[tuple[str, float, pd.DataFrame]]:
    """[(cell name, clip threshold or NaN, per-step mean over seeds)] for cells with metrics."""
    by = cell_columns(rows)
    varying = [c for c in by if c != "experiment" and rows[c].map(str).nunique() > 1]
    groups = rows.groupby(by, dropna=False, sort=True) if by else [((), rows)]
    out = []
    for _, cell in groups:
        mean, n = seed_mean_curve(study, cell["run_id"], KEYS)
        if not n:
            continue
        first = cell.iloc[0]
        clip = first.get("optim.grad_clip", math.nan)
        clip = float(clip) if clip is not None and not pd.isna(clip) else math.nan
        name = cell_key(first, varying) if varying else "all runs"
        out.append((f"{name} (n={n})", clip, mean))
    return out


def seed_mean_curve(
    study: Study, run_ids: Iterable[str], keys: Sequence[str]
) -> tuple[pd.DataFrame, int]:
    """The per-step mean of ``keys`` over the runs' ``metrics.jsonl`` (step as the index), and
    how many runs logged any step; an empty frame when none did."""
    runs = []
    for run_id in run_ids:
        m = study.metrics(run_id)
        if not m.empty and "step" in m.columns:
            keep = ["step"] + [k for k in keys if k in m.columns]
            runs.append(m[keep].apply(pd.to_numeric, errors="coerce"))
    if not runs:
        return pd.DataFrame(), 0
    return pd.concat(runs).groupby("step", sort=True).mean(), len(runs)


def _draw(
    curves: list[tuple[str, float, pd.DataFrame]], path: Path, name: str
) -> FigureInfo | None:
    panels = [k for k in (LOSS, GRAD, LENGTH) if any(k in c.columns for _, _, c in curves)]
    has_prob = any(S_PROB in c.columns or T_PROB in c.columns for _, _, c in curves)
    n_panels = len(panels) + has_prob
    if not curves or n_panels == 0:
        return None
    titles = {
        LOSS: ("Training loss", "Loss per token"),
        GRAD: ("Pre-clip gradient norm", "Global L2 norm (log scale)"),
        LENGTH: ("Response length", "Mean tokens per completion"),
    }
    steps = max(len(c) for _, _, c in curves)
    window = max(1, steps // 25)
    with style():
        fig = new_figure(min(n_panels, 2), nrows=math.ceil(n_panels / 2), width=6.0, height=3.4)
        axes = fig.axes
        for ax, key in zip(axes, panels, strict=False):
            for i, (label, _, c) in enumerate(curves):
                if key in c.columns:
                    ax.plot(
                        c.index,
                        smooth(c[key], window),
                        color=OKABE_ITO[i % 8],
                        label=label,
                        marker=MARKERS[i % 8],
                        markevery=max(1, len(c) // 6),
                        markersize=5,
                    )
            ax.set_title(titles[key][0])
            ax.set_ylabel(titles[key][1])
            ax.set_xlabel("Optimizer step")
            if key == GRAD:
                _clip_lines(ax, curves)
        if has_prob:
            _prob_panel(axes[len(panels)], curves, window)
        for ax in axes[n_panels:]:
            ax.set_visible(False)
        legend_below(fig, ncols=3)
        save_figure(fig, path)
    smoothed = f" Curves are smoothed with a {window}-step moving average." if window > 1 else ""
    return FigureInfo(
        path,
        f"Training curves — {name}",
        "Mean over the finished seeds of each cell at every optimizer step."
        + smoothed
        + " The dashed grey line in the gradient panel is the clip threshold; norms "
        "above it were clipped.",
    )


def _clip_lines(ax, curves: list[tuple[str, float, pd.DataFrame]]) -> None:
    values = sorted({clip for _, clip, c in curves if not math.isnan(clip) and GRAD in c.columns})
    positive = all((c[GRAD].dropna() > 0).all() for _, _, c in curves if GRAD in c.columns)
    if positive:
        log_axis(ax, "y")
    for v in values:
        ax.axhline(v, color="0.35", linestyle="--", linewidth=1.2)
        ax.annotate(
            f"clip {v:g}",
            (1.0, v),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize=9,
            color="0.25",
        )


def _prob_panel(ax, curves: list[tuple[str, float, pd.DataFrame]], window: int) -> None:
    for i, (_, _, c) in enumerate(curves):
        for key, ls in ((S_PROB, "-"), (T_PROB, "--")):
            if key in c.columns:
                ax.plot(c.index, smooth(c[key], window), color=OKABE_ITO[i % 8], linestyle=ls)
    ax.set_title("Rollout likelihood")
    ax.set_ylabel("Mean token probability")
    ax.set_xlabel("Optimizer step")
    ax.legend(
        [Line2D([], [], color="0.2", linestyle="-"), Line2D([], [], color="0.2", linestyle="--")],
        ["under the student", "under the teacher"],
        loc="best",
        framealpha=0.9,
    )


def smooth(series: pd.Series, window: int) -> pd.Series:
    """A centred moving average over ``window`` steps (the series itself for 1)."""
    return series.rolling(window, center=True, min_periods=1).mean() if window > 1 else series


def _slug(name: str) -> str:
    """A file-name-safe version of an experiment name (which comes from the study's data)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:40] or "experiment"
