"""Rollouts: who writes the completion tokens (docs/method.md §3).

Policies (student, teacher, λ-spectrum, sequence mixing, token interleaving; the names a config
may use are in :mod:`distillscope.policy_registry`), one batched KV-cache sampler that decodes
both models in lock step (a :class:`PromptBatch` and a :class:`SamplingSpec` in,
:class:`Rollouts` out), scoring of missing log-probs, rollout diagnostics, and a disk cache of
teacher rollouts for off-policy reuse.
"""

from distillscope.rollout.cache import (
    TEACHER_LOGITS_MAX_VOCAB,
    RolloutCache,
    canonical_json,
    key_digest,
    prompt_digest,
)
from distillscope.rollout.diagnostics import likelihood_metrics, rollout_length_metrics
from distillscope.rollout.policies import (
    SOURCE_JOINT,
    SOURCE_STUDENT,
    SOURCE_TEACHER,
    InterleavePolicy,
    MixturePolicy,
    NonFiniteSamplingError,
    RolloutPolicy,
    SpectrumPolicy,
    StudentPolicy,
    TeacherPolicy,
    behavior_logprobs,
)
from distillscope.rollout.prompts import (
    PromptEncoder,
    model_generator,
    select_problems,
    step_generator,
    step_rng,
)
from distillscope.rollout.rollouts import PromptBatch, Rollouts, SamplingSpec, position_ids
from distillscope.rollout.sampler import (
    forward_completion_logprobs,
    sample_rollouts,
    score_rollouts,
)
from distillscope.rollout.spectrum import spectrum_logprobs, spectrum_scores

__all__ = [
    "SOURCE_JOINT",
    "SOURCE_STUDENT",
    "SOURCE_TEACHER",
    "InterleavePolicy",
    "MixturePolicy",
    "NonFiniteSamplingError",
    "PromptBatch",
    "PromptEncoder",
    "RolloutCache",
    "TEACHER_LOGITS_MAX_VOCAB",
    "RolloutPolicy",
    "Rollouts",
    "SamplingSpec",
    "SpectrumPolicy",
    "StudentPolicy",
    "TeacherPolicy",
    "behavior_logprobs",
    "canonical_json",
    "forward_completion_logprobs",
    "key_digest",
    "likelihood_metrics",
    "position_ids",
    "prompt_digest",
    "rollout_length_metrics",
    "sample_rollouts",
    "score_rollouts",
    "select_problems",
    "spectrum_logprobs",
    "spectrum_scores",
    "step_generator",
    "model_generator",
    "step_rng",
]
