"""Build the testbed: train the tiny Llama teacher and student from scratch, with fixed seeds.

    distillscope testbed build --out ./my-testbed      # full build (times: BENCHMARKS.md)
    distillscope testbed build --out /tmp/tb --steps-scale 0.002   # a few steps, for tests
    distillscope testbed build --out ./my-testbed --only teacher-small   # one extra teacher

The teacher learns Countdown (3 and 4 operands, both answer styles) and the skill suite; the
student learns the skill suite and only a little Countdown, so that it starts far below the
teacher (the capability gap of docs/method.md §7 and docs/testbed.md). The extra teachers of
:data:`~distillscope.testbed.recipe.EXTRA_TEACHERS` (``teacher-small``) are built the same way
beside them (:func:`build_extra`) and recorded under ``extra`` in ``testbed.json``.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import random
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

import torch
from transformers import LlamaForCausalLM

from distillscope.tasks.base import make_split
from distillscope.tasks.catalogue import COUNTDOWN_3_HARD_TB, COUNTDOWN_3_TB
from distillscope.tasks.skills import skill_suite
from distillscope.tasks.split import (
    EVAL_FRACTION,
    SPLIT_SEED,
    held_out_problems,
    training_problems_from,
)
from distillscope.testbed.hf_sampling import measure, measure_coverage
from distillscope.testbed.recipe import (
    DEFAULT_RECIPE,
    EXTRA_TEACHERS,
    SOURCES,
    ModelSpec,
    Recipe,
    SharpenSpec,
    TrainSpec,
)
from distillscope.testbed.sharpen import sharpen
from distillscope.testbed.tokenizer import build_tokenizer, encode_checked

EVAL_SEED = 43  # held-out Countdown-3 items, as the paper's eval split
EVAL_ITEMS = 200
SKILL_EVAL_SEED = 44
SKILL_EVAL_ITEMS = 100
#: The harder variant, measured as the quick and paper presets evaluate it: accuracy on the
#: ``EVAL_ITEMS`` held-out items (1 sample), pass@10 on the first ``HARDER_COVERAGE_ITEMS`` of
#: them (10 samples each), both at T = 0.5 (``eval.harder_temperature``).
HARDER_TASK = COUNTDOWN_3_HARD_TB
HARDER_COVERAGE_ITEMS = 100
HARDER_SAMPLES = 10
HARDER_TEMPERATURE = 0.5
#: The student's latent capability (:func:`measure_latent`): pass@32 on 100 held-out items at
#: T = 1, the ``paper`` preset's ``opd`` coverage (``coverage_items``, ``coverage_samples``,
#: ``coverage_temperature``), and the style flag's effect at the same T.
LATENT_COVERAGE_ITEMS = 100
LATENT_SAMPLES = 32
LATENT_TEMPERATURE = 1.0


def make_batch(
    examples: list[tuple[str, str]], eos_id: int, bos_id: int, pad_id: int
) -> dict[str, torch.Tensor]:
    """Right-padded ``<bos> prompt completion <eos>`` sequences; labels only on completion + EOS."""
    seqs, labels = [], []
    for prompt, completion in examples:
        p, c = encode_checked(prompt), encode_checked(completion)
        seqs.append([bos_id, *p, *c, eos_id])
        labels.append([-100] * (1 + len(p)) + [*c, eos_id])
    width = max(map(len, seqs))
    ids_B_T = torch.full((len(seqs), width), pad_id)
    labels_B_T = torch.full((len(seqs), width), -100)
    mask_B_T = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, (s, lab) in enumerate(zip(seqs, labels, strict=True)):
        ids_B_T[i, : len(s)] = torch.tensor(s)
        labels_B_T[i, : len(lab)] = torch.tensor(lab)
        mask_B_T[i, : len(s)] = 1
    return {"input_ids": ids_B_T, "labels": labels_B_T, "attention_mask": mask_B_T}


def train_model(
    model: LlamaForCausalLM,
    tokenizer,
    spec: TrainSpec,
    log: Callable[[str], None],
    probe: Callable[[LlamaForCausalLM], str] | None = None,
    probe_every: int = 400,
    sources: dict[str, Callable[[random.Random], tuple[str, str]]] | None = None,
) -> None:
    """Next-token training on the completion tokens of a seeded stream from ``spec.mixture``.

    ``sources`` maps mixture names to example drawers (default :data:`SOURCES`). ``probe``
    (optional) is called every ``probe_every`` steps in eval mode and its text logged, to watch
    accuracy while a long build runs.
    """
    sources = sources or SOURCES
    rng = random.Random(spec.seed)
    torch.manual_seed(spec.seed)
    names = sorted(spec.mixture)
    weights = [spec.mixture[n] for n in names]
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, betas=(0.9, 0.98), weight_decay=0.01)

    def lr_at(step: int) -> float:  # linear warm-up, cosine decay to min_lr_ratio
        if step < spec.warmup:
            return spec.lr * (step + 1) / spec.warmup
        frac = (step - spec.warmup) / max(1, spec.steps - spec.warmup)
        return spec.lr * (
            spec.min_lr_ratio + (1 - spec.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac))
        )

    model.train()
    t0, running = time.time(), 0.0
    for step in range(spec.steps):
        drawn = rng.choices(names, weights, k=spec.batch_size)
        batch = make_batch(
            [sources[s](rng) for s in drawn],
            tokenizer.eos_token_id,
            tokenizer.bos_token_id,
            tokenizer.pad_token_id,
        )
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        running = 0.98 * running + 0.02 * loss.item() if step else loss.item()
        if (step + 1) % 50 == 0 or step + 1 == spec.steps:
            log(f"step {step + 1}/{spec.steps} loss {running:.4f} ({time.time() - t0:.0f}s)")
        if probe is not None and (step + 1) % probe_every == 0:
            model.eval()
            log(f"step {step + 1} probe: {probe(model)}")
            model.train()
    model.eval()


def measure_testbed(
    teacher, student, tokenizer, items: int = EVAL_ITEMS, skill_items: int = SKILL_EVAL_ITEMS
) -> dict[str, dict[str, float]]:
    """The capability-gap numbers (docs/method.md §7) of a testbed: :func:`measure_model` of
    the teacher (with its style numbers) and of the student."""
    return {
        "teacher": measure_model(teacher, tokenizer, items, skill_items, style=True),
        "student": measure_student(student, tokenizer, items, skill_items),
    }


def measure_student(
    model, tokenizer, items: int = EVAL_ITEMS, skill_items: int = SKILL_EVAL_ITEMS
) -> dict:
    """The untrained student's numbers: :func:`measure_model` and :func:`measure_latent`."""
    return {
        **measure_model(model, tokenizer, items, skill_items, style=False),
        **measure_latent(model, tokenizer, items),
    }


