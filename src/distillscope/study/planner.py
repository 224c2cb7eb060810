"""A study's design as the planner reads it: per experiment, seeds, runs, evaluation counts.

    distillscope study plan --preset quick                       # runs, then power per claim
    distillscope study plan --preset paper --noise-from DIR      # noise of another study

``designs(spec)`` gives each experiment (and each RLVR stage, under its own name, with its source
experiment's seeds) its number of seeds, runs and, per evaluation block of ``scorecard.noise``
(``accuracy``, ``harder``, ``coverage``, ``harder_coverage``, ``skill/``), the items and samples
per item its runs evaluate. The power of each claim part under that design is computed in
``scorecard.power`` from the noise components of a finished study (``scorecard.decide.plan_rows``).
Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from distillscope.config import RunConfig
from distillscope.study.spec import StudySpec, expand

#: The skill suite's items per block come from the noise record (its skill count is not in the
#: config): ``None`` keeps the record's.
SKILLS = "skill/"


@dataclass(frozen=True)
class ExperimentDesign:
    """One experiment's design: distinct ``seeds``, ``runs``, and evaluation ``counts``
    (block → (items or None, samples per item))."""

    name: str
    seeds: int
    runs: int
    counts: dict[str, tuple[int | None, int]]


def eval_counts(cfg: RunConfig) -> dict[str, tuple[int | None, int]]:
    """Items × samples per item of each evaluation block a run of ``cfg`` measures."""
    e = cfg.eval
    return {
        "accuracy": (e.items, e.samples_per_item),
        "harder": (e.items, e.harder_samples_per_item),
        "coverage": (e.coverage_items, e.coverage_samples),
        "harder_coverage": (e.coverage_items, e.coverage_samples),
        SKILLS: (None, e.skill_samples_per_item),
    }


def designs(spec: StudySpec) -> dict[str, ExperimentDesign]:
    """Each experiment's and RLVR stage's design, as ``spec`` (its added seeds included) plans
    it; an experiment's evaluation counts are those of its first run."""
    runs = expand(spec)
    out = {}
    for name in dict.fromkeys(r.experiment for r in runs):
        mine = [r for r in runs if r.experiment == name]
        seeds = len({r.config.seed for r in mine})
        out[name] = ExperimentDesign(name, seeds, len(mine), eval_counts(mine[0].config))
    return out
