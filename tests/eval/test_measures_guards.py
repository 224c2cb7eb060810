"""pass@k and update sparsity refuse what they cannot measure, naming it, and the bf16 view casts
both states before comparing."""

from __future__ import annotations

import pytest
import torch

from distillscope.eval.measures import pass_at_k, update_sparsity


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_names_the_impossible_counts(n, c, k):
    with pytest.raises(
        ValueError, match=rf"needs 0 ≤ c ≤ n and 1 ≤ k ≤ n, got n={n}, c={c}, k={k}"
    ):
        pass_at_k(n, c, k)


def test_update_sparsity_names_the_missing_and_the_reshaped_tensor():
    init = {"a": torch.zeros(2)}
    with pytest.raises(ValueError, match=r"^update_sparsity: initial state lacks 'b'$"):
        update_sparsity(init, {"a": torch.zeros(2), "b": torch.zeros(2)})
    with pytest.raises(ValueError, match=r"^update_sparsity: shape of 'a' changed$"):
        update_sparsity(init, {"a": torch.zeros(3)})


def test_an_empty_state_is_fully_sparse():
    assert update_sparsity({}, {}) == 1.0
    assert update_sparsity({}, {}, dtype=torch.bfloat16) == 1.0


def test_the_bf16_view_casts_the_initial_state_too():
    # 1 + 2⁻⁹ is not a bf16 number (it rounds to 1.0): moving it to 1.0 is no move in bf16
    init = {"w": torch.full((4,), 1.0 + 2.0**-9)}
    final = {"w": torch.ones(4)}
    assert update_sparsity(init, final, 2.0**-12, dtype=torch.bfloat16) == 1.0
    assert update_sparsity(init, final, 2.0**-12) == 0.0
    # and a bf16 initial state against fp32 weights is compared in the view asked for
    assert update_sparsity({"w": torch.ones(4, dtype=torch.bfloat16)}, init, 2.0**-12) == 0.0