def measure_latent(model, tokenizer, items: int = EVAL_ITEMS) -> dict[str, float]:
    """The untrained student's latent capability, as the presets measure a run's: pass@32 and
    avg@32 on the first :data:`LATENT_COVERAGE_ITEMS` held-out ``tb-countdown3`` items at
    :data:`LATENT_TEMPERATURE` (the ``opd`` experiment's coverage), and the share of its answers
    in the teacher's second style when the prompt carries the style flag, one sample per item
    at the same temperature (``alt_style_share_with_flag_t1``)."""
    probs = held_out_problems(COUNTDOWN_3_TB, EVAL_SEED, items)
    t = LATENT_TEMPERATURE
    cov = measure_coverage(
        model,
        tokenizer,
        COUNTDOWN_3_TB,
        probs[:LATENT_COVERAGE_ITEMS],
        samples=LATENT_SAMPLES,
        temperature=t,
    )
    flagged = measure(model, tokenizer, COUNTDOWN_3_TB, probs, temperature=t, with_style_flag=True)
    return {
        **{f"countdown3_{k}": v for k, v in cov.items()},
        "alt_style_share_with_flag_t1": flagged["alt_style"],
        "countdown3_accuracy_style_flag_t1": flagged["accuracy"],
    }


def measure_model(
    model, tokenizer, items: int = EVAL_ITEMS, skill_items: int = SKILL_EVAL_ITEMS, style=False
) -> dict:
    """One testbed model's numbers: Countdown-3 and skill-suite accuracy, 1 sample per held-out
    item at T = 0.5, the harder variant's accuracy and pass@10 (:func:`measure_harder`), and
    with ``style`` its accuracy and alternative-style share under the style flag."""
    cd3 = held_out_problems(COUNTDOWN_3_TB, EVAL_SEED, items)
    out: dict = {"countdown3_accuracy": measure(model, tokenizer, COUNTDOWN_3_TB, cd3)["accuracy"]}
    if style:
        styled_m = measure(model, tokenizer, COUNTDOWN_3_TB, cd3, with_style_flag=True)
        out["countdown3_accuracy_style_flag"] = styled_m["accuracy"]
        out["alt_style_share_with_flag"] = styled_m["alt_style"]
    out.update(measure_harder(model, tokenizer, items))
    scores = {}
    for task in skill_suite():
        probs = make_split(task, SKILL_EVAL_SEED, skill_items)
        scores[task.name] = measure(model, tokenizer, task, probs)["accuracy"]
    out["skills"] = scores
    out["skill_mean"] = sum(scores.values()) / len(scores)
    return out


