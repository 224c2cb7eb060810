"""Every teacher kind behind one constructor: :func:`open_pair` loads a run's models and
:func:`open_teacher` gives its teacher side, one interface (:class:`Teacher`) whatever the kind.

The kind is read here and nowhere else (the loop, the setup and the GRPO stage hold no branch
on it):

- a local teacher (live, reduced to its top k, or replayed from the rollout cache or a built
  teacher cache): :class:`~.scorer.TeacherScorer`;
- a served teacher (``model.teacher: http://…``): the same scorer over a
  :class:`~.served.ServedTeacher`, the student loaded beside it (:func:`~.served.served_pair`);
- a teacher with another tokenizer (``objective.kind`` one of
  :data:`~distillscope.objectives.registry.CROSS_TOKENIZER_KINDS`):
  :class:`~.cross_tokenizer.CrossTokenizerTeacher`, each model with its own tokenizer;
- several teachers (``model.teachers``): :class:`~.routed.RoutedTeachers`, each one of the kinds
  above, the pair holding the first (:func:`~.routing.primary_config`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import torch

from distillscope.config import RunConfig, served_url
from distillscope.models import resolve_model_path
from distillscope.models.load import ModelPair, load_pair, pair_options
from distillscope.objectives.registry import CROSS_TOKENIZER_KINDS
from distillscope.rollout.prompts import PromptEncoder
from distillscope.rollout.rollouts import MicroBatch, PromptBatch, Rollouts
from distillscope.teacher.cross_tokenizer import CrossTokenizerTeacher, load_cross_tokenizer_pair
from distillscope.teacher.routed import RoutedTeachers
from distillscope.teacher.routing import primary_config
from distillscope.teacher.scorer import Objective, TeacherScorer
from distillscope.teacher.served import served_pair


class StepTeacher(Protocol):
    """The teacher of one step, as the loop calls it."""

    #: each row's teacher name (several teachers), else empty
    route: list[str] | tuple[str, ...]

    def rollouts(
        self, step: int, prompts: PromptBatch, roll: Callable[..., Rollouts]
    ) -> tuple[Rollouts, float]:
        """The step's rollouts (``roll()`` or the teacher's) and the seconds a cache saved."""
        ...

    def scores(
        self, step: int, prompts: PromptBatch, batches: list[MicroBatch]
    ) -> tuple[Iterable, float]:
        """The teacher's scores of each micro-batch and the seconds a cache saved."""
        ...

    def metrics(
        self, rollouts: Rollouts, logprobs_B_T: dict[str, torch.Tensor], rewards: list[float]
    ) -> dict[str, float]:
        """The step's per-teacher metrics (``teacher/<name>/…``; none for one teacher)."""
        ...


class Teacher(Protocol):
    """A run's teacher side (:func:`open_teacher`)."""

    #: how the run's prompts are encoded (:meth:`PromptEncoder.of_run`)
    prompt_encoder: type[PromptEncoder]

    def for_step(self, problems: list) -> StepTeacher:
        """The teacher of the step whose rows are ``problems``."""
        ...


def open_pair(cfg: RunConfig) -> ModelPair:
    """The run's student and the teacher its kind loads, teacher frozen: beside a server (its
    tokenizer checked against the student's), each with its own tokenizer (a cross-tokenizer
    objective), or both local with one tokenizer; several teachers: the first one's."""
    cfg = primary_config(cfg)
    m = cfg.model
    if served_url(m.teacher):
        return served_pair(cfg)
    if cfg.objective.kind in CROSS_TOKENIZER_KINDS:
        return load_cross_tokenizer_pair(cfg)
    return load_pair(
        resolve_model_path(m.teacher), resolve_model_path(m.student), **pair_options(m)
    )


def open_teacher(
    cfg: RunConfig, pair: ModelPair, objective: Objective, rollout_cache: Path | None = None
) -> Teacher:
    """The run's teacher side over ``pair`` (:func:`open_pair`'s): its kind's (module doc).
    ``rollout_cache``: the directory of rollouts and scores shared by a study's runs."""
    if cfg.objective.kind in CROSS_TOKENIZER_KINDS:  # the teacher reads its own tokens
        return CrossTokenizerTeacher(cfg, pair, objective)
    if cfg.model.teachers is not None:  # each prompt's rollouts and scores from its teacher
        return RoutedTeachers.of(cfg, pair, objective, rollout_cache)
    return TeacherScorer(cfg, pair.teacher, objective, rollout_cache)
