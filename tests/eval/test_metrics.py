from math import comb

import pytest
import torch

from distillscope.eval.measures import pass_at_k, pass_at_k_curve, update_sparsity


@pytest.mark.parametrize("n", [1, 2, 5, 10, 64])
def test_pass_at_k_matches_closed_form(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            expected = 1.0 - comb(n - c, k) / comb(n, k)
            assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_edges_and_errors():
    assert pass_at_k(10, 0, 10) == 0.0
    assert pass_at_k(10, 1, 10) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        pass_at_k(5, 6, 1)
    with pytest.raises(ValueError):
        pass_at_k(5, 1, 6)


def test_pass_at_k_curve_means_over_items():
    curve = pass_at_k_curve([0, 10, 5], n=10, ks=[1, 10, 20])
    assert curve[1] == pytest.approx((0 + 1 + 0.5) / 3)
    assert curve[10] == pytest.approx(2 / 3)
    assert 20 not in curve


def test_update_sparsity_counts_small_changes():
    init = {"a": torch.zeros(10), "b": torch.zeros(2, 5)}
    final = {"a": torch.zeros(10), "b": torch.zeros(2, 5)}
    final["a"][:3] = 1e-3
    final["b"][0, 0] = 5e-7  # below τ = 1e-6
    assert update_sparsity(init, final) == pytest.approx(17 / 20)
    assert update_sparsity(init, final, tau=1e-8) == pytest.approx(16 / 20)


def test_update_sparsity_counts_tied_weights_once():
    emb = torch.zeros(4, 3)
    init = {"embed": emb.clone(), "head": emb.clone(), "bias": torch.zeros(3)}
    tied = torch.zeros(4, 3)
    tied[0] = 1.0
    final = {"embed": tied, "head": tied, "bias": torch.zeros(3)}
    # 12 tied entries counted once: 3 moved out of 12 + 3.
    assert update_sparsity(init, final) == pytest.approx(12 / 15)


def test_update_sparsity_bf16_view_hides_tiny_moves():
    init = {"w": torch.ones(100)}
    final = {"w": torch.ones(100) + 1e-4}  # below bf16 resolution at 1.0
    assert update_sparsity(init, final) == 0.0
    assert update_sparsity(init, final, dtype=torch.bfloat16) == 1.0
