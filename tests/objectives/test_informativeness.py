"""Informativeness I (docs/method.md §4): the within-group Pearson correlation of a rollout's
mean advantage and its reward, against scipy on centred data, on a planted correlation, and
with the groups that carry no information left out."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from distillscope.objectives.informativeness import informativeness, mean_advantage


def _centred(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    out = values.astype(float).copy()
    for g in np.unique(groups):
        out[groups == g] -= out[groups == g].mean()
    return out


def test_matches_pearsonr_of_the_within_group_centred_values():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(6), 5)
    reward = rng.integers(0, 2, len(groups)).astype(float)
    reward[::5], reward[1::5] = 1.0, 0.0  # every group has both outcomes
    adv = rng.normal(size=len(groups)) + 0.8 * reward + rng.normal(size=6).repeat(5) * 3
    value, used = informativeness(adv, reward, groups)
    expected = stats.pearsonr(_centred(adv, groups), _centred(reward, groups)).statistic
    assert used == 6
    assert value == pytest.approx(expected, abs=1e-12)


def test_groups_without_both_outcomes_are_left_out():
    adv = [0.3, -0.2, 0.9, 1.5, -4.0, -5.0, 2.0, 0.0, 7.0]
    reward = [1, 0, 1, 1, 1, 1, 0, 0, 0]  # group 0 mixed; groups 1 and 2 all right / all wrong
    groups = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    value, used = informativeness(adv, reward, groups)
    first = stats.pearsonr(_centred(np.array(adv[:3]), np.zeros(3)), [1 / 3, -2 / 3, 1 / 3])
    assert used == 1
    assert value == pytest.approx(first.statistic, abs=1e-12)
    # one rollout per prompt: no group has two rollouts
    assert informativeness([0.1, 0.2], [1, 0], [0, 1])[1] == 0


def test_no_qualifying_group_or_no_spread_is_nan():
    value, used = informativeness([0.1, 0.2, 0.3], [1, 1, 1], [0, 0, 0])
    assert math.isnan(value) and used == 0
    value, used = informativeness([], [], [])
    assert math.isnan(value) and used == 0
    value, used = informativeness([0.5, 0.5, 1.0, 1.0], [1, 0, 0, 1], [0, 0, 1, 1])
    assert math.isnan(value) and used == 2  # every Ā equals its group's mean


def test_a_planted_correlation_is_recovered_and_prompt_offsets_cancel():
    """Ā = ρ·z(R) + noise within each group, plus a large per-prompt offset that falls with the
    group's success rate (the teacher is harsher on easy prompts): pooled without centring,
    the offsets turn the correlation negative; centred, I recovers the planted one."""
    rng = np.random.default_rng(1)
    g, n = 400, 8
    groups = np.repeat(np.arange(g), n)
    p = rng.uniform(0.2, 0.8, g).repeat(n)
    reward = (rng.uniform(size=g * n) < p).astype(float)
    rc = _centred(reward, groups)
    target = 0.5
    noise = rng.normal(size=g * n)
    adv = target / math.sqrt(1 - target**2) * rc / rc.std() + noise - 10.0 * p
    value, used = informativeness(adv, reward, groups)
    assert used == sum(0 < reward[groups == k].sum() < n for k in range(g))
    assert value == pytest.approx(target, abs=0.04)
    raw = stats.pearsonr(adv, reward).statistic
    assert raw < 0  # what the prompt offsets do to the uncentred correlation


def test_reward_above_zero_counts_as_correct():
    adv, groups = [1.0, 0.0, 2.0, -1.0], [0, 0, 1, 1]
    graded = informativeness(adv, [0.5, 0.0, 0.2, 0.0], groups)
    binary = informativeness(adv, [1, 0, 1, 0], groups)
    assert graded == binary and graded[1] == 2 and graded[0] == pytest.approx(2 / math.sqrt(5))


def test_rows_with_a_nan_advantage_are_ignored_and_lengths_checked():
    value, used = informativeness([1.0, 0.0, math.nan], [1, 0, 1], [0, 0, 0])
    assert used == 1 and value == pytest.approx(1.0)
    with pytest.raises(ValueError, match="3 advantages, 2 rewards"):
        informativeness([1.0, 0.0, 0.5], [1, 0], [0, 0, 0])


def test_mean_advantage_is_the_masked_token_mean_of_the_log_ratio():
    teacher = torch.tensor([[-1.0, -2.0, -9.0], [-0.5, -0.5, -0.5]])
    student = torch.tensor([[-2.0, -2.0, -1.0], [-1.0, -1.5, -0.5]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    got = mean_advantage(teacher, student, mask)
    assert got.dtype == torch.float64
    assert got.tolist() == pytest.approx([0.5, 0.5])
    assert math.isnan(float(mean_advantage(teacher, student, torch.zeros(2, 3))[0]))
