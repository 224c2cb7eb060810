"""What an evaluation will read, checked before the run trains — without torch.

A run evaluates after it trains; an input the evaluation cannot read would otherwise surface
only then, after the GPU hours. :func:`preflight_evaluation` asks, for one run config, what
:func:`~distillscope.eval.evaluate.evaluate` (and an RLVR run's
:func:`~distillscope.eval.rlvr.evaluate_rlvr`) will ask of its tasks: ``max(eval.items,
eval.coverage_items)`` held-out rows of the task (``task.eval_fraction`` of a file task), of the
harder task and of an RLVR task. A generated task draws its held-out items and never runs
short, so only row-backed tasks are counted. (The forgetting suite's data is checked beside it,
by the one preflight: :func:`distillscope.study.preflight.preflight_runs`.)
"""

from __future__ import annotations

from distillscope.config import RunConfig
from distillscope.tasks import evaluation_problems, resolve_task
from distillscope.tasks.pools import file_split
from distillscope.tasks.split import EVAL_FRACTION


def preflight_evaluation(cfg: RunConfig) -> None:
    """One-line ValueError for the first held-out pool too small for ``cfg.eval`` (module doc)."""
    e = cfg.eval
    n = max(e.items, e.coverage_items)
    frac = cfg.task.eval_fraction
    tasks = [cfg.rlvr.task if cfg.rlvr is not None else cfg.task]
    if e.harder_task:
        tasks.append(e.harder_task)
    for spec in tasks:
        task = resolve_task(spec)
        if getattr(task, "problems", None) is not None:  # a file or dataset task: rows counted
            # the harder task of a distillation run is split at its default fraction
            harder = spec == e.harder_task and cfg.rlvr is None
            fraction = EVAL_FRACTION if harder else frac
            try:
                evaluation_problems(task, e.eval_seed, n, fraction)
            except ValueError as err:
                held = len(file_split(task, fraction)[1])
                raise ValueError(f"{err}{_asked(e, held)}") from None


def _asked(e, held: int) -> str:
    """Which settings ask for more than the ``held`` held-out rows, their defaults marked, and
    the values that fit: a small file of one's own meets ``eval.items`` 200 and
    ``eval.coverage_items`` 100 by default. They are refused before the run, not scaled down
    to the file, so that ``eval.items`` means one number of items in every cell of a study."""
    fields = type(e).model_fields
    asking = []
    for name in ("items", "coverage_items"):
        value = getattr(e, name)
        if value > held:
            default = " (the default)" if value == fields[name].default else ""
            asking.append((f"eval.{name}={value}{default}", f"eval.{name}={held}"))
    if not asking or held == 0:
        return ""
    return (
        f" — asked by {' and '.join(a for a, _ in asking)}; to evaluate on all {held}: "
        f"{' '.join(fix for _, fix in asking)}"
    )
