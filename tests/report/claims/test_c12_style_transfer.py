"""Claim 12 ("OnPD + reverse KL resists the teacher's style"): control and adversarial tables."""

from __future__ import annotations

import pandas as pd

SHARE = "eval/teacher_style_share"


def _style(tb, shares: dict, experiment: str = "style") -> pd.DataFrame:
    cells = {(p, k, tb.LOW): {SHARE: v} for (p, k), v in shares.items()}
    rows = tb.cells_table(cells, experiment, **{"task.teacher_style_flag": True})
    return pd.DataFrame(tb.cells_table(tb.main_cells()) + rows + tb.baseline())


PUBLISHED = {("student", "reverse_kl"): 0.10, ("student", "forward_kl"): 0.70,
             ("teacher", "reverse_kl"): 0.70, ("teacher", "forward_kl"): 0.70}  # fmt: skip


def test_the_published_picture_is_supported(tb):
    assert tb.judge(_style(tb, PUBLISHED), 12).verdict == "supported"


def test_a_second_configuration_that_also_resists_contradicts(tb):
    shares = {**PUBLISHED, ("teacher", "reverse_kl"): 0.12}
    r = tb.judge(_style(tb, shares), 12)
    assert r.verdict == "contradicted" and "policy=teacher, kind=reverse_kl" in r.evidence


def test_style_runs_only_in_another_experiment_are_not_read(tb):
    r = tb.judge(_style(tb, PUBLISHED, experiment="main_style_copy"), 12)
    assert r.verdict == "not tested"
