"""Update sparsity at its threshold: S_τ counts |Δ| < τ as unchanged, so a change of exactly τ
is a change (docs/method.md §8), in the fp32 view and in the bf16 view alike.

Every value below is exactly representable, so "exactly at", "just below" and "just above"
mean what they say: τ and the changes are powers of two, or one float32 step from them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from distillscope.eval.measures import update_sparsity


def _f32_after(x: float) -> float:
    return float(np.nextafter(np.float32(x), np.float32(math.inf)))


def _f32_before(x: float) -> float:
    return float(np.nextafter(np.float32(x), np.float32(0)))


def _moved(base: float, deltas: list[float], dtype=torch.float32):
    """(initial, final) state dicts of one tensor at ``base`` moved by ``deltas``."""
    init = torch.full((len(deltas),), base, dtype=dtype)
    final = init + torch.tensor(deltas, dtype=dtype)
    return {"w": init}, {"w": final}


@pytest.mark.parametrize("tau", [2.0**-20, 2.0**-27, 2.0**-10])
def test_fp32_a_change_of_exactly_tau_counts_as_changed(tau):
    init, final = _moved(0.0, [tau])
    assert final["w"].item() - init["w"].item() == tau  # exact
    assert update_sparsity(init, final, tau) == 0.0
    assert update_sparsity(init, final, _f32_after(tau)) == 1.0  # τ a hair above the change
    assert update_sparsity(init, final, _f32_before(tau)) == 0.0


@pytest.mark.parametrize("tau", [2.0**-20, 2.0**-10])
def test_fp32_changes_just_below_at_and_just_above_tau(tau):
    below, above = _f32_before(tau), _f32_after(tau)
    init, final = _moved(0.0, [below, -below, tau, -tau, above, -above, 0.0, 0.0])
    # unchanged: the two just below and the two zeros; a change of ±τ or more is a change
    assert update_sparsity(init, final, tau) == 4 / 8


def test_fp32_boundary_on_a_nonzero_weight():
    # 1 + 2⁻²⁰ − 1 is exactly 2⁻²⁰ in float32 (1's ulp is 2⁻²³)
    init, final = _moved(1.0, [2.0**-20, 2.0**-21, 2.0**-19])
    assert update_sparsity(init, final, 2.0**-20) == 1 / 3  # only the 2⁻²¹ move is below


def test_the_default_tau_is_a_strict_bound():
    tau = float(np.float32(1e-6))  # the default τ as float32 holds it
    init, final = _moved(0.0, [tau, _f32_before(tau), _f32_after(tau)])
    assert update_sparsity(init, final) == 1 / 3


def test_bf16_a_change_of_exactly_tau_counts_as_changed():
    # bf16 keeps 8 significant bits: around 1.0 it holds 1 ± k·2⁻⁷ above, 1 − k·2⁻⁸ below
    tau = 2.0**-7
    init, final = _moved(1.0, [tau, -(2.0**-8), 2.0**-6])  # at τ, below, above (exact in bf16)
    view = torch.bfloat16
    assert update_sparsity(init, final, tau, dtype=view) == 1 / 3  # only the 2⁻⁸ move is below
    assert update_sparsity(init, final, _f32_after(tau), dtype=view) == 2 / 3
    assert update_sparsity(init, final, _f32_before(tau), dtype=view) == 1 / 3


def test_bf16_view_rounds_before_comparing():
    # fp32 moves below half a bf16 step at 1.0 vanish in the bf16 view, at any τ > 0
    init, final = _moved(1.0, [2.0**-9, 2.0**-10, 2.0**-7])
    view = torch.bfloat16
    assert update_sparsity(init, final, 2.0**-7, dtype=view) == 2 / 3  # 2⁻⁷ is at τ: changed
    assert update_sparsity(init, final, _f32_before(2.0**-7), dtype=view) == 2 / 3
    assert update_sparsity(init, final, 2.0**-30, dtype=view) == 2 / 3
    assert update_sparsity(init, final, 2.0**-30) == 0.0  # fp32 sees all three


def test_bf16_changes_just_below_at_and_just_above_tau():
    # in bf16 at 1.0 the representable moves are multiples of 2⁻⁷ (2⁻⁸ below 1.0)
    tau = 2.0**-6
    init, final = _moved(1.0, [2.0**-7, 2.0**-6, 3 * 2.0**-7])
    view = torch.bfloat16
    assert update_sparsity(init, final, tau, dtype=view) == 1 / 3  # below; at; above
