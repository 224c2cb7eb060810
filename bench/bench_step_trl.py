"""One distillation step, distillscope against TRL's ``GKDTrainer``, on the shipped testbed.

    python bench/bench_step_trl.py [--rounds 3] [--steps 3]

Same models (``testbed:teacher`` → ``testbed:student``), task (tb-countdown3), 16 prompts a step,
24 new tokens, forward KL (TRL ``beta = 0``: ``F.kl_div(log π_S, log π_T)`` = KL(π_T ‖ π_S)),
AdamW, clip 1.0. On-policy: TRL ``lmbda = 1`` vs ``rollout.policy = student``; off-policy: TRL
``lmbda = 0, seq_kd = True`` vs ``rollout.policy = teacher`` (rollout cache off: each step pays
for its teacher generation on both sides).

Conventions aligned (TRL's are fixed, ours are configured to match them):
- TRL samples both policies at one ``temperature`` and its ``compute_loss`` never passes a loss
  temperature (1.0); ours: sampling T 1.0 (student) / 0.5 (teacher, as in the quick preset, and
  TRL's ``temperature`` set to 0.5 for the off-policy row), loss temperatures 1.0.
- TRL reduces the loss as a token mean over the batch (``sum / num_items_in_batch``); ours
  ``objective.reduction = token_mean``.

Before timing, both losses are computed on one batch from the same logits and must agree to
1e-5. Timings interleave the two implementations round by round (the median step of each
round's steps after a warm-up step). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

import torch

from distillscope.config import load_run_config
from distillscope.objectives import OBJECTIVES
from distillscope.rollout import PromptEncoder, select_problems
from distillscope.store import read_metrics
from distillscope.tasks import resolve_task, training_problems
from distillscope.train import distill
from distillscope.train.scoring import completion_logits
from distillscope.train.setup import load_models

PROMPTS, NEW_TOKENS, SEED = 16, 24, 42
POLICIES = {"on-policy": ("student", 1.0, 1.0), "off-policy": ("teacher", 0.0, 0.5)}


def ours_config(policy: str, temperature: float, steps: int):
    """Our run config with TRL's conventions (see the module docstring)."""
    return load_run_config(
        None,
        [
            "task.name=tb-countdown3",
            f"task.max_new_tokens={NEW_TOKENS}",
            f"rollout.prompts_per_step={PROMPTS}",
            f"rollout.policy={policy}",
            f"rollout.{policy}_temperature={temperature}",  # the writer's (others are refused)
            "objective.kind=forward_kl",
            "objective.reduction=token_mean",
            "objective.student_temperature=1.0",
            "objective.teacher_temperature=1.0",
            f"optim.steps={steps}",
            "optim.warmup_steps=0",
            "optim.lr=1e-4",
            "optim.grad_clip=1.0",
            f"checkpoint_every={steps + 1}",
            f"seed={SEED}",
        ],
    )


def ours_step_s(policy: str, temperature: float, steps: int) -> float:
    """Median ``time/step`` of our loop after its first step."""
    with tempfile.TemporaryDirectory() as tmp:
        distill(ours_config(policy, temperature, steps + 1), Path(tmp))
        return statistics.median(r["time/step"] for r in read_metrics(Path(tmp))[1:])


class TrlStep:
    """A ``GKDTrainer`` on the testbed pair, stepped by hand: ``training_step`` + clip + AdamW."""

    def __init__(self, lmbda: float, temperature: float, out: Path):
        from datasets import Dataset
        from trl.experimental.gkd import GKDConfig, GKDTrainer

        cfg = ours_config("student", temperature, 1)
        pair = load_models(cfg)
        task = resolve_task(cfg.task.name, cfg.task.file)
        self.pool = training_problems(task)
        self.encoder = PromptEncoder(task, pair.tokenizer, "testbed", False)
        args = GKDConfig(
            output_dir=str(out),
            lmbda=lmbda,
            beta=0.0,
            seq_kd=lmbda == 0.0,
            temperature=temperature,
            max_new_tokens=NEW_TOKENS,
            learning_rate=1e-4,
            max_grad_norm=1.0,
            use_cpu=True,
            report_to=[],
            per_device_train_batch_size=PROMPTS,
        )
        self.trainer = GKDTrainer(
            model=pair.student,
            teacher_model=pair.teacher,
            args=args,
            train_dataset=Dataset.from_dict({"x": [0]}),
            processing_class=pair.tokenizer,
            data_collator=lambda rows: rows,
        )
        self.optimizer = self.trainer.create_optimizer()
        self.trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() otherwise

    def inputs(self, step: int) -> dict[str, torch.Tensor]:
        ids, mask = self.encoder.encode(select_problems(self.pool, PROMPTS, SEED, step))
        return {
            "prompts": ids,
            "prompt_attention_mask": mask,
            "input_ids": ids,
            "attention_mask": mask,
            "labels": torch.full_like(ids, -100),
        }

    def step_s(self, step: int) -> float:
        model = self.trainer.model
        t0 = time.perf_counter()
        self.trainer.training_step(model, self.inputs(step))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - t0


