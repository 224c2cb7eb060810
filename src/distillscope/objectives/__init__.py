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

Like every package of distillscope, this one re-exports only its torch-free names (the registry
and the options, which every config validation reads); a loss is imported from its module,
``from distillscope.objectives.divergences import reverse_kl``.
"""

from distillscope.objectives.options import (
    DEFAULT_MEMORY_BUDGET_MB,
    REDUCTIONS,
    REGULATIONS,
    ChunkSpec,
    DivergenceOptions,
    OPDOptions,
    Reduction,
    Regulation,
    Weight,
    chunk_rows,
)
from distillscope.objectives.registry import FUSED_MIN_VOCAB, OBJECTIVES, ObjectiveKind

__all__ = [
    "DEFAULT_MEMORY_BUDGET_MB",
    "FUSED_MIN_VOCAB",
    "OBJECTIVES",
    "REDUCTIONS",
    "REGULATIONS",
    "ChunkSpec",
    "DivergenceOptions",
    "OPDOptions",
    "ObjectiveKind",
    "Reduction",
    "Regulation",
    "Weight",
    "chunk_rows",
]
