"""Claim 12 ("OnPD + reverse KL resists the teacher's style"): control and adversarial tables."""

from __future__ import annotations

import pandas as pd

SHARE = "eval/teacher_style_share"


SUPPORT = "eval/style_share_t1"


def _style(tb, shares: dict, experiment: str = "style", support=(0.3, 0.32, 0.28)):
    """Style runs, the main grid and the baseline; ``support``: the untrained student's style
    share at T = 1 per seed (None: not measured, as in records before it was)."""
    cells = {(p, k, tb.LOW): {SHARE: v} for (p, k), v in shares.items()}
    rows = tb.cells_table(cells, experiment, **{"task.teacher_style_flag": True})
    base = tb.baseline()
    for r, value in zip(base, support or (), strict=False):
        r[SUPPORT] = value
    return pd.DataFrame(tb.cells_table(tb.main_cells()) + rows + base)


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


def test_a_style_outside_the_untrained_student_s_support_is_not_applicable(tb):
    # the paper record's regime: OffPD + reverse KL "resists" too, as the student never writes
    # the style (0 of 3200 answers at T = 1 per seed): neither supported nor contradicted
    shares = {**PUBLISHED, ("teacher", "reverse_kl"): 0.0, ("student", "reverse_kl"): 0.0}
    r = tb.judge(_style(tb, shares, support=(0.0, 0.0, 0.0)), 12)
    assert r.verdict == "not applicable"
    assert r.reason.startswith("the teacher's style in the untrained student's support")
    assert "(share at T = 1): 0.0% in every seed" in r.reason and "> 1 %" in r.reason


def test_a_record_without_the_support_measurement_is_not_tested_by_name(tb):
    shares = {**PUBLISHED, ("teacher", "reverse_kl"): 0.12}  # would contradict
    r = tb.judge(_style(tb, shares, support=None), 12)
    assert r.verdict == "not tested" and f"lacks {SUPPORT} of the untrained student" in r.reason
