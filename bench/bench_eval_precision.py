"""Evaluation precision: seconds per sample and variance removed per evaluation second, for the
accuracy block, the harder variant and the skill suite; the samples per item the testbed
presets use follow from it.

    python bench/bench_eval_precision.py [--samples 1 2 4 8 16] [--steps 150]

Students: the shipped testbed student (untrained) and a quick-trained one (the quick preset's
first on-policy forward-KL run, ``--steps`` steps). For each block and n in ``--samples`` the
block's items are sampled n times each in one sampler pass (the run's generator streams). Cost is
CPU seconds of this process on one torch thread (``time.process_time``): on an idle core that is
the wall time, and unlike wall time it does not grow when other processes share the machine.

Evaluation noise of a block score with n samples per item, at the observed per-item rates
(pooled over every n, m draws per item):

    V(n) = (1/S²) Σ_s (1/N_s²) Σ_i p̂_si (1 − p̂_si) · m/(m − 1) / n

(S skills of N_s items; S = 1 for accuracy and the harder variant; binomial per item, so item
heterogeneity does not count as noise: every run reads the same items). A seed's block score
varies by σ²_t + V(n), σ²_t the training noise; the seeds a contrast needs scale with it and
their cost with the run's seconds T(n) = T_run + t(n) − t(1) (T_run: training plus the old
one-sample evaluation plus the other blocks' extra seconds at their chosen n, t(n) the block's
seconds at n). The default is the smallest n of the grid past which doubling n lowers the product
(σ²_t + V(n)) · T(n) by less than 10%, chosen block by block until no choice changes; σ²_t is the
within-cell variance across seeds of the committed ``paper`` record's main grid minus V(1) of the
trained student (at least 0). Prints Markdown tables; then both evaluations of the trained
student in full, at one sample per item and at the chosen defaults.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from distillscope.eval.evaluate import SKILL_SEED, EvalBlocks, evaluate
from distillscope.models import resolve_model_path
from distillscope.models.load import load_model
from distillscope.rollout.prompts import Stream
from distillscope.study.spec import expand, load_spec
from distillscope.tasks import evaluation_problems, make_split, resolve_task, skill_suite
from distillscope.train.loop import distill

RECORD = Path(__file__).resolve().parent / "records" / "paper-2026-12-02" / "results.parquet"
#: Block → (its eval.json column in the record, the config field of its samples per item).
COLUMNS = {
    "accuracy": ("eval/accuracy", "samples_per_item"),
    "harder": ("eval/harder_accuracy", "harder_samples_per_item"),
    "skills": ("eval/skills_after", "skill_samples_per_item"),
}
GAIN = 0.10  # a doubling of n must lower (σ²_t + V) · T by at least this share


@dataclass
class Block:
    name: str
    parts: list  # (task, problems) pairs: one for accuracy and the harder variant, one a skill
    temperature: float
    stream: Stream


def blocks_of(cfg) -> list[Block]:
    """The accuracy, harder and skill blocks of ``cfg``'s evaluation, on its items."""
    e, frac = cfg.eval, cfg.task.eval_fraction
    task, harder = resolve_task(cfg.task), resolve_task(e.harder_task)
    pool = max(e.items, e.coverage_items)
    return [
        Block(
            "accuracy",
            [(task, evaluation_problems(task, e.eval_seed, pool, frac)[: e.items])],
            e.temperature,
            Stream.EVAL_ACCURACY,
        ),
        Block(
            "harder",
            [(harder, evaluation_problems(harder, e.eval_seed, pool)[: e.items])],
            e.harder_temperature,
            Stream.EVAL_HARDER,
        ),
        Block(
            "skills",
            [(s, make_split(s, SKILL_SEED, e.skill_items)) for s in skill_suite()],
            e.temperature,
            Stream.EVAL_SKILLS,
        ),
    ]


def measure(evaluator: EvalBlocks, block: Block, grid: list[int]) -> tuple[dict, list]:
    """Seconds of the block at each n, and the pooled scores ``[part][item] → list``."""
    seconds, pooled = {}, [[[] for _ in problems] for _, problems in block.parts]
    for n in grid:
        t0 = time.process_time()
        for p, (task, problems) in enumerate(block.parts):
            res = evaluator.draw(block.name, task, problems, n, block.temperature, block.stream)
            for i, row in enumerate(res.scores):
                pooled[p][i] += row
        seconds[n] = time.process_time() - t0
    return seconds, pooled


def eval_variance(pooled: list) -> float:
    """V(1): the block score's evaluation variance at one sample per item (formula above)."""
    total = 0.0
    for items in pooled:
        v = []
        for scores in items:
            m, p = len(scores), sum(scores) / len(scores)
            v.append(p * (1 - p) * m / (m - 1))
        total += sum(v) / len(v) ** 2
    return total / len(pooled) ** 2


def choose(v1: float, var_t: float, t_run: float, seconds: dict) -> int:
    """The smallest n past which doubling n gains less than :data:`GAIN` in (σ²_t + V) · T."""
    grid = sorted(seconds)

    def cost(n: int) -> float:
        return (var_t + v1 / n) * (t_run + seconds[n] - seconds[grid[0]])

    for n, doubled in zip(grid, grid[1:], strict=False):
        if doubled != 2 * n or cost(doubled) > (1 - GAIN) * cost(n):
            return n
    return grid[-1]


