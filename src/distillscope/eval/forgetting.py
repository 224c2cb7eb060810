"""Forgetting on standard benchmarks: lm-evaluation-harness on the student before and after
training (``eval.forgetting``, docs/method.md §8; extra ``lmeval``).

    pip install 'distillscope[lmeval]'
    distillscope train my-run.yaml eval.forgetting.harness=lm-eval eval.forgetting.limit=20

The harness loads a model directory: ``RUN/student/`` (what training exports) for the trained
student — or, when a caller hands ``evaluate`` a student that was never exported, a temporary
export of it — and ``model.student`` for the untrained one; on ``eval.forgetting.device``
(default ``model.device``) in ``model.dtype``, the chat template applied when
``task.prompt_format`` is ``chat``, and every seed of the harness set to the run's ``seed``.

Each task gets one **primary score** in [0, 1]:

- a multiple-choice task: ``acc`` (the share of items whose gold choice has the highest
  log-likelihood);
- any other task: its first metric in lm-eval's order (its first filter's first metric), e.g.
  IFEval ``prompt_level_strict_acc``, HumanEval ``pass@1``, MMLU-Pro's subjects ``exact_match``
  of the extracted letter; EQ-Bench's ``eqbench``, reported on 0–100 (0 = random answers), is
  divided by 100, so a worse than random model scores below 0;
- a group (``mmlu_pro``): the unweighted mean of its tasks' primary scores. lm-eval's own
  ``mmlu_pro`` aggregate weights subjects by size; with [P]'s 200 items per subject the two agree.

``eval/forgetting_pp`` = 100 · (mean after − mean before), both means unweighted over
``eval.forgetting.tasks`` (keys in :mod:`distillscope.metric_keys`). The untrained student's
scores depend only on :func:`~distillscope.config.evaluation_key`: with a study's cache they are
computed once, by the study's baseline, and read by every run. The harness also keeps every
answer the model gave in ``RUN/.lmeval-<weights digest>_rank0.db`` (lm-eval's request cache), so
an evaluation that is killed and run again asks the model only what it had not answered yet.
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from distillscope.config import HARNESS_MISSING, ForgettingConfig, RunConfig, evaluation_key
from distillscope.eval import forgetting_data
from distillscope.models import resolve_model_path
from distillscope.rollout.cache import RolloutCache

#: Metrics lm-eval reports in percent, and what divides them into [0, 1] scores.
PERCENT_METRICS = {"eqbench": 100.0}
STUDENT_DIR = "student"  # what training exports into the run directory (train.checkpoint)


class HarnessResultError(ValueError):
    """The harness returned no usable score for a task (the message names it and why)."""


class Blocks(Protocol):
    """What the block reads of :class:`~distillscope.eval.evaluate.EvalBlocks`."""

    cfg: RunConfig
    student: torch.nn.Module  # the student evaluated, exported when the run has no student/
    tokenizer: Any
    say: Callable[[str], None]


def harness_forgetting(
    blocks: Blocks, run_dir: Path, untrained: bool, cache_dir: Path | None
) -> dict[str, float]:
    """The ``eval.forgetting`` block: lm-eval scores before and after training, and their change.

    ``untrained`` (a study's baseline): the trained student is the untrained one, so after =
    before and forgetting is 0. ``cache_dir``: the study's shared cache of the scores before.
    """
    cfg, f = blocks.cfg, blocks.cfg.eval.forgetting
    blocks.say(f"forgetting: lm-eval on {', '.join(f.tasks)}, before and after")
    before = _scores_before(cfg, run_dir, cache_dir)
    if untrained:
        return forgetting_metrics(before, before)
    with _trained_dir(run_dir, blocks.student, blocks.tokenizer) as model_dir:
        after = run_harness(cfg, model_dir, run_dir)
    return forgetting_metrics(before, after)


def forgetting_metrics(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The eval.json keys of the harness's scores: means, their change in pp, each task's score.

    ``eval/forgetting_pp`` = 100 · (mean(after) − mean(before)), unweighted over the tasks.
    """
    mean_before, mean_after = sum(before.values()) / len(before), sum(after.values()) / len(after)
    out = {
        "eval/forgetting_before": mean_before,
        "eval/forgetting_after": mean_after,
        "eval/forgetting_pp": 100.0 * (mean_after - mean_before),
    }
    out.update({f"eval/lmeval/{task}": v for task, v in after.items()})
    out.update({f"eval/lmeval_before/{task}": v for task, v in before.items()})
    return out


def _scores_before(cfg: RunConfig, run_dir: Path, cache_dir: Path | None) -> dict[str, float]:
    """The untrained student's scores: the harness on ``model.student``, or from ``cache_dir``."""

    def score() -> dict[str, float]:
        return run_harness(cfg, resolve_model_path(cfg.model.student), run_dir)

    if cache_dir is None:
        return score()

    def make() -> dict[str, torch.Tensor]:
        return {k: torch.tensor(v, dtype=torch.float64) for k, v in score().items()}

    key = {"lmeval_before": evaluation_key(cfg)}
    stored, _ = RolloutCache(cache_dir).fetch_tensors(key, make)
    return {task: float(stored[task]) for task in cfg.eval.forgetting.tasks}  # config order


@contextmanager
def _trained_dir(run_dir: Path, student: torch.nn.Module, tokenizer) -> Iterator[Path]:
    """``RUN/student/``, or a temporary export of ``student`` when the run exported none."""
    exported = run_dir / STUDENT_DIR
    if (exported / "config.json").is_file():
        yield exported
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=run_dir, prefix=".lmeval-student.") as tmp:
        student.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        yield Path(tmp)


