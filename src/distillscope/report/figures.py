"""The report's figures (matplotlib, Agg canvas — no pyplot, no global backend switch).

Each ``*_figure`` function draws one PNG when the study has the data it needs and returns a
``FigureInfo``; otherwise it returns None and the report leaves the figure out. Means are over
seeds, error bars are ± 1 SEM. Colours: the Okabe–Ito palette (colour-blind safe), with line
styles and markers as a second cue.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

from distillscope.report.grids import (
    experiment_rows,
    has,
    main_grid,
    n_values,
    spectrum_grid,
)
from distillscope.results.aggregate import (
    comparable_spectrum,
    percent_scale,
    spectrum_temperatures,
    spectrum_temperatures_text,
)
from distillscope.results.matching import cell_means
from distillscope.scorecard.selection import plain as plain_rows

# Okabe–Ito, with grey in place of its yellow, which is unreadable as a thin line on white.
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999999")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
STYLES = ("-", "--", ":", "-.")
RC = {
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "legend.fontsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
DPI = 110

ACC, FORGET = "eval/accuracy", "eval/forgetting_pp"
#: The judged view (docs/method.md §10 "Sparsity": claims 4, 5 and 7 are scored on bf16
#: checkpoints, where "sparse updates" were first claimed; the fp32 view is ≈ 0 everywhere).
SPARSITY = "eval/sparsity_bf16_tau1e-06"
PANELS = (
    (ACC, "Accuracy (%)", "In-distribution accuracy"),
    (FORGET, "Skill change, after − before (pp)", "Forgetting"),
    (SPARSITY, "Unchanged parameters (%)", "Update sparsity (bf16 view, τ = 1e-6)"),
)


@dataclass(frozen=True)
class FigureInfo:
    """A written figure: its PNG path, a title and a caption for the report."""

    path: Path
    title: str
    caption: str


def new_figure(ncols: int, nrows: int = 1, width: float = 4.4, height: float = 3.6) -> Figure:
    """A constrained-layout figure with ``nrows × ncols`` axes (call inside ``style()``)."""
    fig = Figure(figsize=(width * ncols, height * nrows), dpi=DPI, layout="constrained")
    fig.subplots(nrows, ncols, squeeze=False)
    return fig


def style() -> AbstractContextManager:
    """The report's matplotlib style as a context manager."""
    return matplotlib.rc_context(RC)


def save_figure(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, facecolor="white")
    return path


def _panels(df: pd.DataFrame) -> list[tuple[str, str, str]]:
    return [p for p in PANELS if has(df, p[0])]


def _finish(ax: Axes, metric: str, min_span: float = 5.0) -> None:
    """Zero line for forgetting; y range ≥ ``min_span`` units so seed noise is not magnified,
    kept inside [0, 100] for a percentage (an all-zero accuracy spans 0–5%, never −2.5–2.5%)."""
    if metric == FORGET:
        ax.axhline(0.0, color="0.4", linewidth=0.8)
    ax.set_ylim(*y_range(*ax.get_ylim(), percent=percent_scale(metric) == 100, span=min_span))


def y_range(lo: float, hi: float, percent: bool, span: float = 5.0) -> tuple[float, float]:
    """(lo, hi) widened to at least ``span``, then, for a ``percent`` axis, moved inside
    [0, 100] (the span kept)."""
    if hi - lo < span:
        mid = (hi + lo) / 2
        lo, hi = mid - span / 2, mid + span / 2
    if percent:
        if lo < 0:
            lo, hi = 0.0, max(hi, span)
        if hi > 100:
            lo, hi = min(lo, 100.0 - span), 100.0
    return lo, hi


def legend_below(fig: Figure, ncols: int = 3) -> None:
    """One legend for the whole figure, under the panels (never over the data)."""
    handles, labels = fig.axes[0].get_legend_handles_labels()
    if labels:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), ncols))


def log_axis(ax: Axes, axis: str, ticks: Sequence[float] | None = None) -> None:
    """Log scale with plain tick labels (``5e-05``, ``2``), at ``ticks`` when given."""
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    if ticks is not None:
        target.set_major_locator(FixedLocator(list(ticks)))
    else:
        target.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(fmt)
    target.set_minor_formatter(NullFormatter())


