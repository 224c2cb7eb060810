"""Rollouts: who writes the completion tokens (docs/method.md §3).

Policies (student, teacher, λ-spectrum, sequence mixing, token interleaving; the names a config
may use are in :mod:`.policy_registry`), one batched KV-cache sampler that decodes both models in
lock step (:mod:`.sampler`: a :class:`~.rollouts.PromptBatch` and a
:class:`~.rollouts.SamplingSpec` in, :class:`~.rollouts.Rollouts` out), scoring of missing
log-probs, rollout diagnostics (:mod:`.diagnostics`), prompts and generators (:mod:`.prompts`),
and a disk cache of teacher rollouts for off-policy reuse (:mod:`.cache`).

The package re-exports its torch-free names only (the policy registry, which config validation
and the report read); the rest is imported from its module,
``from distillscope.rollout.sampler import sample_rollouts``.
"""

from distillscope.rollout.policy_registry import (
    POLICY_NAMES,
    ROLLOUT_POLICIES,
    SPECTRUM_TEMPERATURES,
    PolicyKind,
)

__all__ = ["POLICY_NAMES", "ROLLOUT_POLICIES", "SPECTRUM_TEMPERATURES", "PolicyKind"]
