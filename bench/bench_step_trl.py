"""One distillation step, distillscope against TRL's stable ``DistillationTrainer``, two shapes.

    python bench/bench_step_trl.py [--shapes testbed real] [--kinds forward_kl reverse_kl]
        [--rounds 8] [--steps 8] [--real-rounds 2] [--real-steps 2] [--layers 4]

Shapes: ``testbed`` is the shipped testbed pair (``testbed:teacher`` → ``testbed:student``,
tb-countdown3, 16 prompts × 24 new tokens, V = 54); ``real`` is the random-weight pair of
``bench/random_models.py --real-shape LAYERS`` (a student with Qwen2.5-0.5B's layers, a teacher
with Qwen2.5-3B's, 2.3× wider, V = 151,936; Countdown-3 chat prompts, 4 prompts × 64 new
tokens; ``--layers`` of each model, written once under ``--pairs``). Both sides train on-policy
(the student writes every completion), fp32, AdamW lr 1e-4 constant, clip 1.0, token-mean
reduction, one temperature 1.0 for sampling and for both loss distributions; ``forward_kl`` is
TRL ``beta=0.0``, ``reverse_kl`` is ``beta=1.0``. TRL's defaults differ (reverse KL, lr 1e-6,
512 tokens, bf16 and gradient checkpointing on even on CPU), so its config sets each of these.

Each (shape, divergence, side, round) is its own process: it loads the models, runs one warm-up
step and ``steps`` timed steps on the same prompts as the other side (``select_problems`` of
each step), and reports every timed step's wall time and its split into phases. Rounds
alternate which side runs first. Our step is ``distill``'s, timed between the loop's
``on_step`` callbacks (phases from ``metrics.jsonl``, the loss timed around
``objective_loss``); TRL's is ``training_step`` + clip + ``optimizer.step`` by hand, as
``Trainer.train`` does it without the dataloader and logging (phases by wrapping
``_generate_and_score_completions``, the teacher's ``_get_last_hidden_state``,
``_chunked_divergence_loss`` and its backward). The last column of the summary divides TRL's
step by ours without its loss: the most any loss could give, with both models' passes as they
are. Memory comes from one more process per side and shape (forward KL, one step after the
warm-up step), whose allocator maps every block of 64 kB or more (``MALLOC_MMAP_THRESHOLD_``),
so that freed memory leaves the resident set: the step's peak RSS (VmHWM) above the RSS after
the warm-up step — the optimizer state allocated, every weight paged in — and the process's
peak. Before timing, each shape's first TRL process computes both losses on the same batch and
hidden states; the bench stops unless they agree to 1e-5.

Prints the summary and the per-phase tables (Markdown), then the checks and the differences
between the two sides that no setting removes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import torch

from distillscope.config import load_run_config
from distillscope.rollout.prompts import PromptEncoder, Stream, model_generator, select_problems
from distillscope.rollout.rollouts import SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.store import read_metrics
from distillscope.tasks import resolve_task, training_problems
from distillscope.train.loop import distill
from distillscope.train.setup import load_models, make_policy
from distillscope.train.step import Objective, objective_loss

SEED, LR = 42, 1e-4
BETA = {"forward_kl": 0.0, "reverse_kl": 1.0}  # TRL's generalised-JSD β of each divergence
PHASES = (
    "generation",
    "teacher forward",
    "student forward + backward (body)",
    "loss: LM heads + divergence, both passes",
    "optimizer + rest",
)
SIDES = ("ours", "trl")
TARGETS = {"testbed": (2.0, None), "real": (1.3, 0.5)}  # speed-up ≥, memory ratio ≤ (issue 24)


class Shape(NamedTuple):
    """What one shape trains: models, task, prompts per step and new tokens."""

    name: str
    overrides: tuple[str, ...]
    prompts: int
    new_tokens: int


def shape_of(name: str, pairs: Path, layers: int) -> Shape:
    if name == "testbed":
        return Shape(name, ("task.name=tb-countdown3",), 16, 24)
    pair = pairs / f"qwen2.5-shape-L{layers}"
    models = (f"model.teacher={pair / 'teacher'}", f"model.student={pair / 'student'}")
    return Shape(name, (*models, "task.name=countdown3", "task.prompt_format=chat"), 4, 64)


def ours_config(shape: Shape, kind: str, steps: int):
    """Our run config doing TRL's work (see the module docstring)."""
    return load_run_config(
        None,
        [
            *shape.overrides,
            f"task.max_new_tokens={shape.new_tokens}",
            f"rollout.prompts_per_step={shape.prompts}",
            "rollout.policy=student",
            "rollout.student_temperature=1.0",
            f"objective.kind={kind}",
            "objective.reduction=token_mean",
            "objective.student_temperature=1.0",
            "objective.teacher_temperature=1.0",
            f"optim.steps={steps}",
            "optim.warmup_steps=0",
            f"optim.lr={LR}",
            "optim.grad_clip=1.0",
            "checkpoint_every=0",
            f"seed={SEED}",
        ],
    )


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _timed(fn, phase_s: dict, key: str):
    """``fn`` adding its wall seconds to ``phase_s[key]``."""

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        phase_s[key] += time.perf_counter() - t0
        return out

    return timed


