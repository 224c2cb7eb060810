"""Several teachers in one run, each prompt's rollouts and scores from its routed teacher
(``model.teachers`` + ``model.route``; which teacher a prompt reads: :mod:`.routing`).

Each teacher is a one-teacher :class:`~.scorer.TeacherScorer` of its own config (a live, top-k,
served or cached teacher, with the shared rollout cache keyed by its own teacher). A step
routes its rows; every teacher with at least one routed row in the step then

- writes the whole step's rollouts (teacher-writing policies: OffPD, λ-spectrum, mixing,
  interleaving) from the step's own generator, and each row is kept from its teacher's batch;
- scores each whole micro-batch, and each row's scores are kept from its teacher's. A cached
  teacher (``teacher-cache build``) reads its scores of its own batch instead, whose rows it
  was routed are those of the step; a live one scores the step's rows, never through the shared
  rollout cache, which keeps only a teacher's scores of its own batch.

Working on whole batches keeps every teacher's computation that of a one-teacher run, so a run
whose teachers are all the same model gives the one-teacher run's results bit for bit. The cost
is that of one teacher times the teachers with a routed row in the step, in time and in the
step's peak teacher memory (their score tensors of a micro-batch exist at once); each model is
loaded once however many names it has (docs/teachers.md).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields, replace

import torch

from distillscope.config import ConfigError, RunConfig, served_url
from distillscope.models import resolve_model_path
from distillscope.models.load import ModelPair, load_model, load_options
from distillscope.models.vocab import check_tokenizers_match
from distillscope.rollout.prompts import PromptEncoder
from distillscope.rollout.rollouts import MicroBatch, PromptBatch, Rollouts
from distillscope.rollout.scoring import HiddenScores, LogitScores, TeacherScores, TeacherTopK
from distillscope.teacher.client import TeacherClient
from distillscope.teacher.routing import routes, teacher_config, teacher_names
from distillscope.teacher.scorer import Objective, TeacherScorer
from distillscope.teacher.served import ServedTeacher
from distillscope.teacher.signal import GROUPS_KEY, INFO_KEY, informativeness_metrics

#: the completion-width fields of :class:`Rollouts` (padded to the widest routed batch) and the
#: per-row ones; the prompts are the same in every teacher's batch
_WIDE = (
    "completion_B_T",
    "completion_mask_B_T",
    "logp_student_B_T",
    "logp_teacher_B_T",
    "logp_behavior_B_T",
    "logp_engine_B_T",
)
_ROWS = ("lengths_B", "truncated_B", "source_B")


class RoutedTeachers:
    """The teachers of a run with ``model.teachers``, by name (:meth:`of`)."""

    #: the prompts are the student's (every teacher shares its tokenizer)
    prompt_encoder = PromptEncoder

    def __init__(self, cfg: RunConfig, scorers: dict[str, TeacherScorer], pad_id: int) -> None:
        self.cfg, self.scorers, self.pad_id = cfg, scorers, pad_id

    @classmethod
    def of(
        cls, cfg: RunConfig, pair: ModelPair, objective: Objective, cache_dir=None
    ) -> RoutedTeachers:
        """Each teacher of ``cfg`` as a scorer of its own config: the first is ``pair``'s
        teacher, every other model loaded once (a name repeating a directory shares it) and
        checked to share the student's tokenizer."""
        models: dict[str, torch.nn.Module | ServedTeacher] = {}
        scorers = {}
        for name in teacher_names(cfg):
            sub = teacher_config(cfg, name)
            spec = sub.model.teacher
            if spec not in models:
                models[spec] = _load_teacher(sub, pair) if models else pair.teacher
            scorers[name] = TeacherScorer(sub, models[spec], objective, cache_dir)
        _check_heads(objective, [m for m in models.values() if not isinstance(m, ServedTeacher)])
        return cls(cfg, scorers, pair.tokenizer.pad_token_id)

    def for_step(self, problems: list) -> RoutedStep:
        """The teachers of one step whose rows are ``problems``."""
        return RoutedStep(self, routes(self.cfg, problems))


