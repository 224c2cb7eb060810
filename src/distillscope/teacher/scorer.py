"""The frozen teacher of a run behind one interface: its scores of each micro-batch — live,
replayed from the rollout cache, or reduced to its top k — and its shared rollouts.

Off-policy runs that share the teacher, the task, the seed and the sampling settings write the
same teacher rollouts, and the teacher's forward over them does not depend on the student
(docs/method.md §3, "Off-policy data reuse"). With a rollout cache (``distill(...,
rollout_cache=)`` and ``rollout.cache_teacher_rollouts``) a teacher-written run reads both from
disk when another run made them: the rollouts bit for bit, and the teacher's scores in the form
the objective reads (:func:`_score_form`), so the loss is identical. How the entries are keyed,
stored and replayed is this module's business only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import torch

from distillscope.config import RunConfig
from distillscope.models.precision import forward_precision
from distillscope.objectives.options import DivergenceOptions
from distillscope.rollout.cache import TEACHER_LOGITS_MAX_VOCAB, RolloutCache, prompt_digest
from distillscope.rollout.prompts import PromptEncoder
from distillscope.rollout.rollouts import MicroBatch, PromptBatch, Rollouts
from distillscope.rollout.scoring import (
    HiddenScores,
    LogitScores,
    ScorePath,
    TeacherScores,
    TeacherTopK,
)
from distillscope.store_versions import TEACHER_KEY_ADDED, without_added
from distillscope.teacher.manifest import keyed_as_built
from distillscope.teacher.served import ServedTeacher


class Objective(Protocol):
    """What a teacher reads of the run's objective (:class:`distillscope.train.step.Objective`
    is one): the scoring path, the loss temperatures and the top-k reduction (0 = none)."""

    @property
    def path(self) -> ScorePath: ...

    @property
    def options(self) -> DivergenceOptions: ...

    @property
    def teacher_topk(self) -> int: ...


class OneTeacher:
    """A run's one teacher, as a step sees it: every row reads it (several teachers:
    :mod:`.routed`)."""

    #: no row is routed: every row reads this teacher
    route: tuple[str, ...] = ()
    #: how the run's prompts are encoded (a teacher with another tokenizer: its own)
    prompt_encoder: type[PromptEncoder] = PromptEncoder

    def for_step(self, problems: list) -> OneTeacher:
        """The teacher of a step's ``problems``: this one, for every row."""
        return self

    def metrics(self, rollouts: Rollouts, logprobs_B_T: dict, rewards: list) -> dict[str, float]:
        """No per-teacher metrics: the one teacher's are the step's."""
        return {}


class TeacherScorer(OneTeacher):
    """The teacher's side of every step of one run (``cache_dir``: a directory shared by runs).

    :meth:`rollouts` reads a teacher-written step's rollouts from the cache, or samples and
    stores them; :meth:`scores` gives the teacher's scores of each micro-batch of a step, one
    micro-batch at a time when computed live (as the student loop asks for them), all at once
    when the cache keeps them.
    """

    def __init__(
        self,
        cfg: RunConfig,
        teacher: torch.nn.Module | ServedTeacher,
        objective: Objective,
        cache_dir: Path | None = None,
    ) -> None:
        self.cfg, self.teacher, self.objective = cfg, teacher, objective
        self.cache = built_cache(cfg) or _shared_cache(cfg, cache_dir)
        self.key_cfg = keyed_as_built(cfg)  # a built cache's keys: its paths as typed

    def rollouts(
        self, step: int, prompts: PromptBatch, roll: Callable[[], Rollouts]
    ) -> tuple[Rollouts, float]:
        """``(roll(), 0.0)``, or the step's shared rollouts and the seconds the cache saved."""
        if self.cache is None:
            return roll(), 0.0
        return self.cache.fetch(_rollout_key(self.key_cfg, step, _digest(prompts)), roll)

    def scores(
        self, step: int, prompts: PromptBatch, batches: list[MicroBatch]
    ) -> tuple[Iterable[TeacherScores], float]:
        """The teacher's scores of each of ``batches`` and the seconds the cache saved.

        Live (no cache, or a form it does not keep), each is computed when the caller reaches
        it; from the cache, the whole step's are read (or computed and stored) at once.
        """
        form = _score_form(self.objective)
        if self.cache is None or form is None:
            return map(self.score, batches), 0.0
        key = {
            **_rollout_key(self.key_cfg, step, _digest(prompts)),
            **_score_key(self.cfg, form, self.objective.path.vocab_size),
        }
        entry, saved_s = self.cache.fetch_tensors(key, lambda: self._entry(batches))
        head_V_H = self.teacher.get_output_embeddings().weight
        replayed = [
            form.from_cache(_micro(entry, k), self.objective.path, head_V_H).to(_device(micro))
            for k, micro in enumerate(batches)
        ]
        return replayed, saved_s

    def score(self, micro: MicroBatch) -> TeacherScores:
        """The teacher's scores of one micro-batch, live, on the micro-batch's device."""
        r = micro.rollouts
        if isinstance(self.teacher, ServedTeacher):  # the server answers the top k itself
            tau = self.objective.options.teacher_temperature
            return self.teacher.topk(r, self.objective.teacher_topk, tau)
        with forward_precision(self.cfg.model), torch.inference_mode():
            # the teacher may sit on its own device; its outputs come back to the student's
            device = next(self.teacher.parameters()).device
            scores = self.objective.path.scores(self.teacher, r.to(device), "teacher")
        scores = scores.cloned_to(_device(micro))  # clone: inference tensors can't enter autograd
        if self.objective.teacher_topk:  # one head pass for the top k and the completion
            tau = self.objective.options.teacher_temperature
            return scores.topk(self.objective.teacher_topk, r, tau)
        return scores

    def _entry(self, batches: list[MicroBatch]) -> dict[str, torch.Tensor]:
        """A cache entry: ``micro_<k>[/<name>]`` → the tensors of micro-batch k's scores."""
        return {
            f"micro_{k}{name}": tensor
            for k, micro in enumerate(batches)
            for name, tensor in self.score(micro).cache_tensors().items()
        }