def ours_worker(shape: Shape, kind: str, steps: int) -> dict:
    """``distill`` for 1 + ``steps`` steps: every timed step's wall time and phases, and the peak
    RSS of the timed steps above the RSS after the warm-up step (see :func:`memory_run`)."""
    import distillscope.train.loop as loop

    ticks, loss_s, marks = [], defaultdict(float), {}
    loop.objective_loss = _timed(loop.objective_loss, loss_s, "loss")

    def on_step(step: int, row: dict) -> None:
        ticks.append((time.perf_counter(), loss_s["loss"]))
        if step == 0:  # warm-up done: the optimizer state exists, every weight is paged in
            marks["warm_peak"] = _status_mb("VmHWM")
            Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
            marks["trained"] = _status_mb("VmRSS")
        if step == steps:  # before the final checkpoint and export
            marks["peak"] = _status_mb("VmHWM")

    with tempfile.TemporaryDirectory() as tmp:
        distill(ours_config(shape, kind, steps + 1), Path(tmp), on_step=on_step)
        rows = read_metrics(Path(tmp))[1:]
    phases = []
    for (t0, l0), (t1, l1), r in zip(ticks, ticks[1:], rows, strict=False):
        student = r["time/student_forward_backward"] - (l1 - l0)
        split = [r["time/rollout"], r["time/teacher_forward"], student, l1 - l0]
        phases.append([*split, t1 - t0 - sum(split)])
    return {
        "step_s": [t1 - t0 for (t0, _), (t1, _) in zip(ticks, ticks[1:], strict=False)],
        "phases_s": phases,
        "tokens": statistics.mean(r["rollout/len_mean"] for r in rows) * shape.prompts,
        "step_mb": marks["peak"] - marks["trained"],
        "peak_mb": max(marks["peak"], marks["warm_peak"]),
    }


