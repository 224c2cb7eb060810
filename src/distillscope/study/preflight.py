"""Every static check of a set of runs, before the first one starts: nothing is written until
all of them pass. The CLI's one preflight (:func:`distillscope.cli.inputs.preflight`) calls
:func:`preflight_runs` for every command (``train``, ``eval``, ``study``, ``study plan``,
``teacher-cache build``).

- models, served teachers, task files, datasets, routes and optional extras
  (:func:`~distillscope.train.checks.preflight_all`);
- the model pair: one tokenizer, a served teacher's top-k limit, vLLM installed
  (:func:`~distillscope.teacher.checks.preflight_pair`), for each teacher of a run with
  several;
- the evaluation: enough held-out rows for ``eval.items`` / ``eval.coverage_items`` (task,
  harder task, RLVR task) (:func:`~distillscope.eval.preflight.preflight_evaluation`);
- the forgetting suite's datasets cached or reachable
  (:func:`~distillscope.eval.forgetting_data.check_harness_data`).

A trained run (``eval``) is checked for what its evaluation reads only: its tasks
(:func:`~distillscope.train.checks.check_tasks`), the evaluation's extras, the held-out rows and
the suite's data — its weights exist, so the models and the pair are not asked for.

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
from distillscope.train.checks import check_tasks, evaluation_extras, preflight_all


def preflight_runs(configs: list[RunConfig], trained: bool = False) -> None:
    """Raise the first check's one-line error (module doc) for ``configs``, else return;
    ``trained``: the runs' weights exist (``eval``), only their evaluation's inputs are checked."""
    if trained:
        _once(configs, lambda c: c.model_dump_json(include={"task", "eval", "rlvr"}), _evaluated)
    else:
        preflight_all(configs)
        _once([one for c in configs for one in teacher_configs(c)], _pair_key, preflight_pair)
    _once(configs, _evaluation_key, preflight_evaluation)
    suites = [c for c in configs if c.eval.forgetting is not None]
    _once(suites, lambda c: c.eval.forgetting.model_dump_json(), _harness)


def _evaluated(cfg: RunConfig) -> None:
    """What a trained run's evaluation reads besides its rows: its tasks and extras."""
    check_tasks(cfg)
    evaluation_extras(cfg)


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
