"""Tables and figures of ``distillscope analyze`` output, for the CLI and the study report.

A run analysed by ``distillscope analyze gradients|estimators`` has ``analysis/gradients.json``
and/or ``analysis/estimators.json`` (written by :mod:`distillscope.eval.analysis`); this module
reads only those files (no torch): the bounds table of docs/method.md §5, the estimator table of
§2, and their per-position-bin figures. A study report shows them in its own section, one block
per analysed run, figures named ``analysis_<run>_<kind>.png``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from distillscope.report.figures import (
    MARKERS,
    OKABE_ITO,
    FigureInfo,
    legend_below,
    new_figure,
    save_figure,
    style,
)
from distillscope.report.tables import Table
from distillscope.results.reader import Study
from distillscope.store import read_json

ANALYSIS_DIR = "analysis"
GRADIENTS_FILE = "gradients.json"
ESTIMATORS_FILE = "estimators.json"
FIGURE_PREFIX = "analysis_"


def _num(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}g}"


def _yes(value: Any) -> str:
    return "—" if value is None else ("yes" if value else "NO")


def _temperatures(data: dict) -> str:
    t = data.get("temperatures", {})
    return (
        f"loss temperatures: student {t.get('loss_student')}, teacher {t.get('loss_teacher')}; "
        f"sampling: student {t.get('sampling_student')}, teacher {t.get('sampling_teacher')} "
        f"({t.get('spectrum_temperatures')} spectrum)"
    )


def gradient_table(data: dict) -> Table:
    """Every checked bound of ``gradients.json``: level, λ or pair, bound, value, observed."""
    rows, classes = [], []
    for c in data.get("checks", []):
        where = f"{c['pair'][0]:g} vs {c['pair'][1]:g}" if c.get("pair") else f"{c['lam']:g}"
        rows.append(
            [
                c["level"],
                where,
                c["name"],
                c["formula"],
                c["inputs"],
                _num(c["bound"]),
                _num(c["observed"]),
                _yes(c["holds"]),
            ]
        )
        classes.append("" if c["holds"] else "verdict-contradicted")
    columns = ["Level", "λ", "Quantity", "Bound", "At", "Bound value", "Observed", "Holds"]
    return Table(columns, rows, classes, numeric={5, 6})


def estimator_table(data: dict) -> Table:
    """Each estimator at each λ: mean exact KL, exact bias and std, the sample's, flags."""
    rows, classes = [], []
    for r in data.get("rows", []):
        sample = f"{_num(r['bias'])} ± {_num(r['se'], 2)}" if r.get("se") is not None else "—"
        rows.append(
            [
                f"{r['lam']:g}",
                r["estimator"],
                r["target"],
                _num(r["target_mean"]),
                _num(r["exact_bias"]),
                _num(r["exact_std"]),
                sample if r["estimator"] != "topk_tail" else _num(r["bias"]),
                _num(r["std"]),
                _yes(r["unbiased"]),
                _yes(r["sample_agrees"]),
            ]
        )
        surprise = r["unbiased"] != r["expected_unbiased"] or r["sample_agrees"] is False
        classes.append("verdict-inconclusive" if surprise else "")
    columns = [
        "λ",
        "Estimator",
        "Target",
        "Mean KL",
        "Exact bias",
        "Exact std",
        "Sample bias ± se",
        "Sample std",
        "Unbiased",
        "Sample agrees",
    ]
    return Table(columns, rows, classes, numeric={3, 4, 5, 6, 7})