class TrlRun:
    """A ``DistillationTrainer`` on the pair of ``shape``, stepped by hand."""

    def __init__(self, shape: Shape, kind: str, out: Path):
        from datasets import Dataset
        from trl import DistillationConfig, DistillationTrainer

        self.shape, self.cfg = shape, ours_config(shape, kind, 1)
        self.pair = load_models(self.cfg)
        task = resolve_task(self.cfg.task.name, self.cfg.task.file)
        self.pool = training_problems(task, self.cfg.task.eval_fraction)
        self.task = task
        self.encoder = PromptEncoder(task, self.pair.tokenizer, self.cfg.task.prompt_format)
        args = DistillationConfig(
            output_dir=str(out),
            beta=BETA[kind],
            temperature=1.0,
            max_completion_length=shape.new_tokens,
            learning_rate=LR,
            optim="adamw_torch",
            lr_scheduler_type="constant",
            max_grad_norm=1.0,
            gradient_checkpointing=False,
            bf16=False,
            report_to="none",
            use_cpu=True,
            per_device_train_batch_size=shape.prompts,
            seed=SEED,
        )
        self.trainer = DistillationTrainer(
            model=self.pair.student,
            teacher_model=self.pair.teacher,
            args=args,
            train_dataset=Dataset.from_dict({"prompt": self.prompts(0)}),
            processing_class=self.pair.tokenizer,
        )
        self.optimizer = self.trainer.create_optimizer()
        self.trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() otherwise
        self.phase_s: dict[str, float] = defaultdict(float)
        self._wrap()

    def prompts(self, step: int) -> list:
        """The step's prompts as a TRL dataset holds them: text, or chat messages."""
        problems = select_problems(self.pool, self.shape.prompts, SEED, step)
        if self.cfg.task.prompt_format == "chat":
            return [self.task.chat_messages(p) for p in problems]
        return self.encoder.texts(problems, "student")

    def _wrap(self) -> None:
        """Time generation, the teacher's forward and the loss (both passes) inside
        ``training_step``."""
        from trl.kernels.chunked_divergence import ChunkedDivergenceFunction
        from trl.trainer import distillation_trainer

        trainer, teacher = self.trainer, self.pair.teacher
        generate, hidden = trainer._generate_and_score_completions, trainer._get_last_hidden_state
        trainer._generate_and_score_completions = _timed(generate, self.phase_s, "generation")

        def timed_hidden(model, *args, **kwargs):
            t0 = time.perf_counter()
            out = hidden(model, *args, **kwargs)
            if model is teacher:
                self.phase_s["teacher"] += time.perf_counter() - t0
            return out

        trainer._get_last_hidden_state = timed_hidden
        loss = distillation_trainer._chunked_divergence_loss
        distillation_trainer._chunked_divergence_loss = _timed(loss, self.phase_s, "loss")
        backward = ChunkedDivergenceFunction.backward
        ChunkedDivergenceFunction.backward = staticmethod(_timed(backward, self.phase_s, "loss"))

    def step(self, step: int) -> tuple[float, list[float]]:
        """One step: wall seconds and the phases."""
        model = self.trainer.model
        self.phase_s.clear()  # the wrappers add into this very dict
        t0 = time.perf_counter()
        self.trainer.training_step(model, [{"prompt": p} for p in self.prompts(step)], None)
        t1 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        t2 = time.perf_counter()
        gen, teacher, loss = (self.phase_s[k] for k in ("generation", "teacher", "loss"))
        return t2 - t0, [gen, teacher, t1 - t0 - gen - teacher - loss, loss, t2 - t1]

    def same_prompt_ids(self) -> bool:
        """Whether TRL tokenises the step's prompts to our encoder's ids."""
        problems = select_problems(self.pool, self.shape.prompts, SEED, 0)
        ids_B_P, mask_B_P = self.encoder.encode(problems, "student")
        ours = [row[m.bool()].tolist() for row, m in zip(ids_B_P, mask_B_P, strict=True)]
        return self.trainer._tokenize_prompts(self.prompts(0))[0] == ours


def trl_worker(shape: Shape, kind: str, steps: int, check: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run = TrlRun(shape, kind, Path(tmp))
        checks = {"same_prompt_ids": run.same_prompt_ids(), **losses(run)} if check else {}
        run.step(0)  # warm-up: the optimizer state exists, every weight is paged in
        warm_peak = _status_mb("VmHWM")
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        trained = _status_mb("VmRSS")
        timed = [run.step(1 + k) for k in range(steps)]
        peak = _status_mb("VmHWM")
    lengths = run.trainer._metrics["train"]["completions/mean_length"][1:]
    return {
        "step_s": [s for s, _ in timed],
        "phases_s": [p for _, p in timed],
        "tokens": statistics.mean(lengths) * shape.prompts,
        "step_mb": peak - trained,
        "peak_mb": max(peak, warm_peak),
        **checks,
    }


@torch.no_grad()
def losses(run: TrlRun) -> dict[str, float]:
    """Our loss and TRL's ``_chunked_divergence_loss`` on one batch and its hidden states."""
    from trl.trainer.distillation_trainer import _chunked_divergence_loss

    from distillscope.rollout.rollouts import PromptBatch
    from distillscope.rollout.scoring import completion_hidden

    pair, cfg = run.pair, run.cfg
    problems = select_problems(run.pool, run.shape.prompts, SEED, 0)
    spec = SamplingSpec(
        run.shape.new_tokens,
        pair.stop_ids or pair.tokenizer.eos_token_id,
        pair.tokenizer.pad_token_id,
    )
    r = sample_rollouts(
        make_policy(cfg.rollout),
        pair.student,
        pair.teacher,
        PromptBatch(*run.encoder.encode(problems, "student")),
        spec,
        model_generator(pair.student, SEED, 0, Stream.ROLLOUT),
    )
    objective = Objective.from_config(cfg.objective, pair.vocab_size)
    ours, _, _ = objective_loss(
        objective,
        objective.path.scores(pair.student, r, "student"),
        objective.path.scores(pair.teacher, r, "teacher"),
        r,
    )
    mask_B_T = r.completion_mask_B_T
    trl, _, _ = _chunked_divergence_loss(
        completion_hidden(pair.student, r, "student"),
        completion_hidden(pair.teacher, r, "teacher"),
        pair.student.get_output_embeddings().weight[: pair.vocab_size],
        pair.teacher.get_output_embeddings().weight[: pair.vocab_size],
        mask_B_T,
        run.trainer.beta,
        num_items_in_batch=mask_B_T.sum(),
    )
    return {"loss_ours": float(ours), "loss_trl": float(trl)}


#: The memory runs' allocator: every block of 64 kB or more is mapped and returned to the
#: system when freed, so resident memory follows the live tensors (glibc keeps freed blocks up
#: to 32 MB for reuse otherwise, which hides a later step's peak).
MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}


