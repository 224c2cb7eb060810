"""Per-position profiles during training (docs/method.md §8, "Training diagnostics").

At each step of ``eval.profile_steps`` — before that step's update, and after the last update
for step ``optim.steps`` — the student writes fresh completions for a fixed probe set of
``eval.profile_prompts`` training prompts (drawn once from the run's seed, the same at every
step, so that the profiles compare over training), at its sampling temperature
(``rollout.student_temperature``, ``rollout.top_p``), whatever the run's rollout policy. Teacher
and student then score them without gradient, and at every completion position, at the loss
temperatures (``objective.teacher_temperature`` / ``student_temperature``, fp32 log-softmax over
the shared vocabulary):

    F  = KL(π_T ‖ π_S) = Σ_v π_T (log π_T − log π_S)     forward KL
    H  = H(π_T)        = −Σ_v π_T log π_T                  teacher entropy
    CE = −Σ_v π_T log π_S                                  cross-entropy, so F = CE − H
    H(π_S)             = −Σ_v π_S log π_S                  student entropy

are averaged in ``eval.profile_bins`` completion-position bins over ``0 … task.max_new_tokens``
(:mod:`distillscope.objectives.positions`, the same bins at every step) and written as one row
of ``RUN/profiles.jsonl`` (:class:`distillscope.store.ProfileLog`).

Every draw comes from the profile stream (:attr:`~distillscope.rollout.prompts.Stream.PROFILE`)
seeded by ``(seed, step)``: the training's own streams are untouched (its metrics are the same
with and without profiles), and a resumed run rewrites the rows from its checkpoint on with the
same values. The (rows × V) log-probs are computed a chunk of token rows at a time, from logits
or from hidden states and the LM head (the run's score path), so full logits of the fused path
never exist.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

import torch

from distillscope.config import RunConfig
from distillscope.models.load import ModelPair
from distillscope.models.precision import forward_precision
from distillscope.objectives.divergences import forward_kl_tokens, tempered_log_softmax
from distillscope.objectives.positions import bin_edges, binned_means
from distillscope.rollout.policies import StudentPolicy
from distillscope.rollout.prompts import PromptEncoder, Stream, model_generator, step_rng
from distillscope.rollout.rollouts import Rollouts, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.rollout.scoring import HiddenScores, LogitScores, ScorePath
from distillscope.store import PROFILE_QUANTITIES, ProfileLog
from distillscope.tasks.base import Problem

#: (rows × V) fp32 buffers one chunk holds at once: two log-probs, two probs, two products.
_BUFFERS = 6


def probe_problems(pool: list[Problem], n: int, seed: int) -> list[Problem]:
    """The run's probe set: ``n`` distinct training problems drawn once from ``seed``."""
    if n > len(pool):
        raise ValueError(f"eval.profile_prompts={n} exceeds the {len(pool)} training problems")
    return step_rng(seed, 0, Stream.PROFILE).sample(pool, n)


