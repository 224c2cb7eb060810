"""``evaluate(cfg, run_dir)``: everything docs/method.md §8 measures on a trained student →
``eval.json``.

    distillscope eval RUN_DIR

The keys it writes (``eval/accuracy``, ``eval/pass@k``, ``eval/harder_*``, forgetting, sparsity,
lengths, style share, the ``split/*`` records) with their units and meanings are listed in
:mod:`distillscope.metric_keys`.

Accuracy, coverage and the harder variant read only held-out problems
(:func:`distillscope.tasks.evaluation_problems`); each block records how many items it used and
how many of them share an identity with the run's training pool (``split/overlap``), and a
non-zero overlap stops the evaluation with :class:`SplitOverlapError`: it is a bug, never a
result (docs/method.md §7). The skill suite is the exception on purpose: it measures retention
of what the student already knew, so it is drawn from the whole skill space (no training source
draws skill problems).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from distillscope.config import RunConfig, evaluation_key
from distillscope.config.model import served_url
from distillscope.eval.forgetting import STUDENT_DIR, harness_forgetting
from distillscope.eval.generate import Samples, sample_and_score
from distillscope.eval.measures import pass_at_k_curve, update_sparsity
from distillscope.eval.outcomes import ItemOutcomes
from distillscope.eval.samples_file import SampleLog
from distillscope.models import resolve_model_path
from distillscope.models.load import load_model, load_options, load_weights
from distillscope.models.size import parameter_count
from distillscope.rollout.cache import RolloutCache
from distillscope.rollout.prompts import Stream, model_generator
from distillscope.store import checkpoint_dir, write_eval
from distillscope.tasks import (
    Task,
    evaluation_problems,
    make_split,
    resolve_task,
    skill_suite,
    styled,
    training_problems,
)
from distillscope.tasks.language import language_identifier
from distillscope.tasks.split import overlap
from distillscope.tasks.verify import detect_style

PASS_KS = (1, 2, 5, 10, 20, 32, 64)
SKILL_SEED = 44
SPARSITY_TAUS = (1e-6, 1e-8)  # thresholds of eval/sparsity_*_tau*


def _load_student(cfg: RunConfig):
    return load_model(resolve_model_path(cfg.model.student), **load_options(cfg.model))


class SplitOverlapError(RuntimeError):
    """An evaluation item shares its identity with a training problem (a bug in the split)."""


def evaluate(
    cfg: RunConfig,
    run_dir: Path,
    student: torch.nn.Module | None = None,
    on_block: Callable[[str], None] | None = None,
    *,
    untrained: bool = False,
    cache_dir: Path | None = None,
) -> dict:
    """Evaluate the trained student of ``run_dir`` (or ``student``) and write ``eval.json``.

    Also writes ``samples.jsonl`` (:mod:`distillscope.eval.samples_file`) and every sample's
    outcome to ``eval_items.parquet`` (:mod:`distillscope.eval.outcomes`). Accuracy, the harder
    variant and the skill suite draw ``eval.samples_per_item``, ``eval.harder_samples_per_item``
    and ``eval.skill_samples_per_item`` samples per item (1: [P]'s protocol) and record the
    counts as ``eval/accuracy_samples``, ``eval/harder_samples`` and ``eval/skill_samples``.
    Every run of one seed draws the same items and the same evaluation uniforms (common random
    numbers, :mod:`distillscope.eval.generate`). ``on_block(message)`` is
    called as each block starts (progress: loading, accuracy, coverage, harder, skills).
    ``untrained=True`` evaluates the untrained student itself (a study's baseline, same items and
    generator streams as a run's evaluation): no checkpoint is read, forgetting is 0 by
    definition and the sparsity keys, which describe an update, are not written.

    The untrained student's skill scores ("skills before") depend only on
    :func:`evaluation_key`; with ``cache_dir`` (a study's shared cache) they are computed once —
    by the study's baseline — and read by every run with the same key (the same numbers).
    """
    e = cfg.eval
    say = on_block or (lambda message: None)
    task = resolve_task(cfg.task)  # a bad task file fails before loading
    say("loading the student")
    initial, student, tokenizer = _students(cfg, run_dir, student, untrained)
    blocks = EvalBlocks(cfg, student, tokenizer, say)
    train_pool = training_problems(task, cfg.task.eval_fraction)
    held_out = evaluation_problems(
        task, e.eval_seed, max(e.items, e.coverage_items), cfg.task.eval_fraction
    )
    out: dict[str, float] = split_record("split", held_out, train_pool, task.name)
    out["model/teacher_params"] = teacher_params(cfg)
    out["model/student_params"] = params_of(cfg.model.student)
    out.update(routed_params(cfg))
    acc = blocks.draw(
        "accuracy",
        task,
        held_out[: e.items],
        e.samples_per_item,
        e.temperature,
        Stream.EVAL_ACCURACY,
    )
    out.update(_accuracy(acc, e.samples_per_item))
    out.update(_routed_accuracy(cfg, held_out[: e.items], acc))  # model.teachers by column/task
    if e.style:
        out.update(_style_share(acc, e.style_language))
        if untrained:
            out.update(_style_support(blocks, task, held_out[: e.items]))
    if e.coverage_items:
        t, stream = e.coverage_temperature, Stream.EVAL_COVERAGE
        out.update(_coverage(blocks, "coverage", "eval", task, held_out, t, stream))
    if e.harder_task:
        out.update(_harder(blocks, train_pool))
    if e.skill_items:
        out.update(_skills(blocks, initial, untrained, cache_dir))
    if e.forgetting:
        out.update(harness_forgetting(blocks, run_dir, untrained, cache_dir))
    if not untrained:
        out.update(_sparsity(initial, student))
    write_eval(run_dir, out)
    blocks.log.write(run_dir)
    blocks.outcomes.write(run_dir)
    return out


def teacher_params(cfg: RunConfig) -> float:
    """The parameter count of the run's teacher (``model/teacher_params``: what sizes teachers
    for claim 22), from its safetensors headers; NaN when they cannot be read (e.g. a teacher
    stored only as pickled weights) or the run has several teachers (``model.teachers``)."""
    return math.nan if cfg.model.teachers is not None else params_of(cfg.model.teacher)


def routed_params(cfg: RunConfig) -> dict[str, float]:
    """Each routed teacher's parameter count (``teacher/<name>/params``: the report's scope
    names them with it); NaN for a served teacher or one whose weights cannot be read (a
    cache); {} for a run of one teacher (``model/teacher_params``)."""
    teachers = cfg.model.teachers or {}
    return {
        f"teacher/{name}/params": math.nan if served_url(spec) else params_of(spec)
        for name, spec in teachers.items()
    }


def params_of(spec: str) -> float:
    """The parameter count of model ``spec`` (a directory or ``testbed:…``) from its
    safetensors headers: ``model/teacher_params``, ``model/student_params`` (claim 28 sizes the
    students by it); NaN when they cannot be read."""
    try:
        return float(parameter_count(resolve_model_path(spec)))
    except (OSError, ValueError, KeyError):
        return math.nan


def _students(
    cfg: RunConfig, run_dir: Path, student: torch.nn.Module | None, untrained: bool
) -> tuple[torch.nn.Module, torch.nn.Module, PreTrainedTokenizerBase]:
    """The untrained student, the student to evaluate (in eval mode) and their tokenizer.

    The one to evaluate is ``student`` when given, else the checkpoint of ``run_dir`` (loaded
    strictly) — for a LoRA student (``model.lora``) its merged export ``RUN/student/``, as the
    checkpoint holds the unmerged adapters — or the untrained student itself when ``untrained``.
    """
    initial, tokenizer = _load_student(cfg)
    if untrained:
        student = initial
    elif student is None and cfg.model.lora is not None:
        student, _ = load_model(run_dir / STUDENT_DIR, **load_options(cfg.model))
    elif student is None:
        student, _ = _load_student(cfg)
        load_weights(student, checkpoint_dir(run_dir) / "model.safetensors")  # strict
    student.eval()
    return initial, student, tokenizer


@dataclass
class EvalBlocks:
    """What every evaluation block shares: the student, its generator streams, the sample log
    and the per-item outcomes."""

    cfg: RunConfig
    student: torch.nn.Module
    tokenizer: PreTrainedTokenizerBase
    say: Callable[[str], None]
    log: SampleLog = field(init=False)
    outcomes: ItemOutcomes = field(init=False)
    common: dict = field(init=False)  # the sampling settings every block passes on

    def __post_init__(self) -> None:
        task, e = self.cfg.task, self.cfg.eval
        self.log = SampleLog(self.tokenizer, task.prompt_format, e.samples_per_block)
        self.outcomes = ItemOutcomes()
        self.common = dict(
            max_new_tokens=task.max_new_tokens,
            prompt_format=task.prompt_format,
            memory_budget_mb=e.memory_budget_mb,
        )

    def generator(self, stream: Stream) -> torch.Generator:
        """A fresh generator of evaluation stream ``stream`` (apart from training's streams),
        seeded by the run's seed alone: the same uniforms in every cell of a seed."""
        return model_generator(self.student, self.cfg.seed, 0, stream=stream)

    def draw(
        self, block: str, task: Task, problems: list, n: int, temperature: float, stream: int
    ) -> Samples:
        """``n`` scored samples per problem of the student, kept in the sample log as ``block``."""
        self.say(f"{block}: {len(problems)} items × {n} samples")
        res = sample_and_score(
            self.student,
            self.tokenizer,
            task,
            problems,
            n=n,
            temperature=temperature,
            generator=self.generator(stream),
            **self.common,
        )
        self.add(block, task, problems, res)
        return res

    def add(self, block: str, task: Task, problems: list, samples: Samples) -> None:
        """Keep ``block``'s samples in the sample log and its outcomes in the per-item table."""
        self.log.add(block, task, problems, samples)
        self.outcomes.add(block, task, problems, samples)


def _accuracy(acc: Samples, n: int) -> dict[str, float]:
    """Accuracy (the mean over items × ``n`` samples), the protocol's ``n``, mean completion
    length and the share cut at the limit."""
    flat_len = [x for row in acc.lengths for x in row]
    return {
        "eval/accuracy": acc.accuracy(),
        "eval/accuracy_samples": n,
        "eval/len_mean": sum(flat_len) / len(flat_len),
        "eval/truncated_frac": sum(x for row in acc.truncated for x in row) / len(flat_len),
    }


def _routed_accuracy(cfg: RunConfig, problems: list, acc: Samples) -> dict[str, float]:
    """``eval/teacher/<name>/accuracy``: the accuracy over the items routed to each teacher of
    ``model.teachers`` (routes by column or task; a mixture routes training prompts only)."""
    route = cfg.model.route
    if route is None or route.by == "mixture":
        return {}
    by_teacher: dict[str, list[float]] = {}
    for problem, row in zip(problems, acc.scores, strict=True):
        by_teacher.setdefault(route.teacher_of(problem, cfg.task.name, cfg.seed), []).extend(row)
    return {f"eval/teacher/{n}/accuracy": sum(s) / len(s) for n, s in by_teacher.items()}


def _style_share(acc: Samples, language: str | None) -> dict[str, float]:
    """Share of the accuracy block's answers written in the teacher's style: identified as
    ``language`` (``eval.style_language``, chat-format runs; :mod:`distillscope.tasks.language`),
    or in the testbed's alternative glyph style when it is None (``detect_style``)."""
    texts = [t for row in acc.texts for t in row]
    if language is None:
        in_style = [detect_style(t) == "alt" for t in texts]
    else:
        in_style = language_identifier(language).identify(texts)
    return {"eval/teacher_style_share": sum(in_style) / len(in_style)}


def _style_support(blocks: EvalBlocks, task: Task, problems: list) -> dict[str, float]:
    """The untrained student's style share sampling at T = 1 on the accuracy items, with the
    teacher's style flag in its prompt (``eval/style_share_t1``): whether the teacher's style
    lies in its support at all, the regime claim 12 presupposes (docs/method.md §9: "its style
    share when sampling at T = 1 with the flag"). Evaluated once per seed, by the baseline of a
    study with ``eval.style``. A run without the glyph flag (a chat-format teacher instruction)
    samples the student's own prompts."""
    cfg = blocks.cfg
    if cfg.task.teacher_style_flag:
        problems = [replace(p, prompt=styled(p.prompt)) for p in problems]
    n, stream = cfg.eval.samples_per_item, Stream.EVAL_STYLE_SUPPORT
    support = blocks.draw("style_support", task, problems, n, 1.0, stream)
    share = _style_share(support, cfg.eval.style_language)["eval/teacher_style_share"]
    return {"eval/style_share_t1": share}


def _harder(blocks: EvalBlocks, train_pool: list) -> dict[str, float]:
    """The harder variant's split record, accuracy and (with coverage items) pass@k."""
    e = blocks.cfg.eval
    harder = resolve_task(e.harder_task)
    items = evaluation_problems(harder, e.eval_seed, max(e.items, e.coverage_items))
    out: dict[str, float] = split_record("split/harder", items, train_pool, harder.name)
    n = e.harder_samples_per_item
    acc = blocks.draw(
        "harder", harder, items[: e.items], n, e.harder_temperature, Stream.EVAL_HARDER
    )
    out["eval/harder_accuracy"] = acc.accuracy()
    out["eval/harder_samples"] = n
    if e.coverage_items:
        out.update(
            _coverage(
                blocks,
                "harder_coverage",
                "eval/harder",
                harder,
                items,
                e.harder_temperature,
                Stream.EVAL_HARDER_COVERAGE,
            )
        )
    return out


def _skills(
    blocks: EvalBlocks, initial: torch.nn.Module, untrained: bool, cache_dir: Path | None
) -> dict[str, float]:
    """Skill-suite accuracy before and after training, its change (forgetting) and each skill.

    forgetting_pp = 100 · (skills_after − skills_before); 0 for the untrained student.
    """
    e, tokenizer = blocks.cfg.eval, blocks.tokenizer
    n = e.skill_samples_per_item
    blocks.say(f"skills: {e.skill_items} items × {n} samples per skill, before and after")
    before = _skills_before(
        blocks.cfg,
        cache_dir,
        lambda: skill_scores(
            initial,
            tokenizer,
            e.skill_items,
            e.temperature,
            blocks.generator(Stream.EVAL_SKILLS),
            blocks.common,
            n=n,
        ),
    )
    after = (
        before
        if untrained
        else skill_scores(
            blocks.student,
            tokenizer,
            e.skill_items,
            e.temperature,
            blocks.generator(Stream.EVAL_SKILLS),
            blocks.common,
            blocks,
            n=n,
        )
    )
    out = {
        "eval/skills_before": sum(before.values()) / len(before),
        "eval/skills_after": sum(after.values()) / len(after),
        "eval/skill_samples": n,
    }
    out["eval/forgetting_pp"] = 100.0 * (out["eval/skills_after"] - out["eval/skills_before"])
    out.update({f"eval/{name}": v for name, v in after.items()})
    return out


def _sparsity(initial: torch.nn.Module, student: torch.nn.Module) -> dict[str, float]:
    """Update sparsity of the trained student in fp32 and bf16 at each of :data:`SPARSITY_TAUS`."""
    init_state, final_state = initial.state_dict(), student.state_dict()
    out = {}
    for tau in SPARSITY_TAUS:
        out[f"eval/sparsity_fp32_tau{tau:.0e}"] = update_sparsity(init_state, final_state, tau)
        out[f"eval/sparsity_bf16_tau{tau:.0e}"] = update_sparsity(
            init_state, final_state, tau, dtype=torch.bfloat16
        )
    return out


def _skills_before(
    cfg: RunConfig, cache_dir: Path | None, score: Callable[[], dict[str, float]]
) -> dict[str, float]:
    """The untrained student's skill scores: ``score()``, or read from ``cache_dir``."""
    if cache_dir is None:
        return score()

    def make() -> dict[str, torch.Tensor]:
        return {k: torch.tensor(v, dtype=torch.float64) for k, v in score().items()}

    key = {"skills_before": evaluation_key(cfg)}
    stored, _ = RolloutCache(cache_dir).fetch_tensors(key, make)
    return {skill.name: float(stored[skill.name]) for skill in skill_suite()}  # suite order


def split_record(prefix: str, items: list, train_pool: list, name: str) -> dict[str, int]:
    """``{prefix}/eval_items`` and ``{prefix}/overlap`` (0), or :class:`SplitOverlapError`."""
    shared = overlap(items, train_pool)
    if shared:
        raise SplitOverlapError(
            f"{shared} of {len(items)} evaluation items of {name} are in the run's training "
            "pool: the held-out split is broken (a bug; please report it)"
        )
    return {f"{prefix}/eval_items": len(items), f"{prefix}/overlap": 0}


def _coverage(
    blocks: EvalBlocks,
    block: str,
    prefix: str,
    task: Task,
    items: list,
    temperature: float,
    stream: int,
) -> dict[str, float]:
    """``{prefix}/pass@k`` (k of :data:`PASS_KS` up to n) and ``{prefix}/avg@n`` from n =
    ``eval.coverage_samples`` samples on each of the first ``eval.coverage_items`` items."""
    e = blocks.cfg.eval
    n = e.coverage_samples
    samples = blocks.draw(block, task, items[: e.coverage_items], n, temperature, stream)
    curve = pass_at_k_curve(samples.correct_counts, n, [k for k in PASS_KS if k <= n])
    out = {f"{prefix}/pass@{k}": v for k, v in curve.items()}
    out[f"{prefix}/avg@{n}"] = samples.accuracy()
    return out


def skill_scores(
    model, tokenizer, items: int, temperature: float, generator, common, log=None, *, n: int = 1
) -> dict[str, float]:
    """Accuracy per skill of the testbed's skill suite (the forgetting benchmark): the mean
    over its ``items`` items × ``n`` samples, one sampler pass per skill.

    With ``log`` (:class:`EvalBlocks`, or anything with its ``add``) the samples join block
    ``skill/<name>``.
    """
    scores = {}
    for skill in skill_suite():
        problems = make_split(skill, SKILL_SEED, items)
        res = sample_and_score(
            model,
            tokenizer,
            skill,
            problems,
            n=n,
            temperature=temperature,
            generator=generator,
            **common,
        )
        scores[skill.name] = res.accuracy()
        if log is not None:
            log.add(f"skill/{skill.name}", skill, problems, res)
    return scores