def _shared_cache(cfg: RunConfig, cache_dir: Path | None) -> RolloutCache | None:
    """The rollout cache shared by a study's teacher-written runs, when it is on."""
    shared = cfg.rollout.cache_teacher_rollouts and cfg.rollout.policy == "teacher"
    return RolloutCache(cache_dir) if cache_dir and shared else None


def built_cache(cfg: RunConfig) -> RolloutCache | None:
    """``model.teacher_cache``, read only: the teacher cache built once
    (:mod:`distillscope.train.cache_build`), checked against ``cfg`` by the preflight
    (:mod:`.manifest`). Its entries are keyed by one process's micro-batches, so a run of
    several processes is refused."""
    if cfg.model.teacher_cache is None:
        return None
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        if torch.distributed.get_world_size() > 1:
            raise ValueError("model.teacher_cache is read by a run of one process only")
    return RolloutCache(cfg.model.teacher_cache, frozen=True)


def _micro(entry: dict[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
    """Micro-batch ``k``'s part of a cache entry, keyed as ``cache_tensors`` wrote it."""
    prefix = f"micro_{k}"
    return {
        name.removeprefix(prefix): t
        for name, t in entry.items()
        if name == prefix or name.startswith(prefix + "/")
    }


def _device(micro: MicroBatch) -> torch.device:
    return micro.rollouts.completion_mask_B_T.device


def _digest(prompts: PromptBatch) -> str:
    return prompt_digest(prompts.ids_B_P, prompts.mask_B_P)


def _score_form(objective: Objective) -> type[TeacherScores] | None:
    """What of the teacher's output a cache entry holds: its top-k reduction when
    ``objective.teacher_topk`` is set (any V), hidden states on the fused path (any V), full
    logits up to V = TEACHER_LOGITS_MAX_VOCAB, else nothing (the teacher runs live)."""
    if objective.teacher_topk:
        return TeacherTopK
    if objective.path.fused:
        return HiddenScores
    return LogitScores if objective.path.vocab_size <= TEACHER_LOGITS_MAX_VOCAB else None


def _rollout_key(cfg: RunConfig, step: int, prompts: str) -> dict:
    """What determines a teacher rollout batch: teacher, task, seed, step, sampling settings,
    the engine, and the teacher's prompt (``prompts`` digests the student's; the style flag and
    the instruction make the teacher's differ). Entries added after caches existed are left out
    at their default (:data:`~distillscope.store_versions.TEACHER_KEY_ADDED`)."""
    key = {
        "instruction": cfg.task.teacher_instruction,
        "engine": cfg.rollout.engine,
        "teacher": str(cfg.model.teacher),
        "teacher_dtype": cfg.model.teacher_dtype,
        "task": cfg.task.name,
        "file": str(cfg.task.file) if cfg.task.file else None,
        "style_flag": cfg.task.teacher_style_flag,
        "seed": cfg.seed,
        "step": step,
        "temperature": cfg.rollout.teacher_temperature,
        "top_p": cfg.rollout.top_p,
        "max_new_tokens": cfg.task.max_new_tokens,
        "prompts": prompts,
    }
    return without_added(key, TEACHER_KEY_ADDED)


def _score_key(cfg: RunConfig, form: type[TeacherScores], vocab_size: int) -> dict:
    """What else determines the teacher's scores of a cached batch: the form, the scoring
    device and micro-batching, the loss temperature and the vocabulary."""
    topk = {"teacher_topk": cfg.objective.teacher_topk} if form is TeacherTopK else {}
    return {
        **topk,
        "scores": form.CACHE_FORM,
        "device": str(cfg.model.device),
        "grad_accum": cfg.optim.grad_accum,
        "loss_temperature": cfg.objective.teacher_temperature,
        "vocab_size": vocab_size,
    }
