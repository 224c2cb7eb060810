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


def scale(*tensors: torch.Tensor) -> float:
    """The largest magnitude among ``tensors``, at least 1: the size of the terms a rounding
    error is relative to (a value below 1 is still reached through terms of order 1)."""
    return max([1.0, *(float(t.detach().abs().max()) for t in tensors if t.numel())])


def log_softmax_tol(logits: torch.Tensor, temperature: float = 1.0) -> float:
    """Absolute tolerance of fp32 ``log_softmax(z / T)`` over the last dimension (V entries),
    against an exact reference or another reduction order: a log-prob ``z_y/T − logsumexp(z/T)``
    carries the rounding of a scaled logit and of the V-term log-partition, each of the size of
    the largest scaled logit: ``2 · reorder_tol(max|z|/T, V)``."""
    return 2 * reorder_tol(scale(logits) / temperature, logits.shape[-1])


def divergence_tol(
    student: torch.Tensor,
    teacher: torch.Tensor,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
) -> float:
    """Absolute tolerance of an fp32 per-position divergence ``Σ_v w_v · f(log p_v, log q_v)``
    (forward/reverse KL, JSD, their mixtures and entropies) of logits ``student``/``teacher``
    (``… × V``), and of its gradient in the logits (``p − q``-like, entries of size ≤ 1).

    The weights ``w`` are probabilities (Σ = 1, or 2 for a mixture's two halves: a factor 2), so
    each log-prob's error (:func:`log_softmax_tol`) reaches the value at most once per side; the
    V-term sum adds ``reorder_tol(max|log p − log q|, V)``. A token mean over N positions adds
    ``reorder_tol(value, N)`` (:func:`mean_tol`)."""
    errors = log_softmax_tol(student, student_temperature) + log_softmax_tol(
        teacher, teacher_temperature
    )
    logp = torch.log_softmax(student.detach().double() / student_temperature, -1)
    logq = torch.log_softmax(teacher.detach().double() / teacher_temperature, -1)
    gap = float((logp - logq).abs().max()) if logp.numel() else 1.0
    return 2 * errors + reorder_tol(max(1.0, gap), student.shape[-1])


def mean_tol(per_value: float, values: torch.Tensor | float, count: int) -> float:
    """Absolute tolerance of an fp32 mean (or sum divided by a count) of ``count`` values, each
    known to ``per_value``: the mean of their errors plus the rounding of the ``count``-term sum
    (``reorder_tol(max|value|, count)``)."""
    size = scale(values) if isinstance(values, torch.Tensor) else max(1.0, abs(values))
    return per_value + reorder_tol(size, count)


def chain_tols(
    reference: torch.Tensor | float, *lengths: int, dtype: torch.dtype = torch.float32
) -> dict[str, float]:
    """``rtol``/``atol`` for :func:`torch.testing.assert_close` (or ``rel``/``abs`` for
    ``pytest.approx``, see :func:`approx_tols`) of a result reached through a chain of sums of
    the given ``lengths`` (a matmul's inner size, a vocabulary's log-partition, a token mean, a
    gradient's sum over tokens), computed in two orders (chunked vs plain, fused vs autograd).

    With ``n = Σ lengths`` each element keeps ``reorder_tol(|element|, n)`` and the whole
    ``reorder_tol(max|reference|, n)``: an element that cancels to near 0 still carries the
    rounding of terms of the size of the largest one."""
    n = sum(lengths)
    size = float(torch.as_tensor(reference).detach().abs().max())
    return {"rtol": reorder_tol(1.0, n, dtype), "atol": reorder_tol(size, n, dtype)}


def approx_tols(reference: torch.Tensor | float, *lengths: int) -> dict[str, float]:
    """:func:`chain_tols` as ``pytest.approx`` keywords (``rel``, ``abs``)."""
    tols = chain_tols(reference, *lengths)
    return {"rel": tols["rtol"], "abs": tols["atol"]}


def model_chain(config, tokens: int, steps: int = 1) -> tuple[int, ...]:
    """The sums a model's loss, gradient or metric passes through, for :func:`chain_tols`: each
    layer's MLP (``layers · intermediate_size`` terms, as in :func:`forward_logprob_tol`), the
    log-partition (``vocab_size``) and the ``tokens`` a loss or a weight gradient sums over;
    after ``steps`` optimizer steps each step's rounding is carried into the next (×steps)."""
    chain = (config.num_hidden_layers * config.intermediate_size, config.vocab_size, tokens)
    return tuple(steps * n for n in chain)


def growth_tol(rel: float, updates: int) -> float:
    """Relative tolerance of a value computed after ``updates`` optimizer updates, when the
    value of the initial weights is known to ``rel`` (one reduction, :func:`reorder_tol`).

    Each update adds its own rounding difference and carries the earlier ones forward: a
    gradient differing by a relative ``e`` moves the parameters by an update differing by about
    ``e`` (Adam's ``m/√v`` is scale-free), and the next gradient, taken at parameters moved by
    it, differs again, amplified by the loss's curvature along the update. We bound the growth
    per update by :data:`HEADROOM` (4): ``rel · 4^updates``. Measured on the golden runs
    (tests/train/test_golden_quick.py) under ``ATEN_CPU_CAPABILITY=default`` against ``avx2``:
    a gradient norm after 3 updates moved by 1.4e-4 relative, inside 1e-5 · 4³ = 6.4e-4."""
    return rel * HEADROOM**updates


def threshold_at_risk(
    before: torch.Tensor, after: torch.Tensor, tau: float, view: torch.dtype, delta: torch.Tensor
) -> int:
    """How many entries of ``1[|view(after) − view(before)| < τ]`` (a thresholded count, such as
    update sparsity) can change when each entry of ``after`` moves by up to ``delta``: those
    whose indicator at ``after ± delta`` differs from its value at ``after``, and those not
    counted whose ``before`` lies within ``delta`` (the indicator, a function of ``after``, is 1
    on one interval around ``before``). Two computations of ``after`` that differ by at most
    ``delta`` give counts that differ by at most this number."""
    base = before.to(view).float()

    def below(x: torch.Tensor) -> torch.Tensor:
        return (x.to(view).float() - base).abs() < tau

    here = below(after)
    risky = (below(after - delta) != here) | (below(after + delta) != here)
    risky |= ~here & ((after - before).abs() <= delta)
    return int(risky.sum())