def run_worker(side: str, shape: str, kind: str, args, *, check=False, memory=False) -> dict:
    steps = 1 if memory else args.steps
    cmd = [sys.executable, __file__, "--worker", side, shape, kind, "--steps", str(steps)]
    cmd += ["--pairs", str(args.pairs), "--layers", str(args.layers)]
    cmd += ["--threads", str(args.threads)] + ["--check"] * check
    env = {**os.environ, **(MEMORY_ENV if memory else {})}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{side} {shape} {kind} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(shape: str, kind: str, rounds: int, args) -> dict[str, list[dict]]:
    """``rounds`` timed runs per side, alternating which side goes first."""
    runs: dict[str, list[dict]] = {"ours": [], "trl": []}
    for k in range(rounds):
        for side in ("ours", "trl") if k % 2 == 0 else ("trl", "ours"):
            runs[side].append(run_worker(side, shape, kind, args, check=side == "trl" and k == 0))
            print(f"{shape} {kind} round {k} {side}: {runs[side][-1]['step_s']}", file=sys.stderr)
    return runs


def _median_step(run: dict) -> float:
    return statistics.median(run["step_s"])


def _median_phase(run: dict, i: int) -> float:
    return statistics.median(p[i] for p in run["phases_s"])


def summary_row(shape: str, kind: str, runs: dict[str, list[dict]]) -> str:
    """Step times, the speed-up, and the speed-up a free loss would give (the floor)."""
    cells = []
    for side in ("ours", "trl"):
        m = sorted(_median_step(r) for r in runs[side])
        cells.append(f"{statistics.median(m):.3f} s ({m[0]:.3f}–{m[-1]:.3f})")
    trl_s = statistics.median(map(_median_step, runs["trl"]))
    speed = trl_s / statistics.median(map(_median_step, runs["ours"]))
    no_loss = statistics.median(_median_step(r) - _median_phase(r, 3) for r in runs["ours"])
    return (
        f"| {shape}, {kind} | {cells[0]} | {cells[1]} | **{speed:.2f}×** "
        f"(≥ {TARGETS[shape][0]}×) | {trl_s / no_loss:.2f}× |"
    )


def memory_row(shape: str, mem: dict[str, dict]) -> str:
    ours, trl = mem["ours"]["step_mb"], mem["trl"]["step_mb"]
    target = TARGETS[shape][1]
    return (
        f"| {shape} | {ours:,.0f} / {trl:,.0f} MB = **{ours / trl:.2f}×**"
        f"{f' (≤ {target}×)' if target else ''} | {mem['ours']['peak_mb']:,.0f} / "
        f"{mem['trl']['peak_mb']:,.0f} MB |"
    )


def phase_rows(shape: str, kind: str, runs: dict[str, list[dict]]) -> list[str]:
    rows = []
    for side, name in (("ours", "distillscope"), ("trl", "TRL")):
        ms = [
            1e3 * statistics.median(_median_phase(r, i) for r in runs[side])
            for i in range(len(PHASES))
        ]
        tokens = statistics.median(r["tokens"] for r in runs[side])
        cells = " | ".join(f"{v:,.0f}" for v in ms)
        rows.append(f"| {shape}, {kind} | {name} | {cells} | {tokens:.0f} |")
    return rows


DIFFERENCES = (
    "TRL scores prompt ⧺ completion without position ids, so a left-padded prompt's tokens sit "
    "at shifted positions in its loss forward (ours counts real tokens, as generation does)",
    "TRL's CPU loss projects every completion position through both LM heads, padding after EOS "
    "included, and recomputes both projections in backward; ours projects the completion "
    "tokens only, once",
    "ours also logs per-token diagnostics (k1/k2/k3, likelihoods) and the step's rewards; TRL "
    "logs the student's entropy",
)


