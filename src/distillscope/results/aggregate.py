"""Cells, labels and seed aggregation of the one-row-per-run results table.

A *cell* is one configuration of a study: all axis columns except ``seed``. Its numbers are the
mean over the seeds of the runs in it that finished (``status == "done"``), with the standard
error of that mean, SEM = s / √n (sample standard deviation, ddof = 1; undefined for n = 1).

Axis columns are ``experiment``, ``seed``, every dotted config path (``rollout.policy``,
``optim.lr`` …) and the label columns of labelled axes (``lr_label``, see
:mod:`distillscope.labels`); metric columns are namespaced with a slash (``eval/accuracy``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from distillscope import metric_keys
from distillscope.labels import (
    OBJECTIVE_NAMES,
    REGULATION_NAMES,
    ROLLOUT_NAMES,
    SPECTRUM_TEMPERATURE_NAMES,
    is_label_column,
    labelled_axes,
)

ID_COLUMNS = ("run_id", "status", "reason", "parent_run")  # parent_run: an RLVR run's start
SEED = "seed"
BASELINE = "baseline"  # experiment name (and run_id prefix) of the untrained-student rows
PARENT = "parent_run"  # an RLVR run's column: the distilled run it started from


def is_axis(column: str) -> bool:
    """Whether ``column`` describes a run's configuration (rather than a measurement or an id)."""
    if column in ID_COLUMNS or "/" in column:
        return False
    return column in ("experiment", SEED) or "." in column or is_label_column(column)


def axis_columns(df: pd.DataFrame) -> list[str]:
    """The axis columns of ``df`` in table order, ``seed`` included."""
    return [c for c in df.columns if is_axis(c)]


def cell_columns(df: pd.DataFrame) -> list[str]:
    """The columns that define a cell: every axis column except ``seed``."""
    return [c for c in axis_columns(df) if c != SEED]


def metric_columns(df: pd.DataFrame) -> list[str]:
    """The namespaced measurement columns of ``df`` (``eval/…``, ``train/…``, ``rollout/…``)."""
    return [c for c in df.columns if "/" in c and c not in ID_COLUMNS]


def is_fraction(metric: str) -> bool:
    """Whether ``metric`` is stored as a fraction in [0, 1] (its unit in the metric registry)."""
    return metric_keys.is_fraction(metric)


def percent_scale(metric: str) -> float:
    """100 for fraction metrics, 1 otherwise: multiply a value by it to get display units."""
    return 100.0 if is_fraction(metric) else 1.0


def done(df: pd.DataFrame) -> pd.DataFrame:
    """Only the finished runs (all rows when the table has no ``status`` column)."""
    if "status" not in df.columns:
        return df
    return df[df["status"].map(str) == "done"]


def _hashable(series: pd.Series) -> pd.Series:
    """Lists or dicts stored in an axis column become strings so that they can be grouped on."""
    if series.dtype == object and any(
        isinstance(v, (list, dict, np.ndarray)) for v in series.to_numpy()
    ):
        return series.map(lambda v: v if not isinstance(v, (list, dict, np.ndarray)) else str(v))
    return series


