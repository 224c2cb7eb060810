"""Pure tensor objectives: what the student minimises (docs/method.md §1, §2, §4).

Every public objective maps tensors and options to ``(loss, metrics)``: a scalar fp32 loss and a
dict of plain floats with namespaced keys (documented in each module's docstring). None of them
sees a model, a config or a file.

- :mod:`.divergences` — full-vocabulary forward/reverse KL, generalised JSD, KL mixture, each
  one declaration of its value and closed-form gradient; their loss on logits; the one tempered
  log-softmax (:func:`tempered_log_softmax`);
- :mod:`.fused` — the same declarations from hidden states + LM-head weights: closed-form
  gradients, chunks sized by a memory budget;
- :mod:`.fused_tokens` — per-token log-probs and draws from hidden states, chunk by chunk;
- :mod:`.topk` — a teacher reduced to its top k tokens and a tail bin;
- :mod:`.estimators` — sampled and rollout-token KL estimators, one declaration each, and
  Schulman's k1/k2/k3 metrics;
- :mod:`.opd` — on-policy distillation as a PPO-clipped policy gradient with regulations;
- :mod:`.options` — the typed options and chunk settings (torch-free);
- :mod:`.registry` — the objective kinds a config can name, with what each needs (torch-free).

The names below load from their modules on first use (:mod:`distillscope.lazy`), so that
reading the registry, as every config validation does, does not import torch.
"""

from typing import TYPE_CHECKING

from distillscope.lazy import lazy_exports

if TYPE_CHECKING:
    # The public names, one list: editors read these imports, lazy_exports parses them.
    from distillscope.objectives.divergences import (  # noqa: F401
        DIVERGENCES,
        FORWARD_KL,
        JSD,
        MIXTURE,
        REVERSE_KL,
        Divergence,
        divergence_loss,
        reduce_tokens,
        shared_vocab,
        tempered_log_softmax,
        token_weights,
    )
    from distillscope.objectives.estimators import (  # noqa: F401
        ESTIMATORS,
        FORWARD_SAMPLED,
        REVERSE_SAMPLED,
        TokenEstimator,
        draw_uniforms,
        kl_metrics_by_writer,
        kl_sample_metrics,
        sampled_kl,
        sampled_token_loss,
    )
    from distillscope.objectives.fused import fused_divergence  # noqa: F401
    from distillscope.objectives.fused_tokens import (  # noqa: F401
        draw_from_hidden,
        inverse_cdf_draw,
        token_logprobs_at_temperatures,
        token_logprobs_from_hidden,
    )
    from distillscope.objectives.opd import (  # noqa: F401
        opd_from_logprobs,
        opd_policy_gradient,
        regulate_advantage,
    )
    from distillscope.objectives.options import (  # noqa: F401
        DEFAULT_MEMORY_BUDGET_MB,
        REDUCTIONS,
        REGULATIONS,
        ChunkSpec,
        DivergenceOptions,
        OPDOptions,
        Reduction,
        Regulation,
        chunk_rows,
    )
    from distillscope.objectives.registry import (  # noqa: F401
        FUSED_MIN_VOCAB,
        OBJECTIVES,
        ObjectiveKind,
    )

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
