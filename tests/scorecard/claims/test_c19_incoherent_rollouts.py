"""Claim 19's early entropy ratio: student ÷ teacher entropy over the first 10% of steps."""

import math

import pandas as pd
import pytest

from distillscope.scorecard.claims.c19_incoherent_rollouts import early_entropy_ratio


def test_the_ratio_reads_the_first_tenth_of_the_steps():
    frame = pd.DataFrame(
        {
            "step": range(20),
            "objective/student_entropy": [4.0, 2.0] + [1.0] * 18,
            "objective/teacher_entropy": [1.0] * 20,
        }
    )
    assert early_entropy_ratio(frame) == pytest.approx(3.0)  # steps 0-1 of 20
    assert math.isnan(early_entropy_ratio(frame.drop(columns="objective/teacher_entropy")))
