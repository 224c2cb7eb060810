"""Reader-facing names, torch-free: what a table or figure calls a config value, and where a
study records the name it gave an axis value.

- :data:`ROLLOUT_NAMES`, :data:`OBJECTIVE_NAMES`, :data:`REGULATION_NAMES` name the values of
  ``rollout.policy``, ``objective.kind`` and ``objective.regulation``. ``ROLLOUT_NAMES`` is read
  from the policy registry (:mod:`distillscope.rollout.policy_registry`, each entry's ``label``),
  ``OBJECTIVE_NAMES`` from the objective registry (:mod:`distillscope.objectives.registry`,
  likewise).
- **Labelled axes.** A study axis given as a mapping (``optim.lr: {low: 1e-4, high: 1e-3}``)
  runs the values and records each run's label in the column :func:`label_column` names
  (``optim.lr`` → ``lr_label``). Any axis may be labelled; :func:`labelled_axes` finds the
  label columns of a table and the axes they label, so the report shows ``1e-04 (low)`` for any
  of them without knowing the axis in advance.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from distillscope.objectives.registry import OBJECTIVES
from distillscope.rollout.policy_registry import ROLLOUT_POLICIES, SPECTRUM_TEMPERATURES

ROLLOUT_NAMES = {name: kind.label for name, kind in ROLLOUT_POLICIES.items()}
OBJECTIVE_NAMES = {name: kind.label for name, kind in OBJECTIVES.items()}
REGULATION_NAMES = {
    "none": "unregulated",
    "hard_clip": "hard clip",
    "log_compress": "log compression",
}
#: what the report calls each value of ``rollout.spectrum_temperatures`` (the policy registry's)
SPECTRUM_TEMPERATURE_NAMES = dict(SPECTRUM_TEMPERATURES)

LABEL_SUFFIX = "_label"


def label_column(axis: str) -> str:
    """The column holding the labels of ``axis``: its last dotted part + ``_label``."""
    return axis.rsplit(".", 1)[-1] + LABEL_SUFFIX


def is_label_column(column: str) -> bool:
    """Whether ``column`` holds axis labels (``lr_label``, ``temperature_label`` …)."""
    return column.endswith(LABEL_SUFFIX) and len(column) > len(LABEL_SUFFIX)


def labelled_axes(columns: Iterable[str]) -> dict[str, str]:
    """``{axis: label column}`` for every label column among ``columns`` whose axis is there.

    An axis is the dotted column whose last part names the label column (``optim.lr`` for
    ``lr_label``); a label column with no such axis, or with several, labels nothing.
    """
    return dict(_labelled_axes(tuple(columns)))


@lru_cache(maxsize=256)  # the report asks once per cell and scorecard rule, for few column sets
def _labelled_axes(columns: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for col in columns:
        if not is_label_column(col):
            continue
        axes = [c for c in columns if "." in c and "/" not in c and label_column(c) == col]
        if len(axes) == 1:
            out[axes[0]] = col
    return tuple(out.items())