class Profiler:
    """The profiles of one run: :meth:`at` profiles a step when ``eval.profile_steps`` names it.

    ``start`` is the step the run (re)starts from: rows of earlier steps are kept, later ones
    rewritten. With no profile step nothing is drawn, computed or written.
    """

    def __init__(
        self,
        cfg: RunConfig,
        pair: ModelPair,
        path: ScorePath,
        encoder: PromptEncoder,
        pool: list[Problem],
        run_dir: Path,
        start: int,
    ) -> None:
        self.cfg, self.pair, self.path, self.encoder = cfg, pair, path, encoder
        self.steps = frozenset(cfg.eval.profile_steps)
        self.log = ProfileLog(run_dir, keep_steps=start, enabled=bool(self.steps))
        e = cfg.eval
        self.problems = probe_problems(pool, e.profile_prompts, cfg.seed) if self.steps else []
        self.edges = bin_edges(cfg.task.max_new_tokens, e.profile_bins)

    def at(self, step: int) -> dict | None:
        """Profile ``step`` if it is one of ``eval.profile_steps``: the row written, else None."""
        if step not in self.steps:
            return None
        began = time.perf_counter()
        rollouts = self.rollouts(step)
        values = self.token_values(rollouts)
        mask_B_T = rollouts.completion_mask_B_T
        means = {k: binned_means(v, mask_B_T, self.edges) for k, v in values.items()}
        bins = []
        for i, b in enumerate(means[PROFILE_QUANTITIES[0]]):
            bins.append(
                {"start": b.start, "stop": b.stop, "count": b.count}
                | {k: means[k][i].mean for k in PROFILE_QUANTITIES}
            )
        row = {
            "step": step,
            "tokens": int(mask_B_T.sum()),
            "time_s": time.perf_counter() - began,
            "bins": bins,
        }
        self.log.append(row)
        return row

    def rollouts(self, step: int) -> Rollouts:
        """The probe set's fresh completions by the current student (the profile stream)."""
        cfg, pair = self.cfg, self.pair
        spec = SamplingSpec(
            max_new_tokens=cfg.task.max_new_tokens,
            stop_ids=pair.stop_ids or pair.tokenizer.eos_token_id,
            pad_id=pair.tokenizer.pad_token_id,
            vocab_size=pair.vocab_size,
        )
        policy = StudentPolicy(temperature=cfg.rollout.student_temperature, top_p=cfg.rollout.top_p)
        prompts = self.encoder.batch(self.problems, cfg.model.device)
        generator = model_generator(pair.student, cfg.seed, step, Stream.PROFILE)
        return sample_rollouts(policy, pair.student, None, prompts, spec, generator)

    def token_values(self, r: Rollouts) -> dict[str, torch.Tensor]:
        """Each of :data:`PROFILE_QUANTITIES` at every completion position ``[B, T]`` (0 where
        masked): both models' forwards without gradient, at the loss temperatures."""
        cfg, pair = self.cfg, self.pair
        with _eval_mode(pair.student), forward_precision(cfg.model), torch.inference_mode():
            s_scores = self.path.scores(pair.student, r, "student")
            device = next(pair.teacher.parameters()).device
            t_scores = self.path.scores(pair.teacher, r.to(device), "teacher")
            t_scores = t_scores.to(r.completion_mask_B_T.device)
            rows = self.path.chunks.rows(self.path.vocab_size, buffers=_BUFFERS)
            o = cfg.objective
            return profile_tokens(
                s_scores,
                t_scores,
                r.completion_mask_B_T,
                (o.student_temperature, o.teacher_temperature),
                rows,
            )


def profile_tokens(
    student: LogitScores | HiddenScores,
    teacher: LogitScores | HiddenScores,
    mask_B_T: torch.Tensor,
    temperatures: tuple[float, float],
    rows: int,
) -> dict[str, torch.Tensor]:
    """F, H(π_T), CE and H(π_S) ``[B, T]`` (0 where masked) from two models' scores, over the
    shared vocabulary, ``rows`` completion tokens at a time; ``temperatures`` = (τ_S, τ_T)."""
    tau_s, tau_t = temperatures
    keep_N = mask_B_T.reshape(-1).bool().nonzero().squeeze(-1)
    out_4_N = torch.zeros(4, mask_B_T.numel(), dtype=torch.float32, device=mask_B_T.device)
    for chunk in keep_N.split(max(1, rows)):
        ls_C_V = tempered_log_softmax(_logits(student, chunk), tau_s, student.vocab_size)
        lt_C_V = tempered_log_softmax(_logits(teacher, chunk), tau_t, teacher.vocab_size)
        pt_C_V = lt_C_V.exp()
        values = (
            forward_kl_tokens(ls_C_V, lt_C_V),
            -(pt_C_V * lt_C_V).sum(-1),
            -(pt_C_V * ls_C_V).sum(-1),
            -(ls_C_V.exp() * ls_C_V).sum(-1),
        )
        out_4_N[:, chunk] = torch.stack(values).to(out_4_N.dtype)
    out_4_B_T = out_4_N.reshape(4, *mask_B_T.shape)
    return dict(zip(PROFILE_QUANTITIES, out_4_B_T, strict=True))


def _logits(scores: LogitScores | HiddenScores, rows_N: torch.Tensor) -> torch.Tensor:
    """The logits ``[N, V]`` of the flattened completion positions ``rows_N``."""
    if isinstance(scores, HiddenScores):
        hidden = scores.hidden_B_T_H.reshape(-1, scores.hidden_B_T_H.shape[-1])[rows_N]
        head_V_H = scores.head_V_H[: scores.vocab_size]
        return hidden.to(head_V_H.dtype) @ head_V_H.T
    logits = scores.logits_B_T_V
    return logits.reshape(-1, logits.shape[-1])[rows_N]


@contextmanager
def _eval_mode(model: torch.nn.Module):
    """Eval mode (no dropout) while profiling; the previous mode is restored after."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
