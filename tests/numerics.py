"""Tolerances derived from floating-point numerics, for tests that compare two computations of
one quantity carried out in different orders: a batched forward against one row's, another
thread count, another CPU's SIMD kernels (AVX2, AVX-512, AMX block their sums differently).

A sum of ``n`` terms, each rounded to a relative error ``u`` (half an ulp at 1: 2^-24 in fp32),
changes under reordering by at most ``n·u·Σ|terms|`` and typically by ``√n·u·Σ|terms|`` (the
errors add as a random walk; Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
§2.8 and §4.2). The bounds here take the typical growth with a factor of 4 of headroom, so that
they hold on any machine of this kind while staying orders of magnitude below a real mistake
(an off-by-one position or a wrong temperature moves a log-prob by ~0.1 or more).
"""

from __future__ import annotations

import math

import torch

#: Unit roundoff of each dtype: half the gap between 1 and the next number.
UNIT_ROUNDOFF = {
    dtype: float(torch.finfo(dtype).eps) / 2
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16)
}
#: Headroom over the typical (√n) error growth.
HEADROOM = 4.0


def reorder_tol(magnitude: float, terms: int, dtype: torch.dtype = torch.float32) -> float:
    """Absolute tolerance for a value of size ``magnitude`` that two computations reach through
    sums of ``terms`` terms in different orders: ``HEADROOM · √terms · u · magnitude``."""
    return HEADROOM * math.sqrt(max(1, terms)) * UNIT_ROUNDOFF[dtype] * magnitude


def forward_logprob_tol(logits: torch.Tensor, temperature: float, config) -> float:
    """Absolute tolerance for fp32 log-probs ``log_softmax(z / T)`` of one model's forward,
    computed twice with different reduction orders (batched vs one row, other kernels).

    Each layer's longest reduction is its MLP's (``intermediate_size`` terms); the errors of the
    ``num_hidden_layers`` layers add, so ``terms = layers · intermediate_size``. A log-prob
    ``z_y/T − logsumexp(z/T)`` carries the error of a logit and of the log-partition, each of
    the size of the largest scaled logit: ``2 · reorder_tol(max|z|/T, terms)``.
    """
    terms = config.num_hidden_layers * config.intermediate_size
    return 2 * reorder_tol(float(logits.abs().max()) / temperature, terms)


def logprob_tol(logp: torch.Tensor, config) -> float:
    """:func:`forward_logprob_tol` when only the log-probs are at hand: a log-prob is the gap
    ``logsumexp(z/T) − z_y/T`` between two terms of at least its own size, so ``max|log p|``
    (at least 1: the terms of a near-certain token are of order 1 too) stands for the largest
    scaled logit."""
    terms = config.num_hidden_layers * config.intermediate_size
    return 2 * reorder_tol(max(1.0, float(logp.abs().max())), terms)


def logit_tol(logits: torch.Tensor, config) -> float:
    """Absolute tolerance for fp32 logits of one model's forward computed in two reduction
    orders (another decoder, another attention kernel): ``reorder_tol(max|z|, layers · MLP)``,
    the scale at least 1."""
    terms = config.num_hidden_layers * config.intermediate_size
    return reorder_tol(max(1.0, float(logits.abs().max())), terms)
