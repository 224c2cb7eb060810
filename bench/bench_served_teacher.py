"""A served teacher's top-k + tail objective against the full-vocabulary one, and its latency.

    python bench/bench_served_teacher.py [--prompts 32] [--repeats 5]

On the shipped testbed (V = 54), the student writes one batch of Countdown-3 rollouts; the
teacher (``distillscope serve-teacher``'s server, in a thread on 127.0.0.1) scores it at
temperature 1 with its top k for K ∈ {1, 4, 16, 53}. Per objective kind and K the table gives
the teacher's mean top-k mass, the relative error of the top-k loss and of its gradient (all
student parameters) against the full-vocabulary objective, how far the served loss lies from
the in-process top-k teacher's, and the wall time of one batch's request (median of
``--repeats``) against the in-process teacher's forward + top-k.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import torch

from distillscope.config import load_run_config
from distillscope.models.locate import resolve_model_path
from distillscope.rollout.prompts import PromptEncoder, select_problems
from distillscope.rollout.rollouts import PromptBatch, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.tasks import resolve_task, training_problems
from distillscope.teacher.client import TeacherClient
from distillscope.teacher.served import ServedTeacher
from distillscope.teacher.server import make_server
from distillscope.train.setup import load_models, make_policy
from distillscope.train.step import Objective, objective_loss

KS = (1, 4, 16, 53)
KINDS = ("forward_kl", "reverse_kl")


def _rollouts(pair, cfg, prompts: int):
    task = resolve_task(cfg.task.name, cfg.task.file)
    problems = select_problems(training_problems(task, cfg.task.eval_fraction), prompts, 0, 0)
    encoder = PromptEncoder(task, pair.tokenizer, cfg.task.prompt_format)
    spec = SamplingSpec(
        cfg.task.max_new_tokens, pair.stop_ids, pair.tokenizer.pad_token_id, pair.vocab_size
    )
    return sample_rollouts(
        make_policy(cfg.rollout),
        pair.student,
        None,
        PromptBatch(*encoder.encode(problems, "student")),
        spec,
        torch.Generator().manual_seed(0),
    )


def _loss_grad(objective, student, teacher_scores, r) -> tuple[float, torch.Tensor]:
    loss, _, _ = objective_loss(
        objective, objective.path.scores(student, r, "student"), teacher_scores, r
    )
    grads = torch.autograd.grad(loss, [p for p in student.parameters() if p.requires_grad])
    return float(loss.detach()), torch.cat([g.flatten() for g in grads])


def _timed(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    server = make_server(resolve_model_path("testbed:teacher"), port=0, topk_max=64)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = TeacherClient(f"http://127.0.0.1:{server.server_port}/v1", vocab_size=54)
    served = ServedTeacher(client)
    cfg = load_run_config(None, ["objective.teacher_temperature=1.0"])
    pair = load_models(cfg)
    r = _rollouts(pair, cfg, args.prompts)
    tokens = int(r.completion_mask_B_T.sum())
    print(f"{args.prompts} rollouts, {tokens} completion tokens, V = {pair.vocab_size}\n")
    print(
        "| kind | K | teacher top-k mass | loss rel. error | gradient rel. error | "
        "served − in-process loss | request (ms) | in-process (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for kind in KINDS:
        over = ["objective.teacher_temperature=1.0", f"objective.kind={kind}"]
        full_obj = Objective.from_config(load_run_config(None, over).objective, pair.vocab_size)
        t_full = full_obj.path.scores(pair.teacher, r, "teacher")
        loss_full, grad_full = _loss_grad(full_obj, pair.student, t_full, r)
        for k in KS:
            cfg_k = load_run_config(None, [*over, f"objective.teacher_topk={k}"])
            obj = Objective.from_config(cfg_k.objective, pair.vocab_size)
            t_served, request_s = _timed(lambda k=k: served.topk(r, k, 1.0), args.repeats)

            def local(k=k, obj=obj):
                with torch.no_grad():
                    return obj.path.scores(pair.teacher, r, "teacher").topk(k, r, 1.0)

            t_local, local_s = _timed(local, args.repeats)
            loss_k, grad_k = _loss_grad(obj, pair.student, t_served, r)
            loss_local, _ = _loss_grad(obj, pair.student, t_local, r)
            mass_B_T = t_served.folded_B_T_K1[..., :-1].logsumexp(-1).exp()
            mass = float(mass_B_T[r.completion_mask_B_T.bool()].mean())
            grad_err = float((grad_k - grad_full).norm() / grad_full.norm())
            print(
                f"| {kind} | {k} | {mass:.4f} | {abs(loss_k - loss_full) / abs(loss_full):.2e} | "
                f"{grad_err:.2e} | {abs(loss_k - loss_local):.1e} | {request_s * 1e3:.1f} | "
                f"{local_s * 1e3:.1f} |"
            )
    server.shutdown()
    server.server_close()


if __name__ == "__main__":
    main()