def measure_harder(model, tokenizer, items: int = EVAL_ITEMS) -> dict[str, float]:
    """The harder variant (:data:`HARDER_TASK`) on held-out items, as the presets evaluate it:
    ``harder_accuracy`` (1 sample per item) and ``harder_pass@10`` / ``harder_avg@10`` (10
    samples on each of the first :data:`HARDER_COVERAGE_ITEMS` of them), at
    :data:`HARDER_TEMPERATURE`."""
    probs = held_out_problems(HARDER_TASK, EVAL_SEED, items)
    t = HARDER_TEMPERATURE
    acc = measure(model, tokenizer, HARDER_TASK, probs, temperature=t)["accuracy"]
    cov = measure_coverage(
        model,
        tokenizer,
        HARDER_TASK,
        probs[:HARDER_COVERAGE_ITEMS],
        samples=HARDER_SAMPLES,
        temperature=t,
    )
    return {"harder_accuracy": acc, **{f"harder_{k}": v for k, v in cov.items()}}


def harder_eval_record(items: int = EVAL_ITEMS) -> dict:
    """How :func:`measure_harder` measured (the ``eval.harder`` entry of ``testbed.json``)."""
    return {
        "task": HARDER_TASK.name,
        "seed": EVAL_SEED,
        "items": items,
        "coverage_items": min(items, HARDER_COVERAGE_ITEMS),
        "samples": HARDER_SAMPLES,
        "temperature": HARDER_TEMPERATURE,
    }


def _save(model: LlamaForCausalLM, tokenizer, path: Path, record: dict) -> None:
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    (path / "build.json").write_text(json.dumps(record) + "\n")


def pretrain_role(out_dir: Path, role: str, recipe: Recipe, steps_scale: float) -> dict:
    """Pretrain one testbed model from scratch and save it with its ``build.json`` record.

    Runs in its own process during a parallel build, so it logs to ``out_dir/<role>.log``.
    """
    spec, train = (
        (recipe.teacher, recipe.teacher_train)
        if role == "teacher"
        else (recipe.student, recipe.student_train)
    )
    return _pretrain(out_dir, role, spec, train, steps_scale)


def _pretrain(
    out_dir: Path, role: str, spec: ModelSpec, train: TrainSpec, steps_scale: float
) -> dict:
    """Pretrain ``spec`` by ``train`` (steps × ``steps_scale``) into ``out_dir/role`` (log:
    ``out_dir/role.log``); returns its ``build.json`` record."""
    tokenizer = build_tokenizer()
    steps = max(1, int(train.steps * steps_scale))
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / f"{role}.log").open("a") as log_file:

        def log(msg: str) -> None:
            log_file.write(f"[{role}] {msg}\n")
            log_file.flush()

        torch.manual_seed(train.seed)
        model = LlamaForCausalLM(spec.llama_config(len(tokenizer), tokenizer))
        scaled = TrainSpec(**{**asdict(train), "steps": steps, "warmup": min(train.warmup, steps)})
        log(f"{sum(p.numel() for p in model.parameters()):,} parameters, {steps} steps")
        t0 = time.time()
        train_model(model, tokenizer, scaled, log)
        record = {"steps": steps, "train_seconds": round(time.time() - t0, 1)}
        _save(model, tokenizer, out_dir / role, record)
    return record


