"""What a training run needs before its first step: the model pair and the policy (its inputs
are checked first by :mod:`.run_checks`)."""

from __future__ import annotations

import torch

from distillscope.config import RolloutConfig, RunConfig
from distillscope.models.load import ModelPair
from distillscope.rollout.policies import RolloutPolicy
from distillscope.rollout.policy_registry import ROLLOUT_POLICIES
from distillscope.teacher.kinds import open_pair
from distillscope.train.fsdp import shard_student
from distillscope.train.lora import attach_lora


def load_models(cfg: RunConfig, shard: bool = False) -> ModelPair:
    """Teacher and student of the run as the teacher's kind loads them
    (:func:`distillscope.teacher.kinds.open_pair`: tokenizers checked, teacher frozen); the
    student carries ``model.lora``'s adapters (:mod:`.lora`: only they train), recomputes
    its layer activations in backward with ``model.gradient_checkpointing``, and with
    ``shard`` (``--fsdp``) has its layers sharded over the ranks (:mod:`.fsdp`)."""
    pair, m = open_pair(cfg), cfg.model
    if m.lora is not None:
        pair.student = attach_lora(pair.student, m.lora)
    if m.gradient_checkpointing:
        checkpointing_enable(pair.student)
    if shard:
        shard_student(pair.student)
    return pair


def checkpointing_enable(model: torch.nn.Module) -> None:
    """Recompute ``model``'s layer activations in its backward (non-reentrant checkpoints):
    transformers' ``activation_checkpointing_enable``, named ``gradient_checkpointing_enable``
    before 5.x (deprecated since)."""
    enable = getattr(model, "activation_checkpointing_enable", None)
    (enable or model.gradient_checkpointing_enable)({"use_reentrant": False})


def make_policy(cfg: RolloutConfig) -> RolloutPolicy:
    """The rollout policy a config names, with its temperatures (docs/method.md §3): the
    registry entry's constructor (:data:`distillscope.rollout.policy_registry.ROLLOUT_POLICIES`)."""
    return ROLLOUT_POLICIES[cfg.policy].make(cfg)