def row_keys(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """Each row's values of ``columns`` as one key, ``a|b|c`` (their ``str``, so NaN is "nan";
    "" for no columns), built from plain lists: the claims key cells and configs per table."""
    if not columns:
        return np.array([""] * len(frame), dtype=object)
    texts = [[str(v) for v in frame[c].tolist()] for c in columns]
    return np.array(["|".join(row) for row in zip(*texts, strict=True)], dtype=object)


def is_baseline(df: pd.DataFrame) -> pd.Series:
    """Which rows are the untrained-student baseline (``experiment == "baseline"``)."""
    if "experiment" not in df.columns:
        return pd.Series(False, index=df.index)
    ids = df["run_id"].map(str) if "run_id" in df.columns else pd.Series("", index=df.index)
    return (df["experiment"].map(str) == BASELINE) & ids.str.startswith(BASELINE)


def trained_mask(df: pd.DataFrame) -> np.ndarray:
    """Which rows are students that finished (:func:`done`, not :func:`is_baseline`): the
    runs whose spread the noise model reads."""
    finished = (
        df["status"].map(str).eq("done").to_numpy()
        if "status" in df.columns
        else np.ones(len(df), dtype=bool)
    )
    return finished & ~is_baseline(df).to_numpy()


def trained(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`trained_mask`, in their order."""
    return df[trained_mask(df)]


def is_rlvr(df: pd.DataFrame) -> pd.Series:
    """Which rows are RLVR runs (``parent_run`` set)."""
    if PARENT not in df.columns:
        return pd.Series(False, index=df.index)
    return df[PARENT].notna() & (df[PARENT].map(str) != "")


def hashable_axes(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with list/dict/array values of axis columns turned into strings (groupable).

    Parquet gives list-valued config entries (e.g. a list of operators) back as arrays, which
    cannot be grouped or compared; their string form identifies the cell just as well.
    """
    columns = {c: df[c] for c in axis_columns(df)}  # ``df[c]`` is a new Series at each call
    changed = {c: v for c, s in columns.items() if (v := _hashable(s)) is not s}
    return df.assign(**changed) if changed else df


def aggregate(
    df: pd.DataFrame, metrics: Iterable[str], by: Sequence[str] | None = None
) -> pd.DataFrame:
    """Mean ± SEM over seeds of each metric, per cell, from the finished runs only.

    Args:
        df: the results table, one row per run.
        metrics: metric columns to aggregate; those absent from ``df`` are skipped.
        by: grouping columns; default ``cell_columns(df)`` (all axes except ``seed``).

    Returns:
        One row per group with the ``by`` columns, ``n`` (finished runs in the group) and, for
        each metric ``m``, ``m:mean``, ``m:sem`` (s / √n, NaN for n < 2) and ``m:n`` (runs where
        ``m`` was measured). Values stay in stored units. Missing axis values (e.g. ``grad_clip``
        NaN = off) form their own group.
    """
    rows = done(df)
    by = list(cell_columns(df) if by is None else by)
    metrics = [m for m in metrics if m in rows.columns]
    if not by:
        rows = rows.assign(_all=0)
        by = ["_all"]
    rows = rows.assign(**{c: _hashable(rows[c]) for c in by})
    out_cols = [*by, "n"] + [f"{m}:{s}" for m in metrics for s in ("mean", "sem", "n")]
    if rows.empty:
        return pd.DataFrame(columns=out_cols).drop(columns=["_all"], errors="ignore")
    values = rows[metrics].apply(pd.to_numeric, errors="coerce")
    grouped = values.groupby([rows[c] for c in by], dropna=False, sort=True)
    n = rows.groupby(by, dropna=False, sort=True).size().rename("n")
    if metrics:
        mean, std, count = grouped.mean(), grouped.std(ddof=1), grouped.count()
    out = n.reset_index()
    for m in metrics:
        k = count[m].to_numpy()
        out[f"{m}:mean"] = mean[m].to_numpy()
        out[f"{m}:sem"] = np.where(k >= 2, std[m].to_numpy() / np.sqrt(np.maximum(k, 1)), np.nan)
        out[f"{m}:n"] = k
    return out.drop(columns=["_all"], errors="ignore")


# ---------------------------------------------------------------------------------------------
# Labels shown to readers


def effective_lam(policy: object, lam: object) -> float:
    """λ of a rollout policy: −1 for the teacher (OffPD), +1 for the student (OnPD), else λ."""
    if policy == "teacher":
        return -1.0
    if policy == "student":
        return 1.0
    if policy == "spectrum" and lam is not None and not _isnan(lam):
        return float(lam)
    return math.nan


def rollout_label(policy: object, lam: object = None) -> str:
    """OnPD / OffPD / λ=+0.5 / mix / interleave (— when unknown)."""
    if policy is None or _isnan(policy):
        return "—"
    if policy == "spectrum":
        return f"λ={float(lam):+g}" if lam is not None and not _isnan(lam) else "λ-spectrum"
    return ROLLOUT_NAMES.get(str(policy), str(policy))


#: The config column saying at which temperatures a λ-spectrum sampled (docs/method.md §3).
SPECTRUM_TEMPERATURES = "rollout.spectrum_temperatures"


def spectrum_temperatures(rows: pd.DataFrame) -> list[str]:
    """The ``rollout.spectrum_temperatures`` of the spectrum-policy runs in ``rows``, sorted.

    A table written before the option existed has no such column (or an empty cell): those
    runs sampled at [P]'s temperatures, ``paper``.
    """
    if "rollout.policy" not in rows.columns:
        return []
    spectrum = rows[rows["rollout.policy"].map(str) == "spectrum"]
    if spectrum.empty:
        return []
    if SPECTRUM_TEMPERATURES not in spectrum.columns:
        return ["paper"]
    return sorted({"paper" if _isnan(v) else str(v) for v in spectrum[SPECTRUM_TEMPERATURES]})


def spectrum_temperatures_text(rows: pd.DataFrame) -> str:
    """``paper (both at T = 1.0)`` / ``policies (each at its sampling temperature)`` for the
    spectrum runs of ``rows`` (both, joined by "and", when they differ; "" without any)."""
    return " and ".join(SPECTRUM_TEMPERATURE_NAMES.get(t, t) for t in spectrum_temperatures(rows))


def comparable_spectrum(rows: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """``rows`` of a λ-spectrum sub-grid without the pure-policy cells that its ends are not,
    and a sentence saying which were left out ("" when none).

    An OffPD or OnPD run counts at λ = −1 / +1 (:func:`effective_lam`) only where the spectrum's
    end is that very policy (docs/method.md §3 "The spectrum's ends"): with ``policies``
    temperatures both ends are; with ``paper`` temperatures λ = +1 still is OnPD (both sample
    the student at ``rollout.student_temperature``) but λ = −1 is the teacher at T = 1.0, not
    OffPD (the teacher at ``rollout.teacher_temperature``, 0.5), so the OffPD cells are left
    out. A spectrum at both temperatures keeps its OffPD cells only if all of it is ``policies``.
    """
    temps = spectrum_temperatures(rows)
    if not temps or temps == ["policies"] or "rollout.policy" not in rows.columns:
        return rows, ""
    offpd = rows["rollout.policy"].map(str) == "teacher"
    if not offpd.any():
        return rows, ""
    note = (
        f"{int(offpd.sum())} OffPD run(s) left out of the λ-spectrum: sampled at "
        f"{spectrum_temperatures_text(rows)}, its λ = −1 is the teacher at T = 1.0, not OffPD"
    )
    return rows[~offpd], note


def spectrum_temperature_label(policy: object, temperatures: object = None) -> str:
    """The spectrum temperatures of one spectrum cell (``paper`` when unrecorded); — otherwise."""
    if policy != "spectrum":
        return "—"
    value = "paper" if temperatures is None or _isnan(temperatures) else str(temperatures)
    return SPECTRUM_TEMPERATURE_NAMES.get(value, value)


def objective_label(kind: object, regulation: object = None, teacher_topk: object = None) -> str:
    """forward KL / reverse KL / OPD (hard clip) / forward KL (top-64 teacher) … (— when unknown).

    A top-k teacher (``objective.teacher_topk`` > 0) changes the objective, so it is named.
    """
    if kind is None or _isnan(kind):
        return "—"
    label = OBJECTIVE_NAMES.get(str(kind), str(kind))
    if kind == "opd" and isinstance(regulation, str):
        label += f" ({REGULATION_NAMES.get(regulation, regulation)})"
    if teacher_topk is not None and not _isnan(teacher_topk) and int(teacher_topk) > 0:
        label += f" (top-{int(teacher_topk)} teacher)"
    return label


def lr_text(lr: object, label: object = None) -> str:
    """``5e-05 (high)`` when the study names its learning rates, else ``5e-05``."""
    return with_label("—" if lr is None or _isnan(lr) else f"{float(lr):.0e}", label)


def with_label(text: str, label: object = None) -> str:
    """``text (label)`` when the study named this axis value, else ``text``."""
    return f"{text} ({label})" if isinstance(label, str) and label else text


def axis_text(df: pd.DataFrame, axis: str) -> list[str]:
    """Each row's value of ``axis`` for a reader, with the study's label when it gave one."""
    label = labelled_axes(df.columns).get(axis)
    labels = list(df[label]) if label else [None] * len(df)
    return [with_label(plain_text(v), lab) for v, lab in zip(df[axis], labels, strict=True)]


def plain_text(value: object) -> str:
    """A table cell for an axis value: ``1e-05``, ``student``, ``—`` when missing."""
    if isinstance(value, float):
        return "—" if _isnan(value) else f"{value:g}"
    return str(value)


def with_labels(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` with reader-facing ``_rollout``, ``_lam``, ``_kl`` and ``_lr`` columns.

    A label column that is already present is kept when its source columns are not.
    """
    out = df.copy()

    def col(name: str) -> list[object]:
        return list(out[name]) if name in out.columns else [None] * len(out)

    policy, lam, kind, reg, topk = (
        col("rollout.policy"),
        col("rollout.lam"),
        col("objective.kind"),
        col("objective.regulation"),
        col("objective.teacher_topk"),
    )
    lr, lr_lab = col("optim.lr"), col(labelled_axes(out.columns).get("optim.lr", ""))
    if "rollout.policy" in out.columns or "_rollout" not in out.columns:
        out["_rollout"] = [rollout_label(p, x) for p, x in zip(policy, lam, strict=True)]
        out["_lam"] = [effective_lam(p, x) for p, x in zip(policy, lam, strict=True)]
    if "objective.kind" in out.columns or "_kl" not in out.columns:
        out["_kl"] = [objective_label(*x) for x in zip(kind, reg, topk, strict=True)]
    if "optim.lr" in out.columns or "_lr" not in out.columns:
        out["_lr"] = [lr_text(x, lab) for x, lab in zip(lr, lr_lab, strict=True)]
    return out


def fmt_mean_sem(mean: float, sem: float, scale: float = 1.0, digits: int = 1) -> str:
    """``72.3 ± 1.2`` (SEM), ``72.3`` when n = 1, ``—`` when not measured."""
    if mean is None or _isnan(mean):
        return "—"
    text = f"{mean * scale:.{digits}f}"
    if sem is not None and not _isnan(sem):
        text += f" ± {sem * scale:.{digits}f}"
    return text


def _isnan(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False