def _pretrain_in_process(out_dir: Path, role: str, recipe: Recipe, steps_scale: float) -> dict:
    torch.set_num_threads(1)  # two single-thread trainings share two cores without contention
    return pretrain_role(out_dir, role, recipe, steps_scale)


def build(
    out_dir: Path,
    recipe: Recipe = DEFAULT_RECIPE,
    steps_scale: float = 1.0,
    log: Callable[[str], None] = print,
    eval_items: int = EVAL_ITEMS,
    skill_items: int = SKILL_EVAL_ITEMS,
    parallel: bool = True,
) -> dict:
    """Train teacher and student, save them as HF directories under ``out_dir``, and measure them.

    The two pretrainings are independent: with ``parallel`` they run at once in two spawned
    single-thread processes (logs in ``out_dir/{teacher,student}.log``). Then the teacher is
    sharpened (expert iteration) and both are measured. Writes ``out_dir/{teacher,student}/``
    (config, safetensors, tokenizer, ``build.json``) and ``out_dir/testbed.json`` (recipe, sizes,
    times, measured accuracies). Resumable: a role whose ``build.json`` records the same number
    of steps is reused, and sharpening resumes after its last finished round (the teacher is
    saved after every round, its ``build.json`` recording ``sharpen_rounds``).
    """
    t_start = time.time()
    tokenizer = build_tokenizer()
    records = _pretrain_both(out_dir, recipe, steps_scale, log, parallel)
    models = {
        r: LlamaForCausalLM.from_pretrained(out_dir / r, use_safetensors=True).eval()
        for r in ("teacher", "student")
    }
    _sharpen_teacher(
        out_dir / "teacher",
        models["teacher"],
        tokenizer,
        (recipe.teacher_sharpen, recipe.teacher_train.mixture),
        records["teacher"],
        steps_scale,
        log,
    )
    _base_student(out_dir / "student", models["student"], tokenizer, recipe, records, steps_scale)
    log("measuring the capability gap")
    measured = measure_testbed(
        models["teacher"], models["student"], tokenizer, eval_items, skill_items
    )
    info = {
        "recipe": asdict(recipe),
        "steps_scale": steps_scale,
        "parameters": {r: sum(p.numel() for p in m.parameters()) for r, m in models.items()},
        "records": records,
        "this_run_wall_seconds": round(time.time() - t_start, 1),
        "torch_threads": torch.get_num_threads(),
        "measured": measured,
        "eval": eval_record(eval_items),
    }
    earlier = _read_info(out_dir)
    if "extra" in earlier:  # teachers built by build_extra are kept
        info["extra"] = earlier["extra"]
    (out_dir / "testbed.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def _base_student(
    model_dir: Path,
    student: LlamaForCausalLM,
    tokenizer,
    recipe: Recipe,
    records: dict[str, dict],
    steps_scale: float,
) -> None:
    """The student's base phase (``recipe.student_base``): continued pretraining of the
    pretrained student in ``model_dir``, saved with ``base_steps`` / ``base_seconds`` in its
    ``build.json``; skipped when that record already holds the scaled step count."""
    spec, record = recipe.student_base, records["student"]
    if spec is None:
        return
    steps = max(1, int(spec.steps * steps_scale))
    if record.get("base_steps") == steps:
        return
    if record.get("base_steps"):
        raise ValueError(
            f"{model_dir}: its base phase ran {record['base_steps']} steps, the recipe asks "
            f"{steps}; rebuild the student into a fresh --out"
        )
    scaled = replace(spec, steps=steps, warmup=min(spec.warmup, steps))
    with (model_dir.parent / "student.log").open("a") as log_file:

        def log(msg: str) -> None:
            log_file.write(f"[student] [base] {msg}\n")
            log_file.flush()

        t0 = time.time()
        train_model(student, tokenizer, scaled, log)
    record.update(base_steps=steps, base_seconds=round(time.time() - t0, 1))
    _save(student, tokenizer, model_dir, record)


