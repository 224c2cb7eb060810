"""``evaluate_rlvr``: what an RLVR run changed, measured on held-out problems → ``eval.json``.

Before (the distilled checkpoint the run started from) and after (the RLVR-trained student),
on the same held-out items with the same generator streams, so the two are a paired
comparison: accuracy on the RLVR task (``rlvr/eval_accuracy``, ``…_before``) and, when the
study's harder variant is another task, on it (``rlvr/harder_accuracy``, ``…_before``); and the
training reward at the start and the end of the run (``rlvr/reward_first``,
``rlvr/reward_final``: the mean over the first and last tenth of the steps, from
``metrics.jsonl``). Held-out means disjoint from every training source: the items may be in
neither the RLVR task's training pool nor the distillation task's
(``split/rlvr/<measure>/overlap`` 0, else
:class:`~distillscope.eval.evaluate.SplitOverlapError`). Each measure uses the sampling settings
and generator stream of the distillation run's evaluation of the same task, so "before" repeats
the parent's number: on the testbed, whose RLVR task is the harder variant, ``…_before`` is the
parent's ``eval/harder_accuracy``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from distillscope.config import RunConfig
from distillscope.eval.evaluate import EvalBlocks, split_record
from distillscope.rollout.prompts import Stream
from distillscope.store import read_metrics, write_eval
from distillscope.tasks import evaluation_problems, resolve_task, training_problems

#: Share of the steps averaged for ``rlvr/reward_first`` and ``rlvr/reward_final``.
REWARD_WINDOW = 0.1


def evaluate_rlvr(
    cfg: RunConfig,
    run_dir: Path,
    start: torch.nn.Module,
    student: torch.nn.Module,
    tokenizer,
    on_block: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Evaluate an RLVR run's ``start`` and trained ``student`` and write ``eval.json``."""
    r, e = cfg.rlvr, cfg.eval
    if r is None:
        raise ValueError(f"run {cfg.name} has no rlvr section: it is not an RLVR run")
    say = on_block or (lambda message: None)
    length = r.max_new_tokens or cfg.task.max_new_tokens
    cfg = cfg.model_copy(update={"task": cfg.task.model_copy(update={"max_new_tokens": length})})
    frac = cfg.task.eval_fraction
    trained_on = training_problems(resolve_task(r.task), frac) + training_problems(
        resolve_task(cfg.task), frac
    )
    accuracy = ("eval_accuracy", r.task, e.temperature, e.samples_per_item, Stream.EVAL_ACCURACY)
    harder = (e.harder_temperature, e.harder_samples_per_item, Stream.EVAL_HARDER)
    measures = [accuracy]
    if e.harder_task == r.task:  # the harder variant itself: its settings and draws, so that
        # "before" repeats the parent's eval/harder_accuracy exactly
        measures = [("eval_accuracy", r.task, *harder)]
    elif e.harder_task:
        measures.append(("harder_accuracy", e.harder_task, *harder))
    out: dict[str, float] = {}
    after = EvalBlocks(cfg, student.eval(), tokenizer, say)
    before = EvalBlocks(cfg, start.eval(), tokenizer, say)
    before.outcomes = after.outcomes  # one eval_items.parquet: both students' blocks
    for name, task_name, temperature, n, stream in measures:
        task = resolve_task(task_name)
        # the items and streams of the distillation run's evaluation of the same task
        items = evaluation_problems(task, e.eval_seed, max(e.items, e.coverage_items), frac)
        items = items[: e.items]
        out.update(split_record(f"split/rlvr/{name}", items, trained_on, task.name))
        for suffix, blocks in (("_before", before), ("", after)):
            acc = blocks.draw(f"rlvr/{name}{suffix}", task, items, n, temperature, stream)
            out[f"rlvr/{name}{suffix}"] = acc.accuracy()
    out.update(reward_summary(read_metrics(run_dir)))
    write_eval(run_dir, out)
    after.log.write(run_dir)
    after.outcomes.write(run_dir)
    return out


def reward_summary(rows: list[dict]) -> dict[str, float]:
    """Mean ``rlvr/reward`` over the first and the last tenth of the logged steps (≥ 1 each)."""
    rewards = [float(row["rlvr/reward"]) for row in rows if "rlvr/reward" in row]
    if not rewards:
        return {}
    n = max(1, round(REWARD_WINDOW * len(rewards)))
    return {
        "rlvr/reward_first": sum(rewards[:n]) / n,
        "rlvr/reward_final": sum(rewards[-n:]) / n,
    }