def choose_jointly(measured: dict, t_run: float) -> dict[str, int]:
    """:func:`choose` block by block, each with the others' extra seconds at their current
    choice added to ``t_run``, until no choice changes. ``measured[block]`` is
    ``(within-cell variance, V(1), σ²_t, seconds by n)``."""
    chosen = {b: min(m[3]) for b, m in measured.items()}
    while True:
        before = dict(chosen)
        for b, (_, v1, var_t, _) in measured.items():
            others = sum(m[3][chosen[o]] - m[3][min(m[3])] for o, m in measured.items() if o != b)
            chosen[b] = choose(v1, var_t, t_run + others, measured[b][3])
        if chosen == before:
            return chosen


def training_variance(record: Path) -> dict[str, float]:
    """Within-cell variance across seeds of each block's column in the record's main grid."""
    df = pd.read_parquet(record)
    main = df[(df["experiment"] == "main") & (df["status"] == "done")]
    cells = main.groupby(["rollout.policy", "objective.kind", "optim.lr"])
    return {b: float(cells[col].var().mean()) for b, (col, _) in COLUMNS.items()}


def timed_eval(cfg, student, chosen: dict[str, int]) -> float:
    """Seconds of one full evaluation of ``student`` with ``chosen`` samples per item."""
    update = {COLUMNS[b][1]: n for b, n in chosen.items()}
    cfg = cfg.model_copy(update={"eval": cfg.eval.model_copy(update=update)})
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        evaluate(cfg, Path(tmp), student)
        return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--record", type=Path, default=RECORD)
    args = ap.parse_args()
    grid = sorted(args.samples)
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    run = next(
        r
        for r in expand(load_spec("quick"))
        if r.config.rollout.policy == "student" and r.config.objective.kind == "forward_kl"
    )
    cfg = run.config.model_copy(
        update={"optim": run.config.optim.model_copy(update={"steps": args.steps})}
    )
    for b in COLUMNS:  # measured from the one-sample protocol, whatever the preset says
        cfg = cfg.model_copy(update={"eval": cfg.eval.model_copy(update={COLUMNS[b][1]: 1})})
    untrained, tokenizer = load_model(resolve_model_path(cfg.model.student))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        trained = distill(cfg, Path(tmp)).eval()
        t_train = time.process_time() - t0
    t_eval1 = timed_eval(cfg, trained, {})
    var_within = training_variance(args.record)
    print(
        "| student | block | n | seconds | ms / sample | eval SD (pp) | "
        "variance removed vs n = 1 (pp²) | removed per extra second (pp²/s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    measured = {}
    for label, model in (("testbed (untrained)", untrained.eval()), ("quick-trained", trained)):
        evaluator = EvalBlocks(cfg, model, tokenizer, lambda message: None)
        for block in blocks_of(cfg):
            seconds, pooled = measure(evaluator, block, grid)
            v1 = eval_variance(pooled)
            rows = sum(len(problems) for _, problems in block.parts)
            for n in grid:
                removed = 1e4 * v1 * (1 - 1 / n)
                extra = seconds[n] - seconds[grid[0]]
                rate = f"{removed / extra:.3f}" if n > grid[0] and extra > 0 else "–"
                print(
                    f"| {label} | {block.name} | {n} | {seconds[n]:.2f} | "
                    f"{1e3 * seconds[n] / (rows * n):.2f} | {100 * (v1 / n) ** 0.5:.2f} | "
                    f"{removed:.2f} | {rate} |"
                )
            if label == "quick-trained":
                var_t = max(0.0, var_within[block.name] - v1)
                measured[block.name] = (var_within[block.name], v1, var_t, seconds)
    chosen = choose_jointly(measured, t_train + t_eval1)
    print(
        "\n| block | record's within-cell SD (pp) | eval SD at n = 1 (pp) | training SD (pp) "
        "| chosen samples per item | (σ²_t + V) · T, chosen / one sample |"
    )
    print("|---|---|---|---|---|---|")
    extra = {b: m[3][chosen[b]] - m[3][min(m[3])] for b, m in measured.items()}
    t_chosen_run = t_train + t_eval1 + sum(extra.values())
    for name, (within, v1, var_t, _) in measured.items():
        ratio = (var_t + v1 / chosen[name]) * t_chosen_run / ((var_t + v1) * (t_train + t_eval1))
        print(
            f"| {name} | {100 * within**0.5:.2f} | {100 * v1**0.5:.2f} | "
            f"{100 * var_t**0.5:.2f} | {chosen[name]} | {ratio:.2f} |"
        )
    t_chosen = timed_eval(cfg, trained, chosen)
    print(
        f"\nFull evaluation of the quick-trained student ({args.steps} steps, trained in "
        f"{t_train:.1f} s): {t_eval1:.1f} s at one sample per item, {t_chosen:.1f} s at the "
        f"chosen defaults ({', '.join(f'{COLUMNS[b][1]}={n}' for b, n in chosen.items())}). "
        f"CPU seconds, one torch thread; 1-min load average at the start {load:.1f}."
    )


if __name__ == "__main__":
    main()