def eval_record(eval_items: int = EVAL_ITEMS) -> dict:
    """How :func:`measure_model` measured (the ``eval`` entry of ``testbed.json``)."""
    return {
        "task": COUNTDOWN_3_TB.name,
        "seed": EVAL_SEED,
        "items": eval_items,
        "temperature": 0.5,
        "samples": 1,
        "split": (
            f"held-out partition of tasks/split.py (EVAL_FRACTION {EVAL_FRACTION}, "
            f"SPLIT_SEED {SPLIT_SEED}): distinct items never seen in pretraining or sharpening"
        ),
        "harder": harder_eval_record(eval_items),
        "latent": {
            "items": min(eval_items, LATENT_COVERAGE_ITEMS),
            "samples": LATENT_SAMPLES,
            "temperature": LATENT_TEMPERATURE,
            "style_items": eval_items,
        },
    }


def build_student(
    out_dir: Path,
    recipe: Recipe = DEFAULT_RECIPE,
    steps_scale: float = 1.0,
    log: Callable[[str], None] = print,
    eval_items: int = EVAL_ITEMS,
    skill_items: int = SKILL_EVAL_ITEMS,
) -> dict:
    """Build only the student of the testbed in ``out_dir`` (``testbed build --only student``):
    its pretraining (reused when ``student/build.json`` records it), then its base phase, then
    :func:`measure_student`. Updates the student's entries of ``out_dir/testbed.json`` (recipe,
    parameters, record, measured numbers) and keeps the rest; returns the student's numbers.
    Raises ``FileNotFoundError`` when ``out_dir`` holds no built testbed to update."""
    info = _read_info(out_dir)
    if "measured" not in info:
        raise FileNotFoundError(
            f"{out_dir}/testbed.json has no build record: build the whole testbed first "
            "(`distillscope testbed build --out DIR`)"
        )
    record = _reusable_record(out_dir, "student", recipe.student_train, steps_scale)
    if record is None:
        log(f"pretraining the student (log: {out_dir}/student.log)")
        record = pretrain_role(out_dir, "student", recipe, steps_scale)
    else:
        log(f"student: pretrained earlier in {out_dir / 'student'}, reusing it")
    model = LlamaForCausalLM.from_pretrained(out_dir / "student", use_safetensors=True).eval()
    records = {**info["records"], "student": record}
    log("student: base phase")
    _base_student(out_dir / "student", model, build_tokenizer(), recipe, records, steps_scale)
    log("measuring the student")
    measured = measure_student(model, build_tokenizer(), eval_items, skill_items)
    info.update(recipe=asdict(recipe), records=records, eval=eval_record(eval_items))
    info["parameters"]["student"] = sum(p.numel() for p in model.parameters())
    info["measured"]["student"] = measured
    (out_dir / "testbed.json").write_text(json.dumps(info, indent=2) + "\n")
    return measured


def _read_info(out_dir: Path) -> dict:
    path = out_dir / "testbed.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def build_extra(
    out_dir: Path,
    role: str,
    steps_scale: float = 1.0,
    log: Callable[[str], None] = print,
    eval_items: int = EVAL_ITEMS,
    skill_items: int = SKILL_EVAL_ITEMS,
) -> dict:
    """Train one of :data:`EXTRA_TEACHERS` into ``out_dir/role`` and measure it as the teacher
    is measured (:func:`measure_model`).

    Records it in ``out_dir/testbed.json`` under ``extra[role]`` (recipe, parameters, build
    record with times, measured accuracies, how measured), keeping the file's other entries.
    Resumable like :func:`build`: a finished pretraining is reused and sharpening resumes after
    its last round. A name that is not an extra teacher raises ``ValueError`` naming the ones
    there are.
    """
    if role not in EXTRA_TEACHERS:
        raise ValueError(
            f"unknown extra teacher {role!r}; extra teachers: {sorted(EXTRA_TEACHERS)}"
        )
    extra, t_start, tokenizer = EXTRA_TEACHERS[role], time.time(), build_tokenizer()
    record = _reusable_record(out_dir, role, extra.train, steps_scale)
    if record is not None:
        log(f"{role}: pretrained earlier in {out_dir / role}, reusing it")
    else:
        log(f"pretraining {role} (log: {out_dir}/{role}.log)")
        record = _pretrain(out_dir, role, extra.model, extra.train, steps_scale)
    model = LlamaForCausalLM.from_pretrained(out_dir / role, use_safetensors=True).eval()
    schedule = (extra.sharpen, extra.train.mixture)
    _sharpen_teacher(out_dir / role, model, tokenizer, schedule, record, steps_scale, log)
    log(f"measuring {role}")
    entry = {
        "recipe": asdict(extra),
        "steps_scale": steps_scale,
        "parameters": sum(p.numel() for p in model.parameters()),
        "record": record,
        "measured": measure_model(model, tokenizer, eval_items, skill_items, style=True),
        "eval": eval_record(eval_items),
        "this_run_wall_seconds": round(time.time() - t_start, 1),
        "torch_threads": torch.get_num_threads(),
    }
    info = _read_info(out_dir)
    info.setdefault("extra", {})[role] = entry
    (out_dir / "testbed.json").write_text(json.dumps(info, indent=2) + "\n")
    return entry


