"""``distillscope teacher-cache build``: a task's teacher rollouts and top-k scores, computed once.

For every seed and step the off-policy runs of a config (or of a study's teacher-written runs)
would take, the builder does what the training loop does before the student's forward
(train/loop.py, steps 1–3): draws the step's prompts, samples the teacher's rollouts and scores
them with the top-k teacher, each micro-batch as a run splits it. The entries go through the
rollout cache's own writer (:class:`~distillscope.teacher.scorer.TeacherScorer` over a
:class:`~distillscope.rollout.RolloutCache`), so a run reading them (``model.teacher_cache``)
finds them under the keys it computes and replays the identical rollouts and scores. The
directory is built under a temporary name and renamed when complete, manifest last: an
interrupted build leaves nothing a run could read.

Cost: one teacher generation and one teacher forward per step and seed, as one live run pays;
each later run reads ``B·T·(12k + 12)`` bytes of scores a step instead (int64 ids, k + 1 folded
fp32 log-probs, two fp32 token log-probs per position) and the step's rollouts.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from distillscope import __version__
from distillscope.config import RunConfig
from distillscope.rollout.prompts import PromptEncoder
from distillscope.tasks import training_problems
from distillscope.teacher.manifest import (
    FORMAT,
    MANIFEST,
    TeacherCacheError,
    cache_identity,
    shard_table,
    teacher_dir,
)
from distillscope.teacher.scorer import TeacherScorer
from distillscope.train.distributed import ONE_PROCESS
from distillscope.train.loop import Sampler, step_problems
from distillscope.train.run_checks import preflight
from distillscope.train.setup import load_models
from distillscope.train.step import Objective


def build_teacher_cache(configs: list[RunConfig], out: Path, source: str) -> dict[str, Any]:
    """Write the teacher cache of ``configs`` (their teacher-written runs) to the new directory
    ``out``; returns its manifest. ``source`` names them in errors.

    The runs must agree on every field of :func:`cache_identity`; their seeds are all covered,
    and steps up to the longest run's ``optim.steps``."""
    if out.exists():
        raise FileExistsError(f"{out} exists; teacher-cache build writes a new directory")
    cfg, seeds, steps = _plan(configs, source)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        t0 = time.perf_counter()
        _fill(cfg, seeds, steps, tmp)
        manifest = {
            "format": FORMAT,
            "identity": cache_identity(cfg),
            "teacher_dir": teacher_dir(cfg.model.teacher),
            "seeds": seeds,
            "steps": steps,
            "k": cfg.objective.teacher_topk,
            "built_s": round(time.perf_counter() - t0, 3),
            "distillscope": __version__,
            "shards": shard_table(tmp),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _plan(configs: list[RunConfig], source: str) -> tuple[RunConfig, list[int], int]:
    """``(one run's config, every seed, the most steps)`` of the teacher-written runs, or
    TeacherCacheError naming what they lack or where two differ."""
    runs = [c for c in configs if c.rollout.policy == "teacher"]
    if not runs:
        raise TeacherCacheError(
            f"{source}: no run writes teacher rollouts (rollout.policy=teacher)"
        )
    first = runs[0]
    if first.model.teachers:
        names = ", ".join(first.model.teachers)
        raise TeacherCacheError(
            f"{source}: model.teachers routes {len(first.model.teachers)} teachers ({names}); "
            "a cache holds one teacher's outputs: build one per teacher (model.teachers=null "
            "model.route=null model.teacher=DIR) and name each cache in model.teachers"
        )
    if not first.objective.teacher_topk:
        raise TeacherCacheError(
            f"{source}: a teacher cache holds top-k scores; set objective.teacher_topk (k ≥ 1)"
        )
    if first.model.teacher_cache is not None:
        raise TeacherCacheError(
            f"{source}: model.teacher_cache is set; a cache is built from model.teacher"
        )
    identity = cache_identity(first)
    for other in runs[1:]:
        theirs = cache_identity(other)
        differ = sorted(k for k in identity if identity[k] != theirs[k])
        if differ:
            raise TeacherCacheError(
                f"{source}: its runs differ in {differ[0]} ({identity[differ[0]]!r} vs "
                f"{theirs[differ[0]]!r}); build one cache per value (override it)"
            )
    return first, sorted({c.seed for c in runs}), max(c.optim.steps for c in runs)


def _fill(cfg: RunConfig, seeds: list[int], steps: int, root: Path) -> None:
    """Every (seed, step)'s rollouts and top-k scores written to ``root``, as a run makes them
    (train/loop.py: prompts, teacher rollouts, micro-batches, the teacher's scores)."""
    task = preflight(cfg)
    pair = load_models(cfg)
    objective = Objective.from_config(cfg.objective, pair.vocab_size)  # a k beyond V fails
    pool = training_problems(task, cfg.task.eval_fraction)
    encoder = PromptEncoder.of_run(task, cfg.task, pair)
    for seed in seeds:
        run = cfg.model_copy(
            update={
                "seed": seed,
                "rollout": cfg.rollout.model_copy(update={"cache_teacher_rollouts": True}),
            }
        )
        torch.manual_seed(seed)
        sampler = Sampler.of(run, pair)
        scorer = TeacherScorer(run, pair.teacher, objective, root)
        for step in range(steps):
            prompts = encoder.batch(step_problems(run, pool, step), run.model.device)
            sample = functools.partial(sampler.sample, prompts, step)
            rollouts, _ = scorer.rollouts(step, prompts, sample)
            micro = ONE_PROCESS.micro_batches(rollouts.to(run.model.device), run.optim.grad_accum)
            scorer.scores(step, prompts, micro)  # computed and written at once