def _mids(edges: list[int]) -> list[float]:
    return [(a + b - 1) / 2 for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _values(xs: list) -> list[float]:
    return [math.nan if x is None else x for x in xs]


def gradient_figures(data: dict, out_dir: Path, prefix: str = "") -> list[FigureInfo]:
    """Per-position logit-gradient norms and spread by λ; TV and gradient differences by pair."""
    edges, per_lam = data.get("edges"), data.get("per_lam", [])
    if not edges or not per_lam:
        return []
    x = _mids(edges)
    panels = (
        ("forward_norm", "‖∂F/∂z_S‖₂", "Forward-KL logit gradient"),
        ("reverse_norm", "‖∂R/∂z_S‖₂", "Reverse-KL logit gradient"),
        ("spread", "max r − min r (nats)", "Log-ratio spread R_n"),
    )
    with style():
        fig = new_figure(3)
        for ax, (key, ylabel, title) in zip(fig.axes, panels, strict=True):
            for i, rec in enumerate(per_lam):
                ys = _values(rec["bins"][key])
                ax.plot(
                    x, ys, marker=MARKERS[i % 8], color=OKABE_ITO[i % 8], label=f"λ {rec['lam']:g}"
                )
            if key == "forward_norm":
                ax.axhline(math.sqrt(2), color="0.4", linestyle=":", linewidth=0.9)
            ax.set(xlabel="completion position", ylabel=ylabel, title=title)
        legend_below(fig, ncols=5)
        first = save_figure(fig, out_dir / f"{prefix}gradients.png")
    out = [
        FigureInfo(
            first,
            "Logit gradients and log-ratio spread by position",
            "Mean over the completion tokens of each position bin, one line per λ of the "
            "rollouts; dotted: the forward bound √2 (B = 1). " + _temperatures(data) + ".",
        )
    ]
    pairs = data.get("pairs", [])
    if pairs:
        out.append(_difference_figure(data, x, pairs, out_dir / f"{prefix}gradient_difference.png"))
    return out


def _difference_figure(data: dict, x: list[float], pairs: list[dict], path: Path) -> FigureInfo:
    with style():
        fig = new_figure(2)
        tv_ax, diff_ax = fig.axes
        for i, p in enumerate(pairs):
            label = f"λ {p['lams'][0]:g} vs {p['lams'][1]:g}"
            tv_ax.plot(
                x, _values(p["tv_bins"]), marker=MARKERS[i % 8], color=OKABE_ITO[i % 8], label=label
            )
        tv_ax.set(xlabel="completion position", ylabel="TV(π_λ, π_λ')", title="Per-position TV")
        for j, (key, name) in enumerate((("forward", "forward KL"), ("reverse", "reverse KL"))):
            tvs = [p["tv_sequence"] for p in pairs]
            diffs = [p[f"diff_{key}"] for p in pairs]
            noise = [p[f"noise_{key}"] for p in pairs]
            diff_ax.errorbar(
                tvs,
                diffs,
                yerr=noise,
                fmt=MARKERS[j],
                color=OKABE_ITO[4 + j],
                capsize=3,
                label=name,
            )
        diff_ax.set(
            xlabel="E_x[TV] of the sequences (upper estimate)",
            ylabel="‖∇L(ρ_λ) − ∇L(ρ_λ')‖",
            title="Parameter-gradient difference",
        )
        diff_ax.legend(loc="best")
        legend_below(fig, ncols=4)
        save_figure(fig, path)
    b = data.get("empirical_B", {}).get("value")
    return FigureInfo(
        path,
        "Rollout policy and the gradient: difference against total variation",
        "Left: TV between the λ-spectrum sampling distributions at the same prefix, per "
        "position bin. Right: each pair's parameter-gradient difference (error bars: its "
        "sampling standard error) against the sequences' TV; the bounds 2√2·B·TV (forward) "
        f"and 2·B·R·TV (reverse) with the empirical B = {_num(b)} are in the table.",
    )


def estimator_figures(data: dict, out_dir: Path, prefix: str = "") -> list[FigureInfo]:
    """Exact bias (lines) and sample bias (markers) by position bin, per target, per λ."""
    edges, bins = data.get("edges"), data.get("bins", [])
    if not edges or not bins:
        return []
    x = _mids(edges)
    lams = list(dict.fromkeys(b["lam"] for b in bins))
    names = list(dict.fromkeys(b["estimator"] for b in bins))
    with style():
        fig = new_figure(2, nrows=len(lams))
        for row, lam in enumerate(lams):
            for col, target in enumerate(("reverse_kl", "forward_kl")):
                ax = fig.axes[2 * row + col]
                for b in bins:
                    if b["lam"] != lam or _target(b["estimator"]) != target:
                        continue
                    i = names.index(b["estimator"])
                    colour = OKABE_ITO[i % 8]
                    ax.plot(x, _values(b["exact_bias"]), color=colour, label=b["estimator"])
                    ax.plot(x, _values(b["bias"]), MARKERS[i % 8], color=colour, fillstyle="none")
                ax.set_yscale("symlog", linthresh=1e-2)
                ax.axhline(0.0, color="0.4", linewidth=0.8)
                kl = "KL(π_S‖π_T)" if target == "reverse_kl" else "KL(π_T‖π_S)"
                ax.set(xlabel="completion position", ylabel="bias (nats)", title=f"λ {lam:g}: {kl}")
        handles, labels = [], []
        for ax in fig.axes[:2]:  # the first row's two panels name every estimator between them
            h, lab = ax.get_legend_handles_labels()
            handles, labels = handles + h, labels + lab
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 7))
        path = save_figure(fig, out_dir / f"{prefix}estimators.png")
    return [
        FigureInfo(
            path,
            "Sampled KL estimators: bias by position",
            f"Lines: exact bias (enumerating the vocabulary); open markers: the bias of "
            f"{data.get('samples')} draws per position. k1, k3 and their forward forms are "
            f"unbiased, k2 is not; top-k + tail (k = {data.get('topk')}) is a lower bound. "
            + _temperatures(data)
            + ".",
        )
    ]


