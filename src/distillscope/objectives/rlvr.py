"""The RLVR stage's objective: GRPO with the DAPO loss (docs/method.md §8).

The student samples G completions per prompt; each completion's reward is ``reward_correct``
if the task's verifier accepts it, else 0. Its advantage is the reward normalised within its
prompt's group,

    A_i = (R_i − mean_g R) / (std_g R + ε)        (population std over the G completions)

shared by every token of the completion, and the loss is the clipped surrogate with separate
low and high ratio clips (DAPO's "clip-higher"), normalised over all completion tokens of the
batch (token level, not per sequence), with no reference-model KL:

    r_t = π_θ(y_t) / π_old(y_t)
    L   = −(1 / Σ_i |y_i|) Σ_i Σ_t min(r_t A_i, clip(r_t, 1 − ε_low, 1 + ε_high) A_i)

A group whose completions all earn the same reward has A = 0: it adds tokens to the
normaliser but no gradient. Metrics are plain floats under ``rlvr/`` keys
(:mod:`distillscope.metric_keys`).
"""

from __future__ import annotations

import torch

from distillscope.objectives.divergences import check_shape, masked_mean
from distillscope.objectives.opd import check_trust_region, clipped_surrogate

#: ε of the group normalisation, as in GRPO implementations (a zero-variance group gives A = 0).
GROUP_STD_EPS = 1e-6


def group_advantages(
    rewards_B: torch.Tensor, group_size: int, eps: float = GROUP_STD_EPS
) -> torch.Tensor:
    """Group-normalised advantages: rows ``[k·G, (k+1)·G)`` are one prompt's G completions.

    ``A_i = (R_i − mean_g) / (std_g + eps)`` with the population standard deviation of the
    group (GRPO); ``[B]`` in, ``[B]`` out, fp32.
    """
    if group_size < 1 or rewards_B.ndim != 1 or rewards_B.numel() % group_size:
        raise ValueError(
            f"rewards_B of shape {tuple(rewards_B.shape)} does not split into groups of "
            f"{group_size} (rows k·G … (k+1)·G − 1 are one prompt's completions)"
        )
    r_K_G = rewards_B.float().view(-1, group_size)
    mean_K_1 = r_K_G.mean(dim=-1, keepdim=True)
    std_K_1 = r_K_G.std(dim=-1, correction=0, keepdim=True)
    return ((r_K_G - mean_K_1) / (std_K_1 + eps)).view(-1)


def dapo_loss(
    logp_B_T: torch.Tensor,
    logp_old_B_T: torch.Tensor,
    advantages_B: torch.Tensor,
    mask_B_T: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The DAPO clipped surrogate with token-level normalisation (module docstring).

    Args:
        logp_B_T: log π_θ(y_t) of the sampled tokens under the current policy (differentiable).
        logp_old_B_T: log π_old(y_t) under the policy that sampled (a constant).
        advantages_B: one advantage per completion (:func:`group_advantages`), a constant.
        mask_B_T: True at the completion tokens that count (EOS included).
        eps_low, eps_high: the ratio clip [1 − ε_low, 1 + ε_high] (DAPO: 0.2, 0.28).

    Returns:
        ``(loss, metrics)``: the scalar fp32 loss — the sum over the masked tokens divided by
        their number (0 with none) — and ``rlvr/`` metrics: the loss, the mean ratio and the
        share of tokens whose clipped branch is active (no gradient).
    """
    check_trust_region(eps_low, eps_high)
    check_shape("logp_old_B_T", logp_old_B_T, logp_B_T.shape)
    check_shape("mask_B_T", mask_B_T, logp_B_T.shape)
    check_shape("advantages_B", advantages_B, logp_B_T.shape[:1])
    keep_B_T = mask_B_T.bool()
    # Padding positions may hold junk (−inf) log-probs, the current ones included: replace them
    # before exp() (a NaN there would reach the gradient although the sum drops the value).
    logp_B_T = torch.where(keep_B_T, logp_B_T.float(), 0.0)
    logp_old_B_T = torch.where(keep_B_T, logp_old_B_T.float(), logp_B_T.detach())
    adv_B_1 = advantages_B.float().detach()[:, None]
    ratio_B_T = torch.exp(logp_B_T - logp_old_B_T)
    surrogate_B_T, active_B_T = clipped_surrogate(ratio_B_T, adv_B_1, eps_low, eps_high)
    n_tokens = keep_B_T.sum()
    loss = -torch.where(keep_B_T, surrogate_B_T, 0.0).sum() / n_tokens.clamp(min=1)
    with torch.no_grad():
        r = ratio_B_T.detach()
        values = torch.stack(
            [loss.detach(), masked_mean(r, keep_B_T), masked_mean(active_B_T.float(), keep_B_T)]
        ).tolist()  # one device→host sync
    keys = ("rlvr/loss", "rlvr/ratio_mean", "rlvr/ratio_clip_frac")
    return loss, dict(zip(keys, values, strict=True))