def check_note(shape: str, kind: str, runs: dict[str, list[dict]], load: float) -> str:
    """The same-work checks of one (shape, divergence); stops the bench if the losses differ."""
    first = runs["trl"][0]
    ours, trl = first["loss_ours"], first["loss_trl"]
    if abs(ours - trl) > 1e-5 * max(1.0, abs(trl)):
        sys.exit(f"{shape} {kind}: the losses differ on the same batch: {ours} vs {trl}")
    ids = "equal" if first["same_prompt_ids"] else "DIFFER"
    return (
        f"- {shape}, {kind}: {len(runs['ours'])} runs × {len(first['step_s'])} timed steps per "
        f"side; same batch and hidden states: loss {ours:.6f} (distillscope), {trl:.6f} (TRL); "
        f"prompt ids {ids}; 1-min load average {load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end"
    )


def print_tables(tables: dict[str, list[str]], threads: int) -> None:
    print(
        "| shape, divergence | distillscope step: median (min–max of runs) | TRL "
        "DistillationTrainer step | speed-up (target) | speed-up if our loss cost nothing |"
    )
    print("|---|---|---|---|---|")
    print("\n".join(tables["summary"]))
    print(
        "\nMemory (forward KL, one step after a warm-up step, in a process of its own whose "
        "allocator returns every freed block of 64 kB or more):\n"
    )
    print(
        "| shape | the step's peak RSS above the trained state: ours / TRL (target) | "
        "peak RSS of the process: ours / TRL |\n|---|---|---|"
    )
    print("\n".join(tables["memory"]))
    print(
        f"\nPer phase, ms (median over runs of each run's median step), and completion tokens "
        f"per step; torch {torch.__version__}, {threads} threads, fp32:\n"
    )
    print("| shape, divergence | side | " + " | ".join(PHASES) + " | tokens |")
    print("|---|---|" + "---|" * (len(PHASES) + 1))
    print("\n".join(tables["phases"]))
    print("\nChecks:\n")
    print("\n".join(tables["notes"]))
    print("\nDifferences no setting removes:\n")
    print("\n".join(f"- {d}" for d in DIFFERENCES))


def worker_main(args) -> None:
    import logging

    logging.getLogger("trl").setLevel(logging.ERROR)
    if args.threads:
        torch.set_num_threads(args.threads)
    side, name, kind = args.worker
    shape = shape_of(name, args.pairs, args.layers)
    if side == "ours":
        print(json.dumps(ours_worker(shape, kind, args.steps)))
    else:
        print(json.dumps(trl_worker(shape, kind, args.steps, args.check)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["testbed", "real"], choices=list(TARGETS))
    ap.add_argument("--kinds", nargs="+", default=list(BETA), choices=list(BETA))
    ap.add_argument("--rounds", type=int, default=8, help="testbed: runs per side")
    ap.add_argument("--steps", type=int, default=8, help="testbed: timed steps per run")
    ap.add_argument("--real-rounds", type=int, default=2)
    ap.add_argument("--real-steps", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4, help="real shape: layers of each model")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--pairs", type=Path, default=Path("/tmp/distillscope-pairs"))
    ap.add_argument("--worker", nargs=3, metavar=("SIDE", "SHAPE", "KIND"), help=argparse.SUPPRESS)
    ap.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker_main(args)
        return
    if "real" in args.shapes:
        from random_models import save_real_shape_pair  # bench/, the script's own directory

        save_real_shape_pair(args.pairs, args.layers)
    tables: dict[str, list[str]] = {"summary": [], "memory": [], "phases": [], "notes": []}
    for shape in args.shapes:
        real = shape == "real"
        steps, rounds = (args.real_steps, args.real_rounds) if real else (args.steps, args.rounds)
        worker_args = argparse.Namespace(**{**vars(args), "steps": steps})
        for kind in args.kinds:
            load = os.getloadavg()[0]
            runs = measure(shape, kind, rounds, worker_args)
            tables["notes"].append(check_note(shape, kind, runs, load))
            tables["summary"].append(summary_row(shape, kind, runs))
            tables["phases"] += phase_rows(shape, kind, runs)
        mem = {s: run_worker(s, shape, "forward_kl", worker_args, memory=True) for s in SIDES}
        tables["memory"].append(memory_row(shape, mem))
    print_tables(tables, args.threads or torch.get_num_threads())


if __name__ == "__main__":
    main()
