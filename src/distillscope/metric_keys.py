"""Every metric key distillscope writes, in one place: unit, meaning, which way is better, stage.

The training loop writes ``train``/``objective``/``kl``/``opd``/``rollout``/``time``/``perf`` keys
to ``metrics.jsonl`` every step; the evaluation writes ``eval`` keys to ``eval.json``; the study
adds per-run summaries of the step metrics to ``results.parquet``. The report reads units from
here (a ``fraction`` is shown in percent), and the metric table of docs/metrics.md is rendered
from it::

    python -m distillscope.metric_keys          # rewrite the table in docs/metrics.md

Each key an objective returns also says how a step with ``optim.grad_accum`` micro-batches
combines its per-micro-batch values (``accumulate``): ``sum`` adds them (token counts),
``loss`` weights each by the micro-batch's share of the batch's loss normaliser (so the step
logs the full batch's loss, :func:`distillscope.train.step.micro_batch_share`), and ``mean``
by its share of the batch's tokens (token means). An OPD step with
``objective.updates_per_batch`` > 1 logs, for these keys and the gradient norm, the mean over its
updates; the diagnostics (``kl/``, likelihoods) are its first update's, of the policy that sampled.

Keys with ``{…}`` are families: ``{k}`` a pass@k sample count, ``{n}`` the samples per item,
``{skill}`` a skill of the testbed suite, ``{task}`` an lm-eval task or group, ``{phase}`` a
phase of the step, ``{view}`` fp32/bf16, ``{tau}`` the threshold written as ``1e-06``,
``{measure}`` an RLVR measure (``eval_accuracy``, ``harder_accuracy``), ``{name}`` a teacher of
``model.teachers``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

Unit = Literal["fraction", "pp", "nats", "tokens", "seconds", "tokens/s", "ratio", "count", "—"]
Better = Literal["higher", "lower", "none"]
Stage = Literal["train", "rollout", "eval", "study"]
Accumulate = Literal["sum", "loss", "mean"]


@dataclass(frozen=True)
class MetricKey:
    """One metric key (or family of keys) and what its numbers mean."""

    key: str
    unit: Unit
    meaning: str
    better: Better
    stage: Stage
    #: how a step combines the values of its micro-batches (keys an objective returns only)
    accumulate: Accumulate | None = None

    def matches(self, name: str) -> bool:
        """Whether ``name`` is this key, or a member of this family."""
        pattern = re.sub(r"\\\{\w+\\\}", r"[^/]+", re.escape(self.key))
        return re.fullmatch(pattern, name) is not None


def _keys(stage: Stage, *rows: tuple) -> list[MetricKey]:
    """Rows of ``(key, unit, meaning, better)``, or with a fifth item: its ``accumulate``."""
    return [MetricKey(*row[:4], stage, *row[4:]) for row in rows]


METRICS: tuple[MetricKey, ...] = (
    *_keys(
        "train",
        (
            "train/loss",
            "—",
            "the objective's loss this step (over micro-batches; OPD: mean over its updates)",
            "lower",
            "loss",
        ),
        ("train/lr", "—", "learning rate this step (linear warm-up, then constant)", "none"),
        (
            "train/grad_norm",
            "—",
            "global gradient norm before clipping (OPD: mean over the step's updates)",
            "none",
        ),
        (
            "train/grad_clipped",
            "fraction",
            "1 when the pre-clip norm exceeded the clip (OPD: share of the step's updates)",
            "none",
        ),
        ("objective/loss", "—", "the loss value the objective returned", "lower", "loss"),
        ("objective/tokens", "count", "completion tokens in the loss", "none", "sum"),
        (
            "objective/forward_kl",
            "nats",
            "KL(π_T ‖ π_S), token mean (full vocabulary; the k + 1 bins of a top-k teacher)",
            "lower",
            "mean",
        ),
        (
            "objective/reverse_kl",
            "nats",
            "KL(π_S ‖ π_T), token mean (full vocabulary; the k + 1 bins of a top-k teacher)",
            "lower",
            "mean",
        ),
        (
            "objective/teacher_entropy",
            "nats",
            "H(π_T) at the loss temperature, token mean",
            "none",
            "mean",
        ),
        (
            "objective/student_entropy",
            "nats",
            "H(π_S) at the loss temperature, token mean",
            "none",
            "mean",
        ),
        (
            "objective/teacher_topk_mass",
            "fraction",
            "top-k teacher (objective.teacher_topk): the teacher's mass in its top k, token mean",
            "none",
            "mean",
        ),
        (
            "objective/uld_distance",
            "—",
            "cross-tokenizer kinds: ULD's Σ|p_S↓ − p_T↓| at the aligned positions, token mean",
            "lower",
            "mean",
        ),
        (
            "objective/aligned_exact_share",
            "fraction",
            "cross-tokenizer kinds: share of loss tokens whose span and token match the teacher's",
            "none",
            "mean",
        ),
        ("objective/forward_kl_estimate", "nats", "sampled forward-KL estimate", "lower", "mean"),
        ("objective/reverse_kl_estimate", "nats", "sampled reverse-KL estimate", "lower", "mean"),
        ("kl/k1", "nats", "KL(π_S ‖ π_T) by Schulman k1 on student-written tokens", "lower"),
        ("kl/k2", "nats", "Schulman k2 = ½ (log r)² on student-written tokens", "lower"),
        ("kl/k3", "nats", "KL(π_S ‖ π_T) by Schulman k3 on student-written tokens", "lower"),
        ("kl/forward_k1", "nats", "KL(π_T ‖ π_S) by k1 on teacher-written tokens", "lower"),
        ("kl/forward_k2", "nats", "k2 with log r = ℓ_S − ℓ_T on teacher-written tokens", "lower"),
        ("kl/forward_k3", "nats", "KL(π_T ‖ π_S) by k3 on teacher-written tokens", "lower"),
        (
            "opd/loss",
            "—",
            "OPD clipped policy-gradient surrogate (mean over the step's updates)",
            "lower",
            "loss",
        ),
        (
            "opd/raw_advantage_mean",
            "nats",
            "mean log π_T − log π_S before regulation",
            "higher",
            "mean",
        ),
        ("opd/raw_advantage_std", "nats", "its standard deviation", "none", "mean"),
        ("opd/advantage_mean", "nats", "mean advantage after regulation", "higher", "mean"),
        ("opd/advantage_std", "nats", "its standard deviation", "none", "mean"),
        (
            "opd/hard_clip_frac",
            "fraction",
            "tokens whose advantage the hard clip changed",
            "none",
            "mean",
        ),
        (
            "opd/ratio_mean",
            "ratio",
            "mean importance ratio π_θ / π_old over tokens and the step's updates (1 with one)",
            "none",
            "mean",
        ),
        (
            "opd/ratio_clip_frac",
            "fraction",
            "tokens where the ratio clip is active (no gradient), mean over the step's updates",
            "none",
            "mean",
        ),
        ("opd/tokens", "count", "completion tokens in the OPD loss", "none", "sum"),
        (
            "opd/informativeness",
            "—",
            "I: within-prompt correlation of a student rollout's mean Δℓ (T = 1) and its reward",
            "higher",
        ),
        (
            "opd/informativeness_groups",
            "count",
            "prompt groups with correct and incorrect student rollouts (I's sample)",
            "none",
        ),
        (
            "teacher/{name}/loss",
            "—",
            "the loss on the rows routed to teacher {name} alone (several teachers; each "
            "micro-batch's value already weighted by its share of those rows)",
            "lower",
            "sum",
        ),
        ("teacher/{name}/share", "fraction", "share of the step's rows routed to {name}", "none"),
        (
            "teacher/{name}/seconds",
            "seconds",
            "teacher {name}'s time this step: sampling its batch and scoring (cache reads too)",
            "lower",
        ),
        ("teacher/{name}/reward", "fraction", "mean reward of the rows routed to {name}", "higher"),
        ("teacher/{name}/informativeness", "—", "opd/informativeness of {name}'s rows", "higher"),
        (
            "teacher/{name}/informativeness_groups",
            "count",
            "opd/informativeness_groups of {name}'s rows",
            "none",
        ),
        ("time/{phase}", "seconds", "wall time of one phase of the step", "lower"),
        ("time/step", "seconds", "wall time of the whole step", "lower"),
        ("time/teacher_saved", "seconds", "rollout + teacher forward read from cache", "higher"),
        ("perf/tokens_per_s", "tokens/s", "completion tokens trained per second", "higher"),
    ),
    *_keys(
        "rollout",
        ("rollout/reward", "fraction", "mean task score of this step's rollouts", "higher"),
        ("rollout/len_mean", "tokens", "mean completion length", "none"),
        ("rollout/len_p50", "tokens", "median completion length", "none"),
        ("rollout/len_p90", "tokens", "90th percentile of completion length", "none"),
        ("rollout/truncated_frac", "fraction", "completions that hit max_new_tokens", "lower"),
        ("rollout/early_eos_frac", "fraction", "completions ended by EOS within 2 tokens", "lower"),
        ("rollout/student_token_prob", "—", "mean π_S(y) of the sampled tokens (T = 1)", "none"),
        ("rollout/teacher_token_prob", "—", "mean π_T(y) of the sampled tokens (T = 1)", "none"),
        ("rollout/student_geo_prob", "—", "exp(mean log π_S(y)) of the sampled tokens", "none"),
        ("rollout/teacher_geo_prob", "—", "exp(mean log π_T(y)) of the sampled tokens", "none"),
        (
            "rollout/engine_logprob_gap",
            "nats",
            "rollout.engine=vllm: mean |log π_engine(y) − log π_train(y)| over completion tokens",
            "lower",
        ),
    ),
    *_keys(
        "eval",
        (
            "eval/accuracy",
            "fraction",
            "held-out accuracy: the mean over items × eval/accuracy_samples samples",
            "higher",
        ),
        (
            "eval/accuracy_samples",
            "count",
            "samples per item behind eval/accuracy (1: [P]'s one-sample protocol)",
            "none",
        ),
        ("eval/harder_samples", "count", "samples per item behind eval/harder_accuracy", "none"),
        ("eval/skill_samples", "count", "samples per skill item behind the skill suite", "none"),
        ("eval/pass@{k}", "fraction", "unbiased pass@k on the coverage items", "higher"),
        ("eval/avg@{n}", "fraction", "mean score over the coverage samples", "higher"),
        ("eval/harder_accuracy", "fraction", "accuracy on the harder task, untrained", "higher"),
        ("eval/harder/pass@{k}", "fraction", "pass@k on the harder task", "higher"),
        ("eval/harder/avg@{n}", "fraction", "mean score over the harder-task samples", "higher"),
        ("eval/skills_before", "fraction", "skill-suite mean of the untrained student", "higher"),
        ("eval/skills_after", "fraction", "skill-suite mean of the trained student", "higher"),
        (
            "eval/forgetting_pp",
            "pp",
            "after − before, percentage points: skills_after − skills_before, or with "
            "eval.forgetting forgetting_after − forgetting_before",
            "higher",
        ),
        (
            "eval/forgetting_before",
            "fraction",
            "eval.forgetting: mean primary lm-eval score of the untrained student over the tasks",
            "higher",
        ),
        (
            "eval/forgetting_after",
            "fraction",
            "eval.forgetting: the same mean for the trained student",
            "higher",
        ),
        (
            "eval/lmeval/{task}",
            "fraction",
            "eval.forgetting: the trained student's primary score on one lm-eval task or group",
            "higher",
        ),
        (
            "eval/lmeval_before/{task}",
            "fraction",
            "eval.forgetting: the untrained student's primary score on it",
            "higher",
        ),
        ("eval/sparsity_{view}_tau{tau}", "fraction", "parameters changed by less than τ", "none"),
        ("eval/len_mean", "tokens", "mean completion length on the accuracy items", "none"),
        ("eval/truncated_frac", "fraction", "accuracy completions that hit the limit", "lower"),
        ("eval/teacher_style_share", "fraction", "answers written in the teacher's style", "none"),
        (
            "eval/style_share_t1",
            "fraction",
            "eval.style, the untrained student only (a study's baseline): its answers in the "
            "teacher's style sampling at T = 1 with the teacher's style flag, whether the style "
            "is in its support",
            "none",
        ),
        ("eval/{skill}", "fraction", "accuracy of the trained student on one skill", "higher"),
        ("split/eval_items", "count", "distinct held-out items (accuracy ∪ pass@k)", "none"),
        ("split/overlap", "count", "of those, items in the training pool (0)", "lower"),
        ("split/harder/eval_items", "count", "distinct held-out harder-task items", "none"),
        ("split/harder/overlap", "count", "of those, items in the training pool (0)", "lower"),
    ),
    *_keys(
        "train",
        ("rlvr/loss", "—", "RLVR: the DAPO loss (token-level normalisation)", "lower", "loss"),
        ("rlvr/ratio_mean", "ratio", "RLVR: mean importance ratio π_θ/π_old", "none", "mean"),
        (
            "rlvr/ratio_clip_frac",
            "fraction",
            "RLVR: tokens whose ratio is clipped (no gradient)",
            "none",
            "mean",
        ),
        ("rlvr/reward", "—", "RLVR: mean reward of the step's completions (0 or 2 each)", "higher"),
        ("rlvr/accuracy", "fraction", "RLVR: share of the step's completions verified", "higher"),
        (
            "rlvr/groups_mixed",
            "fraction",
            "RLVR: prompt groups with right and wrong completions (the only ones with a gradient)",
            "higher",
        ),
    ),
    *_keys(
        "eval",
        ("rlvr/eval_accuracy", "fraction", "RLVR task, held out, after RLVR", "higher"),
        ("rlvr/eval_accuracy_before", "fraction", "the same items before RLVR", "higher"),
        ("rlvr/harder_accuracy", "fraction", "harder variant, held out, after RLVR", "higher"),
        ("rlvr/harder_accuracy_before", "fraction", "the same items before RLVR", "higher"),
        ("rlvr/reward_first", "—", "mean rlvr/reward over the first 10% of steps", "higher"),
        ("rlvr/reward_final", "—", "mean rlvr/reward over the last 10% of steps", "higher"),
        ("split/rlvr/{measure}/eval_items", "count", "held-out items of an RLVR measure", "none"),
        (
            "split/rlvr/{measure}/overlap",
            "count",
            "of those, items in the RLVR or distillation training pool (0)",
            "lower",
        ),
    ),
    *_keys(
        "study",
        ("train/loss_final", "—", "mean train/loss over the last 10% of steps", "lower"),
        ("train/grad_norm_mean", "—", "mean pre-clip gradient norm", "none"),
        ("train/grad_norm_max", "—", "largest pre-clip gradient norm", "none"),
        ("train/grad_clipped_frac", "fraction", "steps whose gradient was clipped", "none"),
        ("rollout/student_token_prob_mean", "—", "rollout/student_token_prob over steps", "none"),
        ("rollout/teacher_token_prob_mean", "—", "rollout/teacher_token_prob over steps", "none"),
        (
            "rollout/loglik_gap_mean",
            "nats",
            "mean log(student_geo_prob / teacher_geo_prob) over steps (claim 8)",
            "none",
        ),
        ("rollout/len_mean_final", "tokens", "rollout/len_mean over the last 10% of steps", "none"),
        ("train/steps_done", "count", "optimizer steps logged", "none"),
        ("time/run_s", "seconds", "training wall time of the run", "lower"),
        ("time/teacher_saved_s", "seconds", "time/teacher_saved summed over the run", "higher"),
        (
            "time/teacher_forward_s",
            "seconds",
            "time/teacher_forward summed over the run (the teachers' scoring)",
            "lower",
        ),
        (
            "teacher/{name}/seconds_s",
            "seconds",
            "teacher/{name}/seconds summed over the run",
            "lower",
        ),
        (
            "teacher/{name}/informativeness_run",
            "—",
            "teacher {name}'s I: teacher/{name}/informativeness over steps, weighted by groups",
            "higher",
        ),
        (
            "eval/informativeness",
            "—",
            "the run's I: opd/informativeness over steps, weighted by their groups",
            "higher",
        ),
        ("model/teacher_params", "count", "parameters of the run's teacher", "none"),
        ("model/student_params", "count", "parameters of the run's student", "none"),
        ("teacher/{name}/params", "count", "parameters of routed teacher {name}", "none"),
        (
            "eval/teacher/{name}/accuracy",
            "fraction",
            "eval/accuracy on the held-out items routed to teacher {name} (routes by column or "
            "task)",
            "higher",
        ),
    ),
)


@lru_cache(maxsize=4096)
def metric_info(name: str) -> MetricKey | None:
    """The registry entry of ``name``: an exact key first, else the first family it belongs to
    (cached: the registry is a constant, and reports ask for the same keys per table)."""
    for m in METRICS:
        if m.key == name:
            return m
    return next((m for m in METRICS if m.matches(name)), None)


def unit(name: str) -> str:
    """The unit of ``name`` ("—" for keys not in the registry)."""
    info = metric_info(name)
    return info.unit if info is not None else "—"


def accumulation(name: str) -> Accumulate:
    """How a step combines the micro-batch values of ``name`` (a key an objective returns)."""
    info = metric_info(name)
    if info is None or info.accumulate is None:
        raise ValueError(f"metric {name!r} declares no micro-batch accumulation in metric_keys")
    return info.accumulate


def is_fraction(name: str) -> bool:
    """Whether ``name`` is stored as a fraction in [0, 1] (the report shows it in percent)."""
    return unit(name) == "fraction"


def markdown_table() -> str:
    """The metric table of docs/metrics.md, rendered from :data:`METRICS`."""
    lines = ["| key | stage | unit | better | meaning |", "|---|---|---|---|---|"]
    for m in METRICS:
        lines.append(f"| `{m.key}` | {m.stage} | {m.unit} | {m.better} | {m.meaning} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
    if not doc.exists():  # an installed package, not a source checkout: print the table
        print(markdown_table(), end="")
        sys.exit(0)
    begin, end = "<!-- metric-table:begin -->\n", "<!-- metric-table:end -->"
    head, found_begin, rest = doc.read_text(encoding="utf-8").partition(begin)
    _, found_end, tail = rest.partition(end)
    if not (found_begin and found_end):
        sys.exit(f"{doc}: the metric-table markers are missing")
    doc.write_text(head + begin + markdown_table() + end + tail, encoding="utf-8")
    print(f"wrote the metric table of {doc}")
