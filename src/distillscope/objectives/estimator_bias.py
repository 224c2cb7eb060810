"""Sampled KL estimators against the exact full-vocabulary KL, position by position.

Which sampled estimator to trust (docs/method.md §2, [P] App. A.2, Schulman 2020): at each
completion position n, with ℓ_S, ℓ_T the loss-temperature log-probs, the exact targets are

    R_n = KL(π_S ‖ π_T) = Σ_v π_S (ℓ_S − ℓ_T),     F_n = KL(π_T ‖ π_S) = Σ_v π_T (ℓ_T − ℓ_S)

and each estimator gives one number per draw:

- ``k1``, ``k2``, ``k3`` (targets R_n): y ~ π_S, log r = ℓ_T(y) − ℓ_S(y);
  k1 = −log r, k2 = ½ (log r)², k3 = (r − 1) − log r — what ``kl/k1..k3`` log on OnPD rows;
- ``forward_k1``, ``forward_k2``, ``forward_k3`` (targets F_n): the same with the roles swapped,
  y' ~ π_T, log r = ℓ_S(y') − ℓ_T(y'); forward_k1 = ℓ_T(y') − ℓ_S(y') is the KL estimate of the
  sampled forward objective (``objective/forward_kl_estimate``, :mod:`.estimators`), whose loss
  −log π_S(y') differs from it by the teacher's surprisal, constant in θ;
- ``topk_tail`` (target F_n): the forward KL between the k + 1 folded bins of :mod:`.topk`,
  deterministic (a lower bound of F_n, so its bias is ≤ 0).

k1 and k3 are unbiased for their KL and k3 ≥ 0 per draw; k2 is biased (E k2 = KL + O(KL^{3/2})).
Two views of each estimator: its exact mean and variance per position, enumerating the
vocabulary (:func:`exact_moments`: the bias with no Monte-Carlo error), and actual draws
(:func:`estimator_draws`: what a finite batch sees — an estimator whose mean is carried by
tokens its sampler rarely draws, such as forward k3 under a sharp teacher, shows a sample bias
far beyond its own standard error). Draws use inverse CDF from caller-given uniforms, so the
same uniforms give the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from distillscope.objectives.divergences import forward_kl_tokens, reverse_kl_tokens
from distillscope.objectives.fused_tokens import inverse_cdf_draw
from distillscope.objectives.positions import bin_edges, binned_means
from distillscope.objectives.topk import check_topk, fold

#: estimator → the KL it estimates
TARGETS: dict[str, str] = {
    "k1": "reverse_kl",
    "k2": "reverse_kl",
    "k3": "reverse_kl",
    "forward_k1": "forward_kl",
    "forward_k2": "forward_kl",
    "forward_k3": "forward_kl",
    "topk_tail": "forward_kl",
}
#: the estimators expected to be unbiased (their bias should be 0 within Monte-Carlo error)
UNBIASED = frozenset({"k1", "k3", "forward_k1", "forward_k3"})


def schulman_k(log_r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(k1, k2, k3) of log r elementwise: −log r, ½ (log r)², (r − 1) − log r (≥ 0)."""
    k3 = (torch.expm1(log_r) - log_r).clamp_min(0.0)  # expm1: accurate near r = 1
    return -log_r, 0.5 * log_r.square(), k3


def _draw(logp_B_T_V: torch.Tensor, uniforms_S_B_T: torch.Tensor) -> torch.Tensor:
    """S tokens per position, ``[S, B, T]``, by inverse CDF (one uniform each)."""
    s, (b, t, v) = uniforms_S_B_T.shape[0], logp_B_T_V.shape
    logp_N_V = logp_B_T_V.reshape(1, b * t, v).expand(s, -1, -1).reshape(-1, v)
    return inverse_cdf_draw(logp_N_V, uniforms_S_B_T.reshape(-1)).view(s, b, t)


def _at(logp_B_T_V: torch.Tensor, tokens_S_B_T: torch.Tensor) -> torch.Tensor:
    """ℓ at each drawn token, ``[S, B, T]``."""
    s = tokens_S_B_T.shape[0]
    expanded = logp_B_T_V.unsqueeze(0).expand(s, *logp_B_T_V.shape)
    return expanded.gather(-1, tokens_S_B_T.unsqueeze(-1)).squeeze(-1)


def _estimates(log_r: torch.Tensor, prefix: str) -> dict[str, torch.Tensor]:
    return dict(zip((f"{prefix}k1", f"{prefix}k2", f"{prefix}k3"), schulman_k(log_r), strict=True))