def main_bars_figure(finished: pd.DataFrame, out_dir: Path) -> FigureInfo | None:
    """Accuracy / forgetting / sparsity bars per rollout × KL direction, one bar per LR, of the
    ``finished`` runs (``Study.finished``: labelled; so are the other figures' ``finished``)."""
    m = main_grid(finished)
    panels = _panels(m)
    if m.empty or not panels:
        return None
    with style():
        fig = new_figure(len(panels), width=4.8)
        by_lr = m.sort_values("optim.lr") if "optim.lr" in m else m
        lrs = list(by_lr["_lr"].drop_duplicates())
        groups = list(
            m.sort_values(["_rollout", "_kl"], ascending=[False, True])[["_rollout", "_kl"]]
            .drop_duplicates()
            .itertuples(index=False)
        )
        width = 0.8 / max(len(lrs), 1)
        for ax, (metric, ylabel, title) in zip(fig.axes, panels, strict=True):
            cells = cell_means(m, metric, ["_rollout", "_kl", "_lr"])
            for j, lr in enumerate(lrs):
                xs, ys, es = [], [], []
                for i, (ro, kl) in enumerate(groups):
                    hit = cells[
                        (cells["_rollout"] == ro) & (cells["_kl"] == kl) & (cells["_lr"] == lr)
                    ]
                    if not hit.empty:
                        xs.append(i - 0.4 + width * (j + 0.5))
                        ys.append(hit["mean"].iloc[0])
                        es.append(np.nan_to_num(hit["sem"].iloc[0]))
                ax.bar(
                    xs,
                    ys,
                    width,
                    yerr=es,
                    capsize=3,
                    color=OKABE_ITO[j % 8],
                    label=f"LR {lr}",
                    edgecolor="black",
                    linewidth=0.5,
                    hatch=("", "//", "..", "xx")[j % 4],
                )
            ax.set_xticks(range(len(groups)), [f"{ro}\n{kl}" for ro, kl in groups])
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            _finish(ax, metric)
        legend_below(fig, ncols=4)
        path = save_figure(fig, out_dir / "main_bars.png")
    return FigureInfo(
        path,
        "Main grid: rollout × KL direction × learning rate",
        "Mean over seeds; error bars ± 1 SEM. Forgetting is the change of the skill "
        "suite score (negative = forgot); sparsity is the share of parameters that "
        "moved by less than 1e-6 with both checkpoints cast to bf16 (the view the scorecard "
        "judges).",
    )


