"""What a study studied, in words (docs/method.md §9 "Scope"): the report's summary opens with
it, before any verdict, and the verdict words name it ("not reproduced with testbed:student
(0.86M) on tb-countdown3").

Read from the store only — the results table and study.yaml, no model is loaded: each run's
evaluation records ``model/student_params`` and ``model/teacher_params`` (from the models'
safetensors headers); a record written before that shows "parameters not recorded".

    s = study_scope(load_study(root))
    s.lines()     # [("Student", "testbed:student (0.86M parameters)"), ("Teachers", …), …]
    s.phrase()    # "with testbed:student (0.86M) on tb-countdown3"
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from distillscope.config.model import (
    ModelConfig,
    served_url,
    teacher_specs_of,
    teachers_text_of,
)
from distillscope.config.paths import typed_text
from distillscope.results.aggregate import SEED, is_axis
from distillscope.results.reader import Study

NOT_RECORDED = "parameters not recorded"
STEPS = "train/steps_done"
SERVED = "served"
TEACHER, TEACHERS = "model.teacher", "model.teachers"


def params_text(n: float) -> str:
    """``0.86M``, ``1.5B``, ``35K`` (3 significant digits at most; M from 0.1M); "" for NaN."""
    if not isinstance(n, (int, float)) or not math.isfinite(n) or n <= 0:
        return ""
    for floor, size, unit in ((1e9, 1e9, "B"), (1e5, 1e6, "M")):
        if n >= floor:
            return f"{n / size:.3g}{unit}"
    return f"{n / 1e3:.3g}K"


@dataclass(frozen=True)
class Model:
    """A model of the study: its name (as the study file typed it) and parameter count (NaN:
    unknown); a served teacher (a URL) has no count to read."""

    name: str
    params: float = math.nan
    served: bool = False

    def text(self, long: bool = True) -> str:
        """``testbed:student (0.86M parameters)`` (``long``) or ``testbed:student (0.86M)``;
        ``large=http://host/v1 (served)``."""
        if self.served:
            return f"{self.name} ({SERVED})"
        p = params_text(self.params)
        if not p:
            return f"{self.name} ({NOT_RECORDED})" if long else self.name
        return f"{self.name} ({p} parameters)" if long else f"{self.name} ({p})"


@dataclass(frozen=True)
class Scope:
    """The models, tasks and scale of one study."""

    students: tuple[Model, ...]
    teachers: tuple[Model, ...]
    tasks: tuple[str, ...]  # dataset identities (``task.dataset``)
    transfer: tuple[str, ...]  # harder variants evaluated
    steps: str  # "150 per run" / "150 per run (1 in 3 runs)"
    seeds: str  # "3 per configuration (42–44); 20 in `diversity`"
    runs: str  # "333 runs (333 finished) and 26 evaluations of the untrained student"

    def lines(self) -> list[tuple[str, str]]:
        """(label, text) pairs, the order the summary shows them."""
        out = [
            ("Student" + ("s" if len(self.students) > 1 else ""), _join(self.students)),
            ("Teacher" + ("s" if len(self.teachers) > 1 else ""), _join(self.teachers)),
            ("Task" + ("s" if len(self.tasks) > 1 else ""), ", ".join(self.tasks) or "—"),
        ]
        if self.transfer:
            out.append(("Harder variant", ", ".join(self.transfer)))
        out += [("Steps", self.steps), ("Seeds", self.seeds), ("Runs", self.runs)]
        return out

    def phrase(self) -> str:
        """``with testbed:student (0.86M) on tb-countdown3``: what every verdict is about."""
        students = ", ".join(m.text(long=False) for m in self.students) or "the student"
        return f"with {students} on {', '.join(self.tasks) or 'its task'}"

    def models_text(self) -> str:
        """``testbed:student (0.86M) distilled from testbed:teacher (1.93M) on tb-countdown3``."""
        teachers = ", ".join(m.text(long=False) for m in self.teachers) or "its teacher"
        return (
            f"{_join(self.students, long=False)} distilled from {teachers} on "
            f"{', '.join(self.tasks) or 'its task'}"
        )

    def sentence(self) -> str:
        """The scope as one sentence (the summary's opening)."""
        return (
            f"What was studied: {self.models_text()}; {self.steps}; seeds {self.seeds}; "
            f"{self.runs}. Every verdict below is about this setting, not about the papers' "
            "models and tasks."
        )