def _target(estimator: str) -> str:
    return "reverse_kl" if estimator in ("k1", "k2", "k3") else "forward_kl"


# ---------------------------------------------------------------------------------------------
# The study report's section


def analysed_runs(study: Study) -> list[tuple[str, dict[str, dict]]]:
    """(run id, {"gradients": data, "estimators": data}) for each run with analysis output."""
    out = []
    for run_id in study.results.get("run_id", []):
        run = study.run_dir(str(run_id))
        if run is None:
            continue
        found = {}
        for kind, name in (("gradients", GRADIENTS_FILE), ("estimators", ESTIMATORS_FILE)):
            data = read_json(run / ANALYSIS_DIR / name)
            if data.get("kind") == kind:
                found[kind] = data
        if found:
            out.append((str(run_id), found))
    return out


def analysis_tables(study: Study) -> list[tuple[str, Table]]:
    """One (title, table) per analysed run and kind, in run order."""
    out = []
    for run_id, found in analysed_runs(study):
        if "gradients" in found:
            data = found["gradients"]
            b = data.get("empirical_B", {})
            title = (
                f"{run_id}: gradient bounds (docs/method.md §5), empirical B = "
                f"{_num(b.get('value'))} from {b.get('probes')} probes"
            )
            out.append((title, gradient_table(data)))
        if "estimators" in found:
            title = f"{run_id}: sampled KL estimators against the exact KL"
            out.append((title, estimator_table(found["estimators"])))
    return out


def analysis_figures(study: Study, fig_dir: Path) -> list[FigureInfo]:
    """The analysis figures of every analysed run, written into the report's ``fig_dir``."""
    out = []
    for run_id, found in analysed_runs(study):
        prefix = f"{FIGURE_PREFIX}{re.sub(r'[^A-Za-z0-9_.-]', '_', run_id)}_"
        if "gradients" in found:
            out += gradient_figures(found["gradients"], fig_dir, prefix)
        if "estimators" in found:
            out += estimator_figures(found["estimators"], fig_dir, prefix)
    return out


def split_analysis(figures: list[FigureInfo]) -> tuple[list[FigureInfo], list[FigureInfo]]:
    """(the analysis figures, the others), each in their order."""
    mine = [f for f in figures if f.path.stem.startswith(FIGURE_PREFIX)]
    return mine, [f for f in figures if f not in mine]
