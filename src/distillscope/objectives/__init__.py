"""Pure tensor objectives: what the student minimises (docs/method.md §1, §2, §4).

Every public objective maps tensors and options to ``(loss, metrics)``: a scalar fp32 loss and a
dict of plain floats with namespaced keys (documented in each module's docstring). None of them
sees a model, a config or a file.

- :mod:`.divergences` — full-vocabulary forward/reverse KL, generalised JSD, KL mixture on logits;
- :mod:`.chunked` — the same from hidden states + LM-head weights, chunk by chunk (bounded memory);
- :mod:`.fused` — the same, fused: closed-form gradients, chunks sized by a memory budget;
- :mod:`.fused_tokens` — per-token log-probs and draws from hidden states, chunk by chunk;
- :mod:`.estimators` — sampled and rollout-token KL estimators, Schulman's k1/k2/k3 metrics;
- :mod:`.opd` — on-policy distillation as a PPO-clipped policy gradient with regulations;
- :mod:`.registry` — the objective kinds a config can name, with what each needs.

The names below are imported from their modules on first use, so that reading the registry (as
every config validation does) does not import torch.
"""

from __future__ import annotations

from distillscope.lazy import lazy_exports

#: module of this package → the public names it provides here
_EXPORTS = {
    "chunked": ("chunked_divergence", "chunked_forward_kl", "chunked_reverse_kl"),
    "divergences": (
        "DIVERGENCES",
        "REDUCTIONS",
        "Divergence",
        "Reduction",
        "forward_kl",
        "generalized_jsd",
        "kl_mixture",
        "reduce_tokens",
        "reverse_kl",
        "shared_vocab",
        "token_divergence",
        "token_weights",
    ),
    "estimators": (
        "draw_uniforms",
        "kl_metrics_by_writer",
        "kl_sample_metrics",
        "rollout_token_forward_kl",
        "rollout_token_reverse_kl",
        "sampled_forward_kl",
        "sampled_reverse_kl",
        "sampled_token_loss",
    ),
    "fused": ("DEFAULT_MEMORY_BUDGET_MB", "chunk_rows", "fused_divergence"),
    "fused_tokens": (
        "draw_from_hidden",
        "inverse_cdf_draw",
        "token_logprobs_at_temperatures",
        "token_logprobs_from_hidden",
    ),
    "opd": (
        "REGULATIONS",
        "Regulation",
        "opd_from_logprobs",
        "opd_policy_gradient",
        "regulate_advantage",
    ),
    "registry": ("OBJECTIVES", "ObjectiveKind", "objective_kind"),
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