@torch.no_grad()
def estimator_draws(
    logp_student_B_T_V: torch.Tensor,
    logp_teacher_B_T_V: torch.Tensor,
    uniforms_2_S_B_T: torch.Tensor,
    topk: int = 0,
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(estimates, targets): each estimator's values ``[S, B, T]`` (``[1, B, T]`` for the
    deterministic top-k) and the exact KLs ``[B, T]`` (``reverse_kl``, ``forward_kl``).

    ``uniforms_2_S_B_T[0]`` draws y ~ π_S, ``[1]`` draws y' ~ π_T (S draws per position each).
    ``topk`` > 0 adds ``topk_tail`` with the teacher's k most likely tokens.
    """
    targets = {
        "reverse_kl": reverse_kl_tokens(logp_student_B_T_V, logp_teacher_B_T_V),
        "forward_kl": forward_kl_tokens(logp_student_B_T_V, logp_teacher_B_T_V),
    }
    y_S_B_T = _draw(logp_student_B_T_V, uniforms_2_S_B_T[0])
    log_r = _at(logp_teacher_B_T_V, y_S_B_T) - _at(logp_student_B_T_V, y_S_B_T)
    y_prime_S_B_T = _draw(logp_teacher_B_T_V, uniforms_2_S_B_T[1])
    log_r_fwd = _at(logp_student_B_T_V, y_prime_S_B_T) - _at(logp_teacher_B_T_V, y_prime_S_B_T)
    estimates = _estimates(log_r, "") | _estimates(log_r_fwd, "forward_")
    if topk:
        estimates["topk_tail"] = topk_tail(logp_student_B_T_V, logp_teacher_B_T_V, topk)[None]
    return estimates, targets


def topk_tail(
    logp_student_B_T_V: torch.Tensor, logp_teacher_B_T_V: torch.Tensor, k: int
) -> torch.Tensor:
    """Forward KL over the teacher's top-k bins and one tail bin (:mod:`.topk`), ``[B, T]``."""
    check_topk(k, logp_teacher_B_T_V.shape[-1])
    ids_B_T_K = logp_teacher_B_T_V.topk(k, dim=-1).indices
    folded_s = fold(logp_student_B_T_V, ids_B_T_K)
    return forward_kl_tokens(folded_s, fold(logp_teacher_B_T_V, ids_B_T_K))


@torch.no_grad()
def exact_moments(
    logp_student_B_T_V: torch.Tensor, logp_teacher_B_T_V: torch.Tensor, topk: int = 0
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each estimator's exact mean and variance per position, ``([B, T], [B, T])``, in fp64.

    The vocabulary is enumerable, so E_{y~π}[k(y)] = Σ_v π(v) k(v) and its variance need no
    sampling: the estimator's bias at a position is its mean minus the KL, exactly. The
    deterministic top-k has variance 0.
    """
    ell_s, ell_t = logp_student_B_T_V.double(), logp_teacher_B_T_V.double()
    out = {}
    for weights, log_r, prefix in (
        (ell_s.exp(), ell_t - ell_s, ""),
        (ell_t.exp(), ell_s - ell_t, "forward_"),
    ):
        for name, k_V in _estimates(log_r, prefix).items():
            # 0 · k where the sampler has no mass (k may be inf there)
            mean = torch.where(weights > 0, weights * k_V, 0.0).sum(-1)
            dev = torch.where(weights > 0, weights * (k_V - mean[..., None]).square(), 0.0)
            out[name] = (mean, dev.sum(-1))
    if topk:
        value = topk_tail(ell_s, ell_t, topk)
        out["topk_tail"] = (value, torch.zeros_like(value))
    return out


def exact_summaries(
    mean_B_T: torch.Tensor,
    var_B_T: torch.Tensor,
    target_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    edges: list[int],
) -> list[tuple[float, float]]:
    """(exact bias, exact std of one draw's error) per position bin, a position drawn at random
    from the bin's tokens: bias = mean (E k − KL), std² = mean (Var k + (E k − KL)²) − bias²."""
    bias_B_T = mean_B_T.double() - target_B_T.double()
    bias = binned_means(bias_B_T, mask_B_T, edges)
    second = binned_means(var_B_T.double() + bias_B_T.square(), mask_B_T, edges)
    return [
        (b.mean, max(sq.mean - b.mean**2, 0.0) ** 0.5) for b, sq in zip(bias, second, strict=True)
    ]


@dataclass(frozen=True)
class ErrorSummary:
    """An estimator's error (estimate − exact KL) over the draws of some positions."""

    bias: float  # mean error
    std: float  # standard deviation of the error over draws and positions
    se: float  # Monte-Carlo standard error of the bias: std / √draws (NaN for deterministic)
    draws: int  # positions × draws per position
    target_mean: float  # mean exact KL over the same positions

    def row(self) -> dict:
        return {
            "bias": self.bias,
            "std": self.std,
            "se": self.se,
            "draws": self.draws,
            "target_mean": self.target_mean,
        }


def error_summaries(
    estimate_S_B_T: torch.Tensor,
    target_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    edges: list[int],
    random: bool = True,
) -> list[ErrorSummary]:
    """:class:`ErrorSummary` per position bin of ``edges`` (:func:`~.positions.bin_edges`).

    The bias is the bin mean of the per-position mean error over draws; the standard deviation
    pools the draws (E[err²] − bias²). The standard error treats the draws as independent given
    the rollouts (they are: fresh uniforms per draw); NaN for a deterministic estimator
    (``random=False``: its spread is over positions only).
    """
    s = estimate_S_B_T.shape[0]
    err_S_B_T = estimate_S_B_T.double() - target_B_T.double().unsqueeze(0)
    mean_err = binned_means(err_S_B_T.mean(dim=0), mask_B_T, edges)
    mean_sq = binned_means(err_S_B_T.square().mean(dim=0), mask_B_T, edges)
    target = binned_means(target_B_T, mask_B_T, edges)
    out = []
    for m, sq, tgt in zip(mean_err, mean_sq, target, strict=True):
        n = m.count * s
        std = max(sq.mean - m.mean**2, 0.0) ** 0.5 if m.count else float("nan")
        se = std / n**0.5 if n and random else float("nan")
        out.append(ErrorSummary(m.mean, std, se, n, tgt.mean))
    return out


def overall_summary(
    estimate_S_B_T: torch.Tensor,
    target_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    random: bool = True,
) -> ErrorSummary:
    """:func:`error_summaries` over every completion position (one bin)."""
    width = max(int(mask_B_T.bool().sum(dim=-1).max()), 1) if mask_B_T.numel() else 1
    edges = bin_edges(width, 1)
    return error_summaries(estimate_S_B_T, target_B_T, mask_B_T, edges, random)[0]