def check_losses_equal() -> tuple[float, float]:
    """TRL's ``generalized_jsd_loss`` (β = 0) and ours on the same teacher-written batch."""
    from trl.experimental.gkd import GKDTrainer

    from distillscope.rollout import PromptBatch, SamplingSpec, sample_rollouts, step_generator
    from distillscope.train.setup import make_policy

    cfg = ours_config("teacher", 0.5, 1)
    pair = load_models(cfg)
    task = resolve_task(cfg.task.name, cfg.task.file)
    ids, mask = PromptEncoder(task, pair.tokenizer, "testbed", False).encode(
        select_problems(training_problems(task), PROMPTS, SEED, 0)
    )
    r = sample_rollouts(
        make_policy(cfg.rollout),
        pair.student,
        pair.teacher,
        PromptBatch(ids, mask),
        SamplingSpec(
            NEW_TOKENS, stop_ids=pair.tokenizer.eos_token_id, pad_id=pair.tokenizer.pad_token_id
        ),
        step_generator(SEED, 0),
    )
    with torch.no_grad():
        s, t = (
            completion_logits(pair.student, r, "student"),
            completion_logits(pair.teacher, r, "teacher"),
        )
        kind = OBJECTIVES[cfg.objective.kind]  # a full-vocabulary divergence on logits
        options = {name: getattr(cfg.objective, name) for name in kind.options}
        ours, _ = kind.loss(s, t, r.completion_mask_B_T, vocab_size=pair.vocab_size, **options)
        labels = r.completion_B_T.masked_fill(r.completion_mask_B_T == 0, -100)
        trl = GKDTrainer.generalized_jsd_loss(
            s[..., : pair.vocab_size],
            t[..., : pair.vocab_size],
            labels,
            beta=0.0,
            num_items_in_batch=int(r.completion_mask_B_T.sum()),
        )
    return float(ours), float(trl)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per round and side")
    args = ap.parse_args()
    logging.getLogger("trl").setLevel(logging.ERROR)
    ours_loss, trl_loss = check_losses_equal()
    assert abs(ours_loss - trl_loss) <= 1e-5 * max(1.0, abs(trl_loss)), (ours_loss, trl_loss)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (policy, lmbda, temperature) in POLICIES.items():
            trl = TrlStep(lmbda, temperature, Path(tmp))
            trl.step_s(0)  # warm-up
            ours_s, trl_s = [], []
            for k in range(args.rounds):  # interleaved: a burst of load hits both sides
                ours_s.append(ours_step_s(policy, temperature, args.steps))
                trl_s.append(
                    statistics.median(trl.step_s(1 + k * args.steps + i) for i in range(args.steps))
                )
            rows.append((name, min(ours_s), min(trl_s)))
    print(
        f"initial loss, same batch and logits: distillscope {ours_loss:.6f}, TRL {trl_loss:.6f}\n"
    )
    print(
        f"| step ({PROMPTS} prompts, {NEW_TOKENS} new tokens, forward KL, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads) | distillscope | "
        "TRL GKDTrainer | speed-up |"
    )
    print("|---|---|---|---|")
    for name, ours, trl in rows:
        print(f"| {name} | {ours:.3f} s | {trl:.3f} s | {trl / ours:.2f}× |")


if __name__ == "__main__":
    main()