def _join(models: Iterable[Model], long: bool = True) -> str:
    return ", ".join(m.text(long) for m in models) or "—"


def _spec_model(spec: dict[str, Any], key: str) -> str | None:
    base = spec.get("base") if isinstance(spec, dict) else None
    model = base.get("model") if isinstance(base, dict) else None
    value = model.get(key) if isinstance(model, dict) else None
    return str(value) if value else None


def _models(rows: pd.DataFrame, spec: dict, key: str, params: str) -> tuple[Model, ...]:
    """The distinct ``model.<key>`` of ``rows`` (else study.yaml's base, else the default),
    each with the largest parameter count its rows recorded."""
    col = f"model.{key}"
    if col in rows.columns and rows[col].notna().any():
        names = rows[col].map(lambda v: str(v) if pd.notna(v) else None)
    else:
        default = _spec_model(spec, key) or str(ModelConfig.model_fields[key].default)
        names = pd.Series(default, index=rows.index)
    counts = _numbers(rows, params)
    out = []
    for name in dict.fromkeys(n for n in names if n):
        out.append(Model(shown(spec, name), _largest(counts[names == name])))
    return tuple(out)


def _numbers(rows: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(rows.get(column, pd.Series(math.nan, index=rows.index)), "coerce")


def _largest(counts: pd.Series) -> float:
    counts = counts.dropna()
    return float(counts.max()) if len(counts) else math.nan


def row_teachers(row: pd.Series | dict, spec: dict) -> dict[str, str]:
    """A results row's teachers, name → value, through the one description of a run's
    teachers (:func:`~distillscope.config.model.teacher_specs_of`): its routed
    ``model.teachers`` (JSON text in the table), else its ``model.teacher`` (else study.yaml's
    base, else the default)."""
    routed = row.get(TEACHERS)
    if _routed_value(routed):
        return teacher_specs_of("", json.loads(str(routed)))
    teacher = row.get(TEACHER)
    if teacher is None or (isinstance(teacher, float) and math.isnan(teacher)):  # old tables
        teacher = _spec_model(spec, "teacher") or str(ModelConfig.model_fields["teacher"].default)
    return teacher_specs_of(str(teacher), None)


def is_routed(rows: pd.DataFrame) -> pd.Series:
    """Which rows ran routed teachers (``model.teachers`` set)."""
    if TEACHERS not in rows.columns:
        return pd.Series(False, index=rows.index)
    return rows[TEACHERS].map(_routed_value).astype(bool)


def _teachers(runs: pd.DataFrame, spec: dict) -> tuple[Model, ...]:
    """Every teacher of ``runs`` (:func:`row_teachers`), each with the largest parameter count
    its rows recorded: ``model/teacher_params`` for a run's one teacher, ``teacher/<name>/params``
    for a routed one (``name=value`` in the scope); a served one is named, not counted."""
    found: dict[tuple[str, str], list[float]] = {}
    for _, row in runs.iterrows():
        routed = _routed_value(row.get(TEACHERS))
        for name, value in row_teachers(row, spec).items():
            column = f"teacher/{name}/params" if routed else "model/teacher_params"
            label = f"{name}={value}" if routed else value
            found.setdefault((label, value), []).append(_number(row.get(column)))
    return tuple(
        Model(shown(spec, label), _largest(pd.Series(counts, dtype=float)), served_url(value))
        for (label, value), counts in found.items()
    )


def _routed_value(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def shown(spec: dict, text: str) -> str:
    """``text`` with each path in it as the study file typed it (study.yaml's
    ``typed_paths``), not as the machine that ran it resolved it."""
    typed = spec.get("typed_paths") if isinstance(spec, dict) else None
    return typed_text(text, typed) if isinstance(typed, dict) else text


def shown_frame(frame: pd.DataFrame, spec: dict) -> pd.DataFrame:
    """``frame`` as a table shows its runs: a routed run's ``model.teacher`` (an unused
    default) replaced by its teachers, ``name=value, …`` (:func:`row_teachers`), and the
    ``model.teachers`` column dropped; then every text cell of its axis columns :func:`shown`
    (a table's rows and headers name a run's task file or teacher as the study file typed it)."""
    routed = is_routed(frame)
    if routed.any() and TEACHER in frame.columns:
        text = [
            teachers_text_of("", row_teachers(row, spec)) if r else row[TEACHER]
            for r, (_, row) in zip(routed, frame.iterrows(), strict=True)
        ]
        frame = frame.assign(**{TEACHER: text})
    frame = frame.drop(columns=[TEACHERS], errors="ignore")
    typed = spec.get("typed_paths") if isinstance(spec, dict) else None
    if not typed or frame.empty:
        return frame
    text = {
        c: frame[c].map(lambda v: shown(spec, v) if isinstance(v, str) else v)
        for c in frame.columns
        if is_axis(c) and not pd.api.types.is_numeric_dtype(frame[c])
    }
    return frame.assign(**text)


def shown_frames(study: Study) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The study's finished runs and its baselines, :func:`shown_frame` (what its tables
    read)."""
    return shown_frame(study.finished, study.spec), shown_frame(study.baselines, study.spec)


def _steps(runs: pd.DataFrame) -> str:
    """``150 optimisation steps per run (60 in `rlvr`; 1 in `untrained`)``."""
    steps = pd.to_numeric(runs.get(STEPS, pd.Series(dtype=float)), errors="coerce").dropna()
    if steps.empty:
        return "steps not recorded"
    steps = steps.astype(int)
    main = int(steps.value_counts().index[0])
    where = runs.loc[steps.index, "experiment"].map(str) if "experiment" in runs else None
    rest = []
    for s in dict.fromkeys(v for v in steps if v != main):
        names = sorted(set(where[steps == s])) if where is not None else []
        rest.append(f"{s} in " + (", ".join(f"`{n}`" for n in names) or "some runs"))
    return f"{main} optimisation steps per run" + (f" ({'; '.join(rest)})" if rest else "")


def _seeds(runs: pd.DataFrame) -> str:
    if SEED not in runs.columns or runs[SEED].dropna().empty:
        return "not recorded"
    seeds = runs[SEED].dropna().map(str)
    per = seeds.groupby(runs["experiment"].map(str)).nunique() if "experiment" in runs else None
    text = f"{seeds.nunique()} distinct"
    if per is not None and len(per):
        common = int(per.mode().iloc[0])
        others = [f"{n} in `{e}`" for e, n in per.items() if n != common]
        text = f"{common} per experiment" + (f" ({', '.join(others)})" if others else "")
    return text


def study_scope(study: Study) -> Scope:
    """The ``Scope`` of ``study`` from its results table and study.yaml."""
    runs, base = study.results, study.baselines
    every = pd.concat([runs, base], ignore_index=True) if not base.empty else runs
    tasks = _distinct(every, "task.dataset") or _distinct(every, "task.name")
    transfer = tuple(t for t in _distinct(every, "measures.transfer") if t != "none")
    finished = len(study.finished) if "status" in runs.columns else 0
    text = f"{len(runs)} runs ({finished} finished)"
    if not base.empty:
        plural = "s" if len(base) > 1 else ""
        text += f" and {len(base)} evaluation{plural} of the untrained student"
    trained = runs[runs[STEPS].notna()] if STEPS in runs.columns else runs
    return Scope(
        _models(every, study.spec, "student", "model/student_params"),
        _teachers(runs, study.spec),
        tuple(shown(study.spec, t) for t in tasks),
        transfer,
        _steps(trained),
        _seeds(runs),
        text,
    )


def _distinct(rows: pd.DataFrame, column: str) -> tuple[str, ...]:
    if column not in rows.columns:
        return ()
    return tuple(dict.fromkeys(str(v) for v in rows[column] if pd.notna(v) and str(v)))
