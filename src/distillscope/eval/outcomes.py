"""``eval_items.parquet``: the outcome of every evaluation sample, one row each.

Columns (:data:`~distillscope.store.EVAL_ITEM_COLUMNS`): ``block`` (accuracy, coverage, harder,
harder_coverage, skill/NAME; style_support in a style study's baseline), ``task``, ``item``
(its index in the block, the same items in every run of a study), ``item_id`` (its canonical
identity, :func:`~distillscope.tasks.split.problem_identity`), ``sample`` (0 … n − 1),
``score``, ``length`` (completion tokens) and ``truncated``. A block's number in ``eval.json``
is the mean of its rows' scores (the skill suite: the mean over skills of each skill's mean).
The skill suite's rows are the evaluated student's ("after"); the untrained student's are those
of the study's baseline run. The analysis reads them to separate evaluation noise (binomial,
per item) from training noise.

    from distillscope.store import read_eval_items
    df = read_eval_items(run_dir)
    df[df.block == "accuracy"].groupby("item").score.mean()   # per-item success rates
"""

from __future__ import annotations

from pathlib import Path

from distillscope.eval.generate import Samples
from distillscope.store import EVAL_ITEM_COLUMNS, write_eval_items
from distillscope.tasks import Problem, Task
from distillscope.tasks.split import problem_identity


class ItemOutcomes:
    """Collects every sample's outcome of every block; ``write`` saves them."""

    def __init__(self) -> None:
        self.columns: dict[str, list] = {c: [] for c in EVAL_ITEM_COLUMNS}

    def add(self, block: str, task: Task, problems: list[Problem], samples: Samples) -> None:
        """Add one row per sample of ``problems`` (``samples`` drawn on them, problem-major)."""
        c = self.columns
        for i, problem in enumerate(problems):
            identity = problem_identity(problem)
            n = len(samples.scores[i])
            c["block"] += [block] * n
            c["task"] += [task.name] * n
            c["item"] += [i] * n
            c["item_id"] += [identity] * n
            c["sample"] += list(range(n))
            c["score"] += [float(x) for x in samples.scores[i]]
            c["length"] += [int(x) for x in samples.lengths[i]]
            c["truncated"] += [bool(x) for x in samples.truncated[i]]

    def write(self, run_dir: Path) -> Path:
        """Write ``run_dir/eval_items.parquet`` atomically."""
        return write_eval_items(run_dir, self.columns)