@dataclass
class RoutedStep:
    """One step of :class:`RoutedTeachers`: each row's teacher (``route``, the step's rows in
    order) and each teacher's seconds this step (sampling and scoring, cache reads included)."""

    teachers: RoutedTeachers
    route: list[str]
    seconds: dict[str, float] = field(default_factory=dict)

    def active(self) -> list[str]:
        """The teachers with a routed row this step, in ``model.teachers`` order."""
        return [name for name in self.teachers.scorers if name in self.route]

    def rollouts(
        self, step: int, prompts: PromptBatch, roll: Callable[..., Rollouts]
    ) -> tuple[Rollouts, float]:
        """The step's rollouts, each row from its teacher's batch (``roll(teacher=model)`` for a
        batch sampled with ``model``), and the seconds the rollout cache saved; one batch of a
        policy the teacher does not write in."""
        if self.teachers.cfg.rollout.policy == "student":
            return roll(), 0.0
        batches, saved_s = {}, 0.0
        for name in self.active():
            scorer = self.teachers.scorers[name]
            start = time.perf_counter()
            sample = functools.partial(roll, teacher=scorer.teacher)
            batches[name], saved = scorer.rollouts(step, prompts, sample)
            self._took(name, start)
            saved_s += saved
        return routed_rollouts(batches, self.route, self.teachers.pad_id), saved_s

    def scores(
        self, step: int, prompts: PromptBatch, batches: list[MicroBatch]
    ) -> tuple[Iterable[TeacherScores], float]:
        """The teachers' scores of each of ``batches``, each row its teacher's, and the seconds
        the caches saved; computed as the caller reaches each micro-batch (live teachers)."""
        each, saved_s = {}, 0.0
        for name in self.active():
            start = time.perf_counter()
            scorer = self.teachers.scorers[name]
            if scorer.cfg.model.teacher_cache is None:
                # live: the shared rollout cache keeps a teacher's scores of its own batch only
                scores, saved = map(scorer.score, batches), 0.0
            else:  # a built cache: its scores of its own batch, whose rows it was routed
                scores, saved = scorer.scores(step, prompts, batches)
            each[name] = iter(scores)
            self._took(name, start)
            saved_s += saved
        return self._merged(each, batches), saved_s

    def _merged(
        self, each: dict[str, Iterator[TeacherScores]], batches: list[MicroBatch]
    ) -> Iterator[TeacherScores]:
        for micro in batches:
            parts = {}
            for name, scores in each.items():
                start = time.perf_counter()
                parts[name] = next(scores)
                self._took(name, start)
            yield routed_scores(parts, [self.route[b] for b in micro.index_b.tolist()])

    def _took(self, name: str, start: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def metrics(
        self, rollouts: Rollouts, logprobs_B_T: dict[str, torch.Tensor], rewards: list[float]
    ) -> dict[str, float]:
        """Per teacher with a routed row: its share of the step's rows, its seconds, the mean
        reward and the informativeness I of its rows (``teacher/<name>/…``)."""
        out = {}
        g = self.teachers.cfg.rollout.rollouts_per_prompt
        for name in self.active():
            rows = [b for b, routed in enumerate(self.route) if routed == name]
            prefix = f"teacher/{name}/"
            out[prefix + "share"] = len(rows) / len(self.route)
            out[prefix + "seconds"] = self.seconds.get(name, 0.0)
            out[prefix + "reward"] = sum(rewards[b] for b in rows) / len(rows)
            index_b = torch.tensor(rows, device=rollouts.completion_mask_B_T.device)
            own = {key: value[index_b] for key, value in logprobs_B_T.items()}
            info = informativeness_metrics(
                g, rollouts.rows(index_b), own, [rewards[b] for b in rows]
            )
            for key, short in (
                (INFO_KEY, "informativeness"),
                (GROUPS_KEY, "informativeness_groups"),
            ):
                if key in info:
                    out[prefix + short] = info[key]
        return out


def _load_teacher(cfg: RunConfig, pair: ModelPair) -> torch.nn.Module | ServedTeacher:
    """``cfg``'s teacher beside ``pair``: a server reached and its tokenizer checked, or a
    local model loaded as the pair's teacher is (frozen, its own dtype and device) whose
    tokenizer must be the student's."""
    m = cfg.model
    if served_url(m.teacher):
        client = TeacherClient.from_config(m, vocab_size=pair.vocab_size)
        client.check_tokenizer(pair.tokenizer)
        return ServedTeacher(client)
    options = {**load_options(m), "dtype": m.teacher_dtype, "device": m.teacher_device or m.device}
    teacher, tokenizer = load_model(resolve_model_path(m.teacher), **options)
    check_tokenizers_match(tokenizer, pair.tokenizer, m.teacher, m.student)
    teacher.eval()
    return teacher.requires_grad_(False)


def _check_heads(objective: Objective, local: list[torch.nn.Module]) -> None:
    """ConfigError unless the teachers' scores can share one micro-batch: on the fused path a
    micro-batch's hidden states meet one LM head, so full-vocabulary teachers must share it."""
    if not objective.path.fused or objective.teacher_topk or len(local) < 2:
        return
    heads = [m.get_output_embeddings().weight for m in local]
    if any(h.shape != heads[0].shape or not torch.equal(h, heads[0]) for h in heads[1:]):
        raise ConfigError(
            "model.teachers: teachers with different LM heads on the fused path; set "
            "objective.teacher_topk (each teacher reduced to its top k) or objective.path=plain"
        )


def _owner_B(route: list[str], names: list[str], device: torch.device) -> torch.Tensor:
    """Each row's index into ``names``."""
    return torch.tensor([names.index(r) for r in route], device=device)


def _select(parts: list[torch.Tensor], owner_B: torch.Tensor) -> torch.Tensor:
    """Row b of ``parts[owner_B[b]]`` (the tensors share every dimension)."""
    out = parts[0].clone()
    for i, part in enumerate(parts[1:], start=1):
        rows_B = owner_B == i
        out[rows_B] = part[rows_B]
    return out


def routed_rollouts(batches: dict[str, Rollouts], route: list[str], pad_id: int) -> Rollouts:
    """Row b from ``batches[route[b]]``; the completions padded (``pad_id``, masks and
    log-probs 0) to the widest batch. One batch comes back unchanged (bit for bit)."""
    names = list(batches)
    first = batches[names[0]]
    if len(names) == 1:
        return first
    width = max(b.completion_B_T.shape[1] for b in batches.values())
    owner_B = _owner_B(route, names, first.completion_B_T.device)
    changes = {}
    for f in fields(Rollouts):
        if f.name not in _WIDE + _ROWS or getattr(first, f.name) is None:
            continue
        parts = [getattr(batches[n], f.name) for n in names]
        if f.name in _WIDE:
            fill = pad_id if f.name == "completion_B_T" else 0
            parts = [_pad(p, width, fill) for p in parts]
        changes[f.name] = _select(parts, owner_B)
    return replace(first, **changes)


def _pad(t_B_T: torch.Tensor, width: int, fill: float) -> torch.Tensor:
    """``t_B_T`` (``[B, T, …]``) with ``fill`` positions after the last up to ``width``."""
    extra = width - t_B_T.shape[1]
    if not extra:
        return t_B_T
    pad = t_B_T.new_full((t_B_T.shape[0], extra, *t_B_T.shape[2:]), fill)
    return torch.cat([t_B_T, pad], dim=1)


def routed_scores(parts: dict[str, TeacherScores], route: list[str]) -> TeacherScores:
    """The micro-batch's scores with row b from ``parts[route[b]]`` (``route``: the
    micro-batch's rows). One teacher's come back unchanged; hidden states keep the first
    teacher's head (:func:`_check_heads`: the teachers share it); logits are cut to the
    narrowest teacher's padded width (every width ≥ the shared vocabulary)."""
    names = list(parts)
    first = parts[names[0]]
    if len(names) == 1:
        return first
    every = [parts[n] for n in names]
    owner_B = _owner_B(route, names, _device_of(first))
    if isinstance(first, TeacherTopK):  # a cached teacher's batch may be narrower: padded
        width = max(s.ids_B_T_K.shape[1] for s in every)
        k1 = first.folded_B_T_K1.shape[-1]
        fills = {"ids_B_T_K": 0, "folded_B_T_K1": -math.log(k1)}  # masked: a uniform fold
        return TeacherTopK(
            *(
                _select([_pad(getattr(s, t), width, fills.get(t, 0.0)) for s in every], owner_B)
                for t in TeacherTopK.TENSORS
            )
        )
    if isinstance(first, HiddenScores):
        return replace(first, hidden_B_T_H=_select([s.hidden_B_T_H for s in every], owner_B))
    width = min(s.logits_B_T_V.shape[-1] for s in every)
    logits = [s.logits_B_T_V[..., :width] for s in every]
    return replace(first, logits_B_T_V=_select(logits, owner_B))


def _device_of(scores: TeacherScores) -> torch.device:
    if isinstance(scores, TeacherTopK):
        return scores.ids_B_T_K.device
    return (scores.logits_B_T_V if isinstance(scores, LogitScores) else scores.hidden_B_T_H).device
