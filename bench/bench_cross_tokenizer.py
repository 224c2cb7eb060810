"""The cross-tokenizer objectives against the exact ones on a pair that shares a tokenizer.

    python bench/bench_cross_tokenizer.py [--prompts 32] [--repeats 3] [--seed 0]

On the shipped testbed pair (one character tokenizer, V = 54), one batch of student rollouts
(OnPD) and one of teacher rollouts (OffPD) of tb-countdown3 prompts. The cross-tokenizer
teacher scores them *through the text* (``CrossTokenizerTeacher(through_text=True)``: decode,
re-tokenise, align by character spans, as for a teacher with another tokenizer). Per kind the
table gives the share of exact positions, the loss and its relative error against the exact
objective of the same direction (forward/reverse KL, full vocabulary; ULD against forward KL),
the relative error and the cosine of the gradient over every student parameter, and the wall
time of the teacher's scores (median of ``--repeats``) against the exact teacher's forward.
Rows with a forced ULD share replace that share of the exact positions (drawn with ``--seed``)
by ULD, the approximation a teacher with another tokenizer takes where tokens do not align.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import torch

from distillscope.config import load_run_config
from distillscope.rollout.prompts import PromptEncoder, select_problems
from distillscope.rollout.rollouts import MicroBatch, PromptBatch, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.tasks import resolve_task, training_problems
from distillscope.teacher.cross_tokenizer import CrossTokenizerTeacher
from distillscope.train.setup import load_models, make_policy
from distillscope.train.step import Objective, objective_loss

try:
    from bench_served_teacher import _timed  # the median wall time of repeated calls
except ImportError:  # run as a module from the repository root
    from bench.bench_served_teacher import _timed

#: (cross-tokenizer kind, the exact kind it is measured against)
KINDS = (
    ("aligned_forward_kl", "forward_kl"),
    ("aligned_reverse_kl", "reverse_kl"),
    ("uld", "forward_kl"),
)
FORCED_ULD = (0.0, 0.25, 1.0)


def _rollouts(pair, cfg, policy: str, prompts: int):
    task = resolve_task(cfg.task.name, cfg.task.file)
    problems = select_problems(training_problems(task, cfg.task.eval_fraction), prompts, 0, 0)
    encoder = PromptEncoder(task, pair.tokenizer, cfg.task.prompt_format)
    spec = SamplingSpec(
        cfg.task.max_new_tokens, pair.stop_ids, pair.tokenizer.pad_token_id, pair.vocab_size
    )
    rollout = load_run_config(None, [f"rollout.policy={policy}"]).rollout
    return sample_rollouts(
        make_policy(rollout),
        pair.student,
        pair.teacher,
        PromptBatch(*encoder.encode(problems, "student")),
        spec,
        torch.Generator().manual_seed(0),
    )


def _loss_grad(objective, student, teacher_scores, r) -> tuple[float, torch.Tensor]:
    s_scores = objective.path.scores(student, r, "student")
    loss, metrics, _ = objective_loss(objective, s_scores, teacher_scores, r)
    grads = torch.autograd.grad(loss, [p for p in student.parameters() if p.requires_grad])
    return float(loss.detach()), torch.cat([g.flatten() for g in grads])


def _forced(scores, share: float, seed: int):
    """``scores`` with ``share`` of its exact positions taken by ULD (drawn with ``seed``)."""
    gen = torch.Generator().manual_seed(seed)
    keep_B_T = torch.rand(scores.exact_B_T.shape, generator=gen) >= share
    return replace(scores, exact_B_T=scores.exact_B_T & keep_B_T)


def _rows(pair, r, name: str, repeats: int, seed: int) -> None:
    micro = MicroBatch(torch.arange(r.batch_size), r)
    for kind, exact_kind in KINDS:
        cfg = load_run_config(None, [f"objective.kind={kind}"])
        objective = Objective.from_config(cfg.objective, pair.vocab_size)
        teacher = CrossTokenizerTeacher(cfg, pair, objective, through_text=True)
        exact_cfg = load_run_config(None, [f"objective.kind={exact_kind}"])
        exact = Objective.from_config(exact_cfg.objective, pair.vocab_size)
        aligned, aligned_s = _timed(lambda t=teacher: t.score(micro), repeats)

        def exact_scores(exact=exact):
            with torch.inference_mode():
                return exact.path.scores(pair.teacher, r, "teacher").cloned_to("cpu")

        t_exact, exact_s = _timed(exact_scores, repeats)
        loss_exact, grad_exact = _loss_grad(exact, pair.student, t_exact, r)
        mask_B_T = r.completion_mask_B_T.bool()
        for share in FORCED_ULD if kind != "uld" else (0.0,):
            scores = _forced(aligned, share, seed)
            loss, grad = _loss_grad(objective, pair.student, scores, r)
            exact_share = float(scores.exact_B_T[mask_B_T].float().mean())
            shown = "–" if kind == "uld" else f"{exact_share:.3f}"  # ULD reads no exact share
            grad_err = float((grad - grad_exact).norm() / grad_exact.norm())
            cosine = float(torch.nn.functional.cosine_similarity(grad, grad_exact, dim=0))
            print(
                f"| {name} | {kind} | {share:.2f} | {shown} | {loss:.4f} | "
                f"{loss_exact:.4f} | {abs(loss - loss_exact) / abs(loss_exact):.2e} | "
                f"{grad_err:.2e} | {cosine:.3f} | {aligned_s * 1e3:.1f} | {exact_s * 1e3:.1f} |"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    pair = load_models(load_run_config(None, ["objective.kind=uld"]))  # each its own tokenizer
    cfg = load_run_config(None, [])
    batches = {
        "OnPD": _rollouts(pair, cfg, "student", args.prompts),
        "OffPD": _rollouts(pair, cfg, "teacher", args.prompts),
    }
    tokens = {name: int(r.completion_mask_B_T.sum()) for name, r in batches.items()}
    print(f"{args.prompts} prompts; completion tokens {tokens}; V = {pair.vocab_size}\n")
    print(
        "| rollouts | kind | forced ULD share | exact share | loss | exact loss | "
        "loss rel. error | gradient rel. error | gradient cosine | teacher scores (ms) | "
        "exact teacher (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in batches.items():
        _rows(pair, r, name, args.repeats, args.seed)


if __name__ == "__main__":
    main()
