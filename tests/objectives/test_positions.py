"""Completion positions and their bins against hand-computed cases."""

import math

import pytest
import torch

from distillscope.objectives.positions import bin_edges, binned_means, completion_positions


def test_positions_count_completion_tokens_only():
    mask = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]])
    assert completion_positions(mask).tolist() == [[-1, -1, 0, 1, 2], [-1, 0, 1, -1, -1]]


def test_edges_cover_every_position_once():
    assert bin_edges(10, 4) == [0, 2, 5, 8, 10]  # round(2.5) = 2, round(7.5) = 8
    assert bin_edges(3, 8) == [0, 1, 2, 3]  # fewer positions than bins
    with pytest.raises(ValueError, match="n_bins"):
        bin_edges(5, 0)


def test_binned_means_by_hand():
    mask = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    values = torch.tensor([[9.0, 1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 9.0, 9.0, 9.0]])
    bins = binned_means(values, mask, [0, 2, 4, 6])
    assert [(b.start, b.stop, b.count) for b in bins] == [(0, 2, 4), (2, 4, 2), (4, 6, 0)]
    assert bins[0].mean == pytest.approx((1 + 2 + 5 + 6) / 4)
    assert bins[1].mean == pytest.approx((3 + 4) / 2)
    assert math.isnan(bins[2].mean)


def test_binned_means_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="mask_B_T"):
        binned_means(torch.zeros(2, 3), torch.ones(2, 4), [0, 3])
