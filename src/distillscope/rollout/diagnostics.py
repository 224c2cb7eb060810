"""Per-batch rollout diagnostics: trajectory likelihoods (docs/method.md §3) and lengths
(docs/method.md §4).

Values are Python floats under ``rollout/`` keys; what each key means is registered in
:mod:`distillscope.metric_keys`, the one list. Token statistics pool the batch's completion
tokens (EOS included); length statistics are per sequence, percentiles interpolated linearly
(``torch.quantile``); an early EOS is one among the first ``early_eos_tokens`` (default 2)
completion tokens of a sequence that was not truncated — the "abrupt degeneration" signature of
[D] (an answer cut off before it starts).
"""

from __future__ import annotations

import torch

from distillscope.rollout.rollouts import Rollouts

#: EOS at or before this completion position counts as an early EOS.
EARLY_EOS_TOKENS = 2


def likelihood_metrics(
    rollouts: Rollouts, logp_student_t1_B_T: torch.Tensor, logp_teacher_t1_B_T: torch.Tensor
) -> dict[str, float]:
    """Likelihood of the sampled tokens under S and T ([P] Fig. 4, App. A.9).

    Pass log-probs at temperature 1.0 (e.g. from
    ``forward_completion_logprobs(model, r, role, 1.0)``), as [P] does, so the numbers compare
    across rollout policies whatever they sampled at.
    """
    mask_B_T = rollouts.completion_mask_B_T.bool()
    metrics = {}
    for role, logp_B_T in (("student", logp_student_t1_B_T), ("teacher", logp_teacher_t1_B_T)):
        logp_N = logp_B_T[mask_B_T].double()  # N = real completion tokens in the batch
        metrics[f"rollout/{role}_token_prob"] = logp_N.exp().mean().item()
        metrics[f"rollout/{role}_geo_prob"] = logp_N.mean().exp().item()
    return metrics


def rollout_length_metrics(
    rollouts: Rollouts, early_eos_tokens: int = EARLY_EOS_TOKENS
) -> dict[str, float]:
    """Length, truncation and early-EOS rates of one batch (docs/method.md §4, length growth)."""
    lengths_B = rollouts.lengths_B.double()
    truncated_B = rollouts.truncated_B.bool()
    early_B = ~truncated_B & (rollouts.lengths_B <= early_eos_tokens)
    return {
        "rollout/len_mean": lengths_B.mean().item(),
        "rollout/len_p50": torch.quantile(lengths_B, 0.5).item(),
        "rollout/len_p90": torch.quantile(lengths_B, 0.9).item(),
        "rollout/truncated_frac": truncated_B.double().mean().item(),
        "rollout/early_eos_frac": early_B.double().mean().item(),
    }