def run_harness(cfg: RunConfig, model_dir: Path, run_dir: Path) -> dict[str, float]:
    """The primary score of each of ``eval.forgetting.tasks`` for the model in ``model_dir``.

    One harness model, one ``simple_evaluate`` per distinct limit; the request cache lives in
    ``run_dir`` under the digest of ``model_dir``'s files.
    """
    f = cfg.eval.forgetting
    simple_evaluate, task_manager, hflm = _harness()
    lm = hflm(
        pretrained=str(model_dir),
        device=f.device or cfg.model.device,
        dtype=cfg.model.dtype,
        batch_size=f.batch_size,
        trust_remote_code=cfg.model.trust_remote_code,
    )
    manager = forgetting_data.task_manager(task_manager, f)
    requests = run_dir / f".lmeval-{model_digest(model_dir)[:16]}"
    scores: dict[str, float] = {}
    with _harness_session(f):
        for limit, tasks in _by_limit(f).items():
            results = simple_evaluate(
                model=lm,
                tasks=tasks,
                limit=limit,
                num_fewshot=f.num_fewshot,
                task_manager=manager,
                use_cache=str(requests),
                bootstrap_iters=0,  # no standard errors: one score per task is what is kept
                log_samples=False,
                apply_chat_template=cfg.task.prompt_format == "chat",
                confirm_run_unsafe_code=f.confirm_run_unsafe_code,
                random_seed=cfg.seed,
                numpy_random_seed=cfg.seed,
                torch_random_seed=cfg.seed,
                fewshot_random_seed=cfg.seed,
            )
            scores.update({task: primary_score(results, task) for task in tasks})
    return {task: scores[task] for task in f.tasks}


def primary_score(results: dict[str, Any], name: str) -> float:
    """The primary score of task or group ``name`` in lm-eval's ``results`` (module docstring)."""
    subtasks = results.get("group_subtasks", {}).get(name)
    if subtasks:
        return sum(primary_score(results, t) for t in subtasks) / len(subtasks)
    row = results["results"].get(name)
    if row is None:
        raise HarnessResultError(
            f"lm-eval returned no result for {name!r} (a tag? list its tasks or a group instead)"
        )
    metrics = [k for k in row if "," in k and "_stderr," not in k]
    mc = results["configs"].get(name, {}).get("output_type") == "multiple_choice"
    key = "acc,none" if mc and "acc,none" in row else metrics[0] if metrics else None
    if key is None:
        raise HarnessResultError(f"lm-eval task {name!r} reported no metric")
    metric = key.split(",")[0]
    if results.get("higher_is_better", {}).get(name, {}).get(metric) is False:
        raise HarnessResultError(
            f"lm-eval task {name!r} scores {metric}, where lower is better; forgetting averages "
            "scores where higher is better: choose another task"
        )
    score = float(row[key]) / PERCENT_METRICS.get(metric, 1.0)
    if score > 1.0 or (score < 0.0 and metric not in PERCENT_METRICS):
        raise HarnessResultError(
            f"lm-eval task {name!r} reported {metric} = {row[key]}, not a score in [0, 1]"
        )
    return score


def model_digest(model_dir: Path) -> str:
    """sha256 over the names and bytes of ``model_dir``'s files (weights, config, tokenizer)."""
    h = hashlib.sha256()
    for path in sorted(p for p in Path(model_dir).iterdir() if p.is_file()):
        h.update(path.name.encode() + b"\0")
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 24), b""):
                h.update(chunk)
    return h.hexdigest()


def _by_limit(f: ForgettingConfig) -> dict[int | None, list[str]]:
    """The tasks grouped by their limit (lm-eval takes one limit per call), in config order."""
    groups: dict[int | None, list[str]] = {}
    for task in f.tasks:
        groups.setdefault(f.limit_of(task), []).append(task)
    return groups


def _harness():
    """``(simple_evaluate, TaskManager, HFLM)``, or the one line naming the extra to install."""
    try:
        from lm_eval import simple_evaluate
        from lm_eval.models.huggingface import HFLM
        from lm_eval.tasks import TaskManager
    except ImportError as err:
        raise ImportError(HARNESS_MISSING) from err
    return simple_evaluate, TaskManager, HFLM


@contextmanager
def _harness_session(f: ForgettingConfig) -> Iterator[None]:
    """Keep the caller's global random state (``simple_evaluate`` seeds Python's, NumPy's and
    torch's generators) and, for unsafe tasks, set the flag Hugging Face's code_eval reads."""
    py_state, np_state = random.getstate(), np.random.get_state()
    flag = os.environ.get("HF_ALLOW_CODE_EVAL")
    if f.confirm_run_unsafe_code:
        os.environ["HF_ALLOW_CODE_EVAL"] = "1"
    try:
        with torch.random.fork_rng(devices=[]):  # sampling on CUDA draws from its own streams
            yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
        if flag is None:
            os.environ.pop("HF_ALLOW_CODE_EVAL", None)
        else:
            os.environ["HF_ALLOW_CODE_EVAL"] = flag
