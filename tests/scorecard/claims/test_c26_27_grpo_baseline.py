"""Claims 26–27: accuracy at 25% of the steps, read from either kind of run."""

import math

import pandas as pd
import pytest

from distillscope.scorecard.claims.c26_27_grpo_baseline import accuracy_at_quarter


def test_the_window_is_the_steps_in_20_to_30_percent():
    steps = pd.DataFrame({"step": range(40), "rollout/reward": [k / 100 for k in range(40)]})
    assert accuracy_at_quarter(steps) == pytest.approx(100 * sum(range(8, 12)) / 4 / 100)
    grpo = pd.DataFrame({"step": range(10), "rlvr/accuracy": [0.1 * k for k in range(10)]})
    assert accuracy_at_quarter(grpo) == pytest.approx(20.0)  # step 2 of 10
    assert math.isnan(accuracy_at_quarter(pd.DataFrame({"step": [0]})))
