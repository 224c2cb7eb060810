"""Every static check of a set of runs, before the first one starts (``train``, ``study``,
``study plan``): nothing is written until all of them pass.

- paths, task files, datasets and optional extras (:func:`~distillscope.train.preflight_all`);
- the model pair: one tokenizer, a served teacher's top-k limit, vLLM installed
  (:func:`~distillscope.teacher.checks.preflight_pair`), for each teacher of a run with
  several;
- the evaluation: enough held-out rows for ``eval.items`` / ``eval.coverage_items`` (task,
  harder task, RLVR task) (:func:`~distillscope.eval.preflight.preflight_evaluation`);
- the forgetting suite's datasets cached or reachable
  (:func:`~distillscope.eval.forgetting_data.check_harness_data`).

Each check runs once per distinct set of the fields it reads, so a study of hundreds of runs
over one pair asks each question once. Torch-free: the planning process stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from distillscope.config import RunConfig
from distillscope.eval.forgetting_data import check_harness_data
from distillscope.eval.preflight import preflight_evaluation
from distillscope.teacher.checks import cross_tokenizer_refusal, preflight_pair
from distillscope.teacher.routing import teacher_configs
from distillscope.train.checks import preflight_all


def preflight_runs(configs: list[RunConfig]) -> None:
    """Raise the first check's one-line error (module doc) for ``configs``, else return."""
    preflight_all(configs)
    _once([one for c in configs for one in teacher_configs(c)], _pair_key, preflight_pair)
    _once(configs, _evaluation_key, lambda cfg: preflight_evaluation(cfg, harness=False))
    suites = [c for c in configs if c.eval.forgetting is not None]
    _once(suites, lambda c: c.eval.forgetting.model_dump_json(), _harness)


def _harness(cfg: RunConfig) -> None:
    check_harness_data(cfg.eval.forgetting)


def _once(
    configs: Iterable[RunConfig],
    key: Callable[[RunConfig], str],
    check: Callable[[RunConfig], None],
) -> None:
    seen: set[str] = set()
    for cfg in configs:
        k = key(cfg)
        if k not in seen:
            seen.add(k)
            check(cfg)


def _pair_key(cfg: RunConfig) -> str:
    """What :func:`preflight_pair` reads: the pair, the engine, k, and the objective, which may
    opt in to another tokenizer (with the run-shape checks of that opt-in): a cross-tokenizer
    run of a pair does not vouch for a run of the same pair that does not."""
    m, kind = cfg.model, (cfg.objective.kind, cross_tokenizer_refusal(cfg))
    return repr((m.teacher, m.student, cfg.rollout.engine, cfg.objective.teacher_topk, kind))


def _evaluation_key(cfg: RunConfig) -> str:
    rlvr_task = cfg.rlvr.task if cfg.rlvr is not None else None
    task = cfg.task.model_dump_json(include={"name", "file", "dataset", "fields", "eval_fraction"})
    e = cfg.eval
    return repr((task, rlvr_task, e.items, e.coverage_items, e.harder_task, e.eval_seed))