def _lines(ax: Axes, cells: pd.DataFrame, x: str, series: Sequence[str], styles: dict) -> None:
    """One errorbar line per combination of ``series`` columns; styles maps key → (colour, ls)."""
    for key, rows in cells.groupby(list(series), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        colour, ls, marker = styles[key]
        rows = rows.sort_values(x)
        ax.errorbar(
            rows[x],
            rows["mean"],
            yerr=np.nan_to_num(rows["sem"]),
            color=colour,
            linestyle=ls,
            marker=marker,
            capsize=3,
            label=" · ".join(map(str, key)),
        )


def _style_map(keys: Sequence[tuple]) -> dict:
    """Colour by the first key part, line style by the second (markers follow the colour)."""
    firsts = list(dict.fromkeys(k[0] for k in keys))
    seconds = list(dict.fromkeys(k[1] if len(k) > 1 else "" for k in keys))
    out = {}
    for k in keys:
        i, j = firsts.index(k[0]), seconds.index(k[1] if len(k) > 1 else "")
        out[k] = (OKABE_ITO[i % 8], STYLES[j % 4], MARKERS[i % 8])
    return out


def lr_sweep_figure(finished: pd.DataFrame, out_dir: Path) -> FigureInfo | None:
    """Accuracy, forgetting and sparsity against the learning rate, per rollout × KL direction."""
    rows = plain_rows(experiment_rows(finished, "lr_sweep"))
    if n_values(rows, "optim.lr") < 3:
        return None
    panels = _panels(rows)
    if not panels:
        return None
    keys = list(rows[["_rollout", "_kl"]].drop_duplicates().itertuples(index=False, name=None))
    styles = _style_map(keys)
    with style():
        fig = new_figure(len(panels))
        for ax, (metric, ylabel, title) in zip(fig.axes, panels, strict=True):
            _lines(
                ax,
                cell_means(rows, metric, ["_rollout", "_kl", "optim.lr"]),
                "optim.lr",
                ["_rollout", "_kl"],
                styles,
            )
            log_axis(ax, "x", sorted(rows["optim.lr"].dropna().unique()))
            ax.set_xlabel("Peak learning rate (log scale)")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            _finish(ax, metric)
        legend_below(fig, ncols=4)
        path = save_figure(fig, out_dir / "lr_sweep.png")
    return FigureInfo(
        path,
        "Learning-rate sweep",
        "Mean ± SEM over seeds at each learning rate; colour = rollout policy, line "
        "style = KL direction.",
    )


def spectrum_figure(finished: pd.DataFrame, out_dir: Path) -> FigureInfo | None:
    """Accuracy, forgetting and sparsity against λ, per KL direction; the title names the
    spectrum's temperatures (docs/method.md §3 "The spectrum's ends")."""
    rows, left_out = comparable_spectrum(spectrum_grid(finished))
    if n_values(rows, "_lam") < 3:
        return None
    panels = _panels(rows)
    if not panels:
        return None
    keys = [(k,) for k in rows["_kl"].drop_duplicates()]
    styles = _style_map(keys)
    with style():
        fig = new_figure(len(panels))
        for ax, (metric, ylabel, title) in zip(fig.axes, panels, strict=True):
            _lines(ax, cell_means(rows, metric, ["_kl", "_lam"]), "_lam", ["_kl"], styles)
            _lam_axis(ax)
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            _finish(ax, metric)
        legend_below(fig, ncols=4)
        path = save_figure(fig, out_dir / "spectrum.png")
    return FigureInfo(
        path,
        _spectrum_title("λ-spectrum of rollout policies", rows),
        f"{_spectrum_ends(rows)}, λ = 0 their normalised geometric mean; |λ| > 1 "
        f"extrapolates. Mean ± SEM over seeds.{f' {left_out}.' if left_out else ''}",
    )


def _spectrum_title(title: str, rows: pd.DataFrame) -> str:
    """``title`` with the spectrum's sampling temperatures, ``… — paper (both at T = 1.0)``."""
    temps = spectrum_temperatures_text(rows)
    return f"{title} — {temps}" if temps else title


def _spectrum_ends(rows: pd.DataFrame) -> str:
    """What λ = ±1 are under the spectrum's temperatures (docs/method.md §3)."""
    if spectrum_temperatures(rows) == ["policies"]:
        return "λ = −1 is OffPD and λ = +1 OnPD, token for token"
    return (
        "λ = −1 is the teacher at T = 1.0 (not the OffPD cell, teacher at 0.5), λ = +1 the student"
    )


def _lam_axis(ax: Axes) -> None:
    ax.set_xlabel("λ (−1 = teacher writes, +1 = student writes)")
    for x in (-1.0, 1.0):
        ax.axvline(x, color="0.6", linewidth=0.8, linestyle=":")


def likelihood_figure(finished: pd.DataFrame, out_dir: Path) -> FigureInfo | None:
    """Mean per-token probability of the training rollouts under student and teacher, vs λ."""
    rows, _ = comparable_spectrum(spectrum_grid(finished))
    cols = (
        ("rollout/student_token_prob_mean", "Under the student"),
        ("rollout/teacher_token_prob_mean", "Under the teacher"),
    )
    if n_values(rows, "_lam") < 3 or not all(has(rows, c) for c, _ in cols):
        return None
    styles = _style_map([(k,) for k in rows["_kl"].drop_duplicates()])
    with style():
        fig = new_figure(2)
        for ax, (metric, title) in zip(fig.axes, cols, strict=True):
            _lines(ax, cell_means(rows, metric, ["_kl", "_lam"]), "_lam", ["_kl"], styles)
            _lam_axis(ax)
            ax.set_ylabel("Mean token probability")
            ax.set_title(title)
        legend_below(fig, ncols=4)
        path = save_figure(fig, out_dir / "likelihood_vs_lambda.png")
    return FigureInfo(
        path,
        _spectrum_title("Trajectory likelihood against λ", rows),
        "Mean probability (temperature 1.0) of the sampled rollout tokens, averaged "
        "over training steps and seeds; it should rise with λ under the student and "
        "fall under the teacher.",
    )


def pass_at_k_figure(finished: pd.DataFrame, out_dir: Path) -> FigureInfo | None:
    """pass@k against k per main-grid cell, in distribution and on the harder variant."""
    m = main_grid(finished)
    prefixes = [
        (p, t)
        for p, t in (("eval/pass@", "In distribution"), ("eval/harder/pass@", "Harder variant"))
        if len(_ks(m, p)) >= 2
    ]
    if m.empty or not prefixes:
        return None
    keys = list(m[["_rollout", "_kl", "_lr"]].drop_duplicates().itertuples(index=False, name=None))
    combos = list(dict.fromkeys((k[0], k[1]) for k in keys))
    lrs = list(dict.fromkeys(k[2] for k in keys))
    with style():
        fig = new_figure(len(prefixes), width=7.0 if len(prefixes) == 1 else 5.5)
        for ax, (prefix, title) in zip(fig.axes, prefixes, strict=True):
            ks = _ks(m, prefix)
            for ro, kl, lr in keys:
                sub = m[(m["_rollout"] == ro) & (m["_kl"] == kl) & (m["_lr"] == lr)]
                means = [100 * sub[f"{prefix}{k}"].mean() for k in ks]
                i = combos.index((ro, kl))
                ax.plot(
                    ks,
                    means,
                    color=OKABE_ITO[i % 8],
                    marker=MARKERS[i % 8],
                    linestyle=STYLES[lrs.index(lr) % 4],
                    label=f"{ro} · {kl} · LR {lr}",
                )
            log_axis(ax, "x", ks)
            ax.set_xlabel("k (samples per problem)")
            ax.set_ylabel("pass@k (%)")
            ax.set_title(title)
        legend_below(fig, ncols=2)
        path = save_figure(fig, out_dir / "pass_at_k.png")
    return FigureInfo(
        path,
        "Coverage: pass@k",
        "Unbiased pass@k, mean over seeds; colour = rollout × KL direction, line "
        "style = learning rate.",
    )


def _ks(df: pd.DataFrame, prefix: str) -> list[int]:
    ks = [c[len(prefix) :] for c in df.columns if c.startswith(prefix)]
    return sorted(int(k) for k in ks if k.isdigit() and has(df, f"{prefix}{k}"))
