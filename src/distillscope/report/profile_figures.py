"""Per-position profile figures from ``runs/<id>/profiles.jsonl`` (docs/method.md §8, "Training
diagnostics"; written by training at ``eval.profile_steps``).

One figure per cell (seeds averaged): x = completion position (the centre of each position
bin), three panels — forward KL F = KL(π_T‖π_S), teacher entropy H(π_T) and the cross-entropy
CE = F + H — and one line per profiled step. A study whose runs have no profiles gets none.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from distillscope.report.figures import (
    MARKERS,
    OKABE_ITO,
    STYLES,
    FigureInfo,
    legend_below,
    new_figure,
    save_figure,
    style,
)
from distillscope.results.aggregate import cell_columns
from distillscope.results.matching import cell_key
from distillscope.results.reader import Study
from distillscope.store import read_profiles

#: (quantity in profiles.jsonl, panel title) of the three panels, left to right.
PANELS = (
    ("forward_kl", "Forward KL  KL(π_T ‖ π_S)"),
    ("teacher_entropy", "Teacher entropy  H(π_T)"),
    ("cross_entropy", "Cross-entropy  CE = KL + H"),
)
_KEYS = ("step", "start", "stop")
#: The axes every figure title names (rollout × KL × LR), with whatever else varies.
NAMED = ("rollout.policy", "objective.kind", "optim.lr")


def profile_figures(study: Study, out_dir: Path) -> list[FigureInfo]:
    """One profile figure per cell of ``study`` whose finished runs wrote profiles."""
    rows = study.finished
    if rows.empty:
        return []
    by = cell_columns(rows)
    varying = [c for c in by if c != "experiment" and rows[c].map(str).nunique() > 1]
    named = [c for c in NAMED if c in by] + [c for c in varying if c not in NAMED]
    groups = rows.groupby(by, dropna=False, sort=True) if by else [((), rows)]
    out = []
    for _, cell in groups:
        profile, n_runs = cell_profile(study, cell["run_id"])
        if profile.empty:
            continue
        first = cell.iloc[0]
        experiment = str(first["experiment"]) if "experiment" in cell.columns else ""
        name = cell_key(first, named) if named else "all runs"
        title = f"{experiment}: {name}" if experiment else name
        path = out_dir / f"profiles_{len(out):03d}_{_slug(experiment or 'runs')}.png"
        out.append(_draw(profile, path, title, n_runs, last_step(cell)))
    return out


def cell_profile(study: Study, run_ids: pd.Series) -> tuple[pd.DataFrame, int]:
    """The mean over runs of each (step, bin) quantity, and the number of runs with profiles.

    One row per (step, start, stop); an empty bin of a run (NaN) is left out of that bin's
    mean, so a bin no run reached stays NaN.
    """
    long = []
    n_runs = 0
    for run_id in run_ids:
        profiles = read_profiles(study.run_dir(str(run_id)))
        n_runs += bool(profiles)
        for row in profiles:
            for b in row["bins"]:
                long.append({"step": row["step"], **b})
    if not long:
        return pd.DataFrame(), 0
    frame = pd.DataFrame(long)
    quantities = [q for q, _ in PANELS if q in frame.columns]
    frame[quantities] = frame[quantities].apply(pd.to_numeric, errors="coerce")
    frame = frame.dropna(subset=list(_KEYS))
    mean = frame.groupby(list(_KEYS), sort=True)[quantities].mean()
    return mean.reset_index(), n_runs


def last_step(cell: pd.DataFrame) -> float:
    """The cell's ``optim.steps`` (NaN when the table lacks it): its last profile is "after"."""
    if "optim.steps" not in cell.columns:
        return math.nan
    value = pd.to_numeric(cell["optim.steps"], errors="coerce").max()
    return float(value) if not pd.isna(value) else math.nan


def _slug(name: str) -> str:
    """A file-name-safe form of an experiment name (which comes from the study's data)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:40] or "runs"


def _draw(profile: pd.DataFrame, path: Path, title: str, n_runs: int, last: float) -> FigureInfo:
    steps = sorted(profile["step"].unique())
    with style():
        fig = new_figure(len(PANELS), width=4.2, height=3.4)
        for ax, (key, panel) in zip(fig.axes, PANELS, strict=True):
            for i, step in enumerate(steps):
                part = profile[profile["step"] == step]
                if key not in part.columns:
                    continue
                centre = (part["start"] + part["stop"] - 1) / 2
                label = f"step {step}" + (" (end)" if step == last else "")
                ax.plot(
                    centre,
                    part[key],
                    color=OKABE_ITO[i % len(OKABE_ITO)],
                    linestyle=STYLES[(i // len(OKABE_ITO)) % len(STYLES)],
                    marker=MARKERS[i % len(MARKERS)],
                    markersize=5,
                    label=label,
                )
            ax.set_title(panel)
            ax.set_xlabel("Completion position (bin centre)")
            ax.set_ylabel("Nats per token")
        fig.suptitle(title)
        legend_below(fig, ncols=min(len(steps), 6))
        save_figure(fig, path)
    return FigureInfo(
        path,
        f"Per-position profiles — {title}",
        f"Mean over {n_runs} finished seed(s) of each position bin's token mean, on fresh "
        "completions the student wrote for the run's fixed probe prompts at each profiled "
        "step (before that step's update; the run's last step is after its last update), "
        "both models at the loss temperatures. KL = CE − H at every position.",
    )