def _reusable_record(out_dir: Path, role: str, train: TrainSpec, steps_scale: float) -> dict | None:
    """``out_dir/role``'s ``build.json`` when it records the scaled step count, else None."""
    path = out_dir / role / "build.json"
    record = json.loads(path.read_text()) if path.is_file() else {}
    return record if record.get("steps") == max(1, int(train.steps * steps_scale)) else None


def _pretrain_both(
    out_dir: Path, recipe: Recipe, steps_scale: float, log: Callable[[str], None], parallel: bool
) -> dict[str, dict]:
    """The ``build.json`` record of each role: reused when it records the scaled step count,
    else pretrained now (both at once in spawned processes when ``parallel``)."""
    records: dict[str, dict] = {}
    todo = []
    for role, train in (("teacher", recipe.teacher_train), ("student", recipe.student_train)):
        record = _reusable_record(out_dir, role, train, steps_scale)
        if record is not None:
            log(f"{role}: pretrained earlier in {out_dir / role}, reusing it")
            records[role] = record
        else:
            todo.append(role)
    if todo:
        log(f"pretraining {', '.join(todo)} (logs: {out_dir}/<role>.log)")
    if parallel and len(todo) > 1:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=len(todo), mp_context=ctx) as pool:
            futures = {
                r: pool.submit(_pretrain_in_process, out_dir, r, recipe, steps_scale) for r in todo
            }
            records.update({r: f.result() for r, f in futures.items()})
    else:
        records.update({r: pretrain_role(out_dir, r, recipe, steps_scale) for r in todo})
    return records


def _sharpen_teacher(
    model_dir: Path,
    teacher: LlamaForCausalLM,
    tokenizer,
    schedule: tuple[SharpenSpec | None, dict[str, float]],
    teacher_record: dict,
    steps_scale: float,
    log: Callable[[str], None],
) -> None:
    """Sharpen the pretrained teacher in ``model_dir`` by expert iteration (:func:`sharpen`)
    with ``schedule`` = (sharpening spec, replay mixture), resuming after the rounds
    ``teacher_record`` says are done; the teacher is saved after every round."""
    sharp, replay_mixture = schedule
    tag = f"[{model_dir.name}]"
    done_rounds = teacher_record.get("sharpen_rounds", 0)
    if sharp is None or done_rounds >= sharp.rounds:
        return
    probe_items = training_problems_from(COUNTDOWN_3_TB, EVAL_SEED + 1000, 50)  # not held out

    def probe(model: LlamaForCausalLM) -> str:
        acc = measure(model, tokenizer, COUNTDOWN_3_TB, probe_items)["accuracy"]
        return f"countdown3 accuracy {acc:.2f} (50 probe items, T=0.5)"

    sharp = replace(
        sharp,
        steps=max(1, int(sharp.steps * steps_scale)),
        problems=max(2, int(sharp.problems * steps_scale)),
    )
    if done_rounds:
        log(f"{tag} sharpened earlier for {done_rounds} round(s), resuming")
    t0, seconds_before = time.time(), teacher_record.get("sharpen_seconds", 0.0)

    def round_done(r: int) -> None:
        teacher_record["sharpen_rounds"] = r + 1
        teacher_record["sharpen_seconds"] = round(seconds_before + time.time() - t0, 1)
        _save(teacher, tokenizer, model_dir, teacher_record)

    sharpen(
        teacher,
        tokenizer,
        sharp,
        replay_mixture,
        train_model,
        lambda m: log(f"{tag} {m}"),
        probe=probe,
        start_round=done_rounds,
        round_done=round_done,
    )
