"""Calibration of claims 18 and 22 on the paper preset's `teacher_scale` design: the teachers'
sizes stay as the study recorded them (a design column), the null tables give no false
verdict beyond the 5% target, and the planted picture of [D] (the larger teacher mismatched:
lower I, smaller gain) is found."""

from __future__ import annotations

import math

from distillscope.scorecard.calibrate import DESIGN_METRICS, calibrate, planned_table, simulate
from distillscope.scorecard.claims.c21_22_regulation import SIZE as TEACHER_PARAMS
from distillscope.study.spec import expand, load_spec
from distillscope.study.table import plan_row

STUDENT_PARAMS = "model/student_params"
SIZES = {"testbed:teacher": 1_929_024, "testbed:teacher-small": 1_341_280}


def _design():
    runs = [r for r in expand(load_spec("paper")) if r.experiment == "teacher_scale"]
    rows = [{**plan_row(r), TEACHER_PARAMS: SIZES[r.config.model.teacher]} for r in runs]
    return planned_table(rows)


def test_teacher_sizes_are_design_not_simulated():
    assert TEACHER_PARAMS in DESIGN_METRICS
    df = _design()
    for scenario in ("null", "zeros", "planted"):
        table = simulate(df, scenario, seed=3)
        runs = table[table["experiment"] == "teacher_scale"]
        assert (runs[TEACHER_PARAMS] == runs["model.teacher"].map(SIZES)).all(), scenario


def test_student_sizes_are_design_not_simulated():
    """Claim 28 reads each run's student size: a simulated table keeps it as measured."""
    df = _design()
    df[STUDENT_PARAMS] = [1_000 + 10 * i for i in range(len(df))]
    for scenario in ("null", "zeros", "planted"):
        table = simulate(df, scenario, seed=3)
        assert table[STUDENT_PARAMS].tolist() == df[STUDENT_PARAMS].tolist(), scenario


#: The 5% false-rate target, plus two binomial SEs of a rate measured on ``DRAWS`` tables: a
#: rule at its nominal 5% (claim 22's null is at its one-sided α) passes this 97.7% of the time.
DRAWS = 10
TARGET = 0.05 + 2 * math.sqrt(0.05 * 0.95 / DRAWS)


def test_claims_18_and_22_meet_the_targets_on_the_teacher_scale_design():
    cal = calibrate(_design(), draws=DRAWS, seed=0, claims=(18, 22))
    assert cal["false_rate"]["18"] <= TARGET and cal["false_rate"]["22"] <= TARGET, cal["rates"]
    assert cal["power"]["18"] >= 0.8 and cal["power"]["22"] >= 0.8, cal["rates"]["planted"]
