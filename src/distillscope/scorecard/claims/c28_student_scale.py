"""Claim 28 ([D]): a stronger student favours the stronger teacher.

Reads only the `student_scale` experiment: two students (``model.student``, sized by
``model/student_params``) × two teachers (``model.teacher``, sized by
``model/teacher_params``). On the seed-blocked fit of accuracy with student × teacher cells,
the interaction contrast (larger teacher − smaller teacher | larger student) − (larger teacher
− smaller teacher | smaller student) above 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import ACC
from distillscope.scorecard.claim_spec import ABOVE, POOLED, Claim, Part, Quote
from distillscope.scorecard.estimate import Blocks, Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence, missing_metric

SCALE = "student_scale"
STUDENT, TEACHER = "model.student", "model.teacher"
SIZES = {STUDENT: "model/student_params", TEACHER: "model/teacher_params"}


def _order(rows: pd.DataFrame, col: str) -> tuple[str, str] | str:
    """(smaller, larger) value of ``col`` by its size column, or what is missing."""
    size = SIZES[col]
    if col not in rows.columns or rows[col].dropna().nunique() < 2:
        return f"two values of {col} in `{SCALE}`"
    if size not in rows.columns:
        return f"{size} of the `{SCALE}` runs"
    by = pd.to_numeric(rows[size], errors="coerce").groupby(rows[col].map(str)).median().dropna()
    if by.nunique() < 2:
        return f"{size} for two {col} values of different size"
    return str(by.idxmin()), str(by.idxmax())


def interaction(view: ClaimEvidence) -> list[Estimate]:
    """(large − small teacher | large student) − (large − small teacher | small student)."""
    rows = view.rows(SCALE)
    label = "Δ interaction"
    students, teachers = _order(rows, STUDENT), _order(rows, TEACHER)
    lack = next((x for x in (students, teachers) if isinstance(x, str)), "")
    lack = lack or missing_metric(rows, ACC, f"the `{SCALE}` runs")
    if lack:
        return [not_tested(label, lack)]
    b = Blocks(rows, ACC, [STUDENT, TEACHER])
    w = np.zeros(len(b.cells))
    for student, sign_s in zip(students, (-1.0, 1.0), strict=True):
        for teacher, sign_t in zip(teachers, (-1.0, 1.0), strict=True):
            m = b.mask(**{STUDENT: student, TEACHER: teacher})
            if not m.any():
                return [not_tested(label, f"runs of {student} with {teacher}")]
            w[m] = sign_s * sign_t
    return [b.contrast(w, label)]


CLAIMS = (
    Claim(
        id=28,
        title="A stronger student favours the stronger teacher.",
        quotes=(
            Quote(
                "001_836273fe8eeeb907.txt",
                63,
                "Quando a capacidade do estudante é aumentada (para Qwen3-1.7B "
                "pós-treinado), o desajuste de distribuição é reduzido, permitando que o "
                "professor 4B mais forte performe melhor.",
                "When the student's capacity is increased (to the post-trained "
                "Qwen3-1.7B), the distribution mismatch shrinks, letting the stronger 4B "
                "teacher do better.",
            ),
        ),
        experiments=(SCALE,),
        parts=(
            Part(
                "Δ interaction",
                f"accuracy on `{SCALE}`'s student × teacher cell + seed fit: (larger − smaller "
                "teacher for the larger student) − (the same for the smaller student)",
                interaction,
                POOLED,
                ABOVE,
                0.0,
                "'favours' is the sign of an interaction; [D] gives no size.",
                published=10.0,
                sized=False,
            ),
        ),
        needs=f"a `{SCALE}` experiment: two students (model.student, model/student_params) × "
        "two teachers (model.teacher, model/teacher_params) with eval/accuracy",
    ),
)
