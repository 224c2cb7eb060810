"""What ``distillscope analyze`` shares: the run it reads, its models, rollouts at several λ.

    distillscope analyze gradients RUN_DIR --lams -1,0,1     # → RUN_DIR/analysis/gradients.json
    distillscope analyze estimators RUN_DIR                  # → RUN_DIR/analysis/estimators.json

A target is a run directory (its ``config.yaml``, and its trained ``student/`` when present,
else the config's student) or a run-config YAML. Rollouts come from the λ-spectrum policy
(docs/method.md §3) with the run's sampling temperatures and spectrum convention, one batch of
``prompts`` training prompts (the run's step-0 prompts) per λ, every λ from the same generator
stream ``(seed, 0, ROLLOUT)``. Logits of both models are recomputed by one full forward of
each sequence, sliced to the shared vocabulary; loss temperatures default to the config's
``objective`` ones (teacher 0.5, student 1.0) and are recorded in the output.
The analyses themselves: :mod:`.gradient_analysis` (docs/method.md §5) and
:func:`estimator_analysis` (docs/method.md §2).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from distillscope.config import RunConfig, load_run_config, served_url
from distillscope.models import resolve_model_path
from distillscope.models.load import ModelPair, load_pair, pair_options
from distillscope.objectives.divergences import tempered_log_softmax
from distillscope.objectives.estimator_bias import (
    TARGETS,
    UNBIASED,
    error_summaries,
    estimator_draws,
    exact_moments,
    exact_summaries,
    overall_summary,
)
from distillscope.objectives.positions import bin_edges
from distillscope.rollout.policies import SpectrumPolicy
from distillscope.rollout.policy_registry import ROLLOUT_POLICIES
from distillscope.rollout.prompts import PromptEncoder, Stream, model_generator, select_problems
from distillscope.rollout.rollouts import PromptBatch, Rollouts, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.store import CONFIG_FILE, atomic_write_text
from distillscope.tasks import resolve_task, training_problems

ANALYSIS_DIR = "analysis"


@dataclass(frozen=True)
class AnalysisSpec:
    """What an analysis draws and how it bins; None temperatures mean the config's loss ones."""

    lams: tuple[float, ...] = (-1.0, 0.0, 1.0)
    prompts: int = 16  # rollouts per λ (one per prompt)
    n_bins: int = 6  # completion-position bins
    student_temperature: float | None = None  # loss temperature of the student
    teacher_temperature: float | None = None  # loss temperature of the teacher
    probes: int = 32  # gradients: Jacobian probes per λ for the empirical B
    samples: int = 32  # estimators: draws per position and sampling distribution
    topk: int = 8  # estimators: the top-k + tail objective's k; 0 = off

    def __post_init__(self) -> None:
        if not self.lams:
            raise ValueError("--lams needs at least one λ")
        for name in ("prompts", "n_bins", "probes", "samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be ≥ 1, got {getattr(self, name)}")
        for name in ("student_temperature", "teacher_temperature"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {value}")


def parse_lams(text: str) -> tuple[float, ...]:
    """``"-1,0,1"`` → (−1.0, 0.0, 1.0); each λ finite, in [−2, 2], no repeats (ValueError)."""
    lams = []
    for item in text.split(","):
        try:
            lam = float(item)
        except ValueError:
            raise ValueError(f"--lams: {item.strip()!r} is not a number (e.g. -1,0,1)") from None
        if not (math.isfinite(lam) and -2.0 <= lam <= 2.0):
            raise ValueError(f"--lams: λ = {item.strip()} is outside [-2, 2]")
        if lam in lams:
            raise ValueError(f"--lams: λ = {lam:g} is given twice")
        lams.append(lam)
    return tuple(lams)


@dataclass(frozen=True)
class Target:
    """A resolved analysis target: its config, student directory and output directory."""

    cfg: RunConfig
    student: Path
    out_dir: Path
    source: str  # the path given, as text


def resolve_target(path: Path, out: Path | None = None) -> Target:
    """A run directory (``config.yaml`` inside) or a run-config YAML; one-line errors otherwise.

    Nothing is written here: a bad target fails before any output exists.
    """
    path = Path(path)
    if path.is_dir():
        if not (path / CONFIG_FILE).is_file():
            raise FileNotFoundError(f"{path} is not a run directory (no {CONFIG_FILE})")
        cfg = _local_teacher(load_run_config(path / CONFIG_FILE, stored=True), path / CONFIG_FILE)
        trained = path / "student"
        student = trained if trained.is_dir() else Path(resolve_model_path(cfg.model.student))
        return Target(cfg, student, out or path / ANALYSIS_DIR, str(path))
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (give a run directory or a config YAML)")
    cfg = _local_teacher(load_run_config(path), path)
    default = Path("distillscope-runs") / ANALYSIS_DIR / path.stem
    return Target(cfg, Path(resolve_model_path(cfg.model.student)), out or default, str(path))


def _local_teacher(cfg: RunConfig, source: Path) -> RunConfig:
    """``cfg``, unless its teacher is served: the analyses need the teacher's whole distribution,
    which a server's top-k log-probs are not, so they run it locally."""
    if served_url(cfg.model.teacher):
        raise ValueError(
            f"{source}: model.teacher is served ({cfg.model.teacher}); the analyses need its "
            "whole distribution, so analyze a run config whose model.teacher is the served "
            "model's local directory"
        )
    return cfg


def loss_temperatures(cfg: RunConfig, spec: AnalysisSpec) -> tuple[float, float]:
    """(student, teacher) loss temperatures: the spec's, else the config's objective ones."""
    o = cfg.objective
    student = spec.student_temperature or o.student_temperature
    return student, spec.teacher_temperature or o.teacher_temperature


def load_models(target: Target) -> ModelPair:
    """Teacher (frozen) and the target's student, on the config's devices and dtypes."""
    m = target.cfg.model
    return load_pair(resolve_model_path(m.teacher), target.student, **pair_options(m))


def spectrum_policy(cfg: RunConfig, lam: float) -> SpectrumPolicy:
    """The run's rollout settings as a λ-spectrum policy (its temperatures convention kept)."""
    rollout = cfg.rollout.model_copy(update={"policy": "spectrum", "lam": lam})
    return ROLLOUT_POLICIES["spectrum"].make(rollout)


def draw_rollouts(
    cfg: RunConfig, pair: ModelPair, spec: AnalysisSpec
) -> dict[float, tuple[SpectrumPolicy, Rollouts]]:
    """One batch of ``spec.prompts`` rollouts per λ, on the run's step-0 training prompts."""
    task = resolve_task(cfg.task)
    pool = training_problems(task, cfg.task.eval_fraction)
    problems = select_problems(pool, min(spec.prompts, len(pool)), cfg.seed, 0)
    encoder = PromptEncoder.of_run(task, cfg.task, pair)
    device = cfg.model.device
    ids, mask = (t.to(device) for t in encoder.encode(problems, "student"))
    prompts = PromptBatch(ids, mask)
    if encoder.teacher_prompt_differs:
        t_ids, t_mask = (t.to(device) for t in encoder.encode(problems, "teacher"))
        prompts = PromptBatch(ids, mask, t_ids, t_mask)
    sampling = SamplingSpec(
        max_new_tokens=cfg.task.max_new_tokens,
        stop_ids=pair.stop_ids or pair.tokenizer.eos_token_id,
        pad_id=pair.tokenizer.pad_token_id,
        vocab_size=pair.vocab_size,
    )
    out = {}
    for lam in spec.lams:
        policy = spectrum_policy(cfg, lam)
        generator = model_generator(pair.student, cfg.seed, 0, Stream.ROLLOUT)
        r = sample_rollouts(policy, pair.student, pair.teacher, prompts, sampling, generator)
        out[lam] = (policy, r)
    return out


def completion_logits(
    model: torch.nn.Module, rollouts: Rollouts, role: str, vocab_size: int
) -> torch.Tensor:
    """Logits ``[B, T, V]`` that predict the completion tokens (one forward, grad as enabled)."""
    on_model = rollouts.to(next(model.parameters()).device)
    ids_B_S, mask_B_S, pos_B_S = on_model.sequence(role)
    logits_B_S_V = model(input_ids=ids_B_S, attention_mask=mask_B_S, position_ids=pos_B_S).logits
    return logits_B_S_V[:, rollouts.completion_logits_slice(role), :vocab_size]


def header(target: Target, spec: AnalysisSpec, pair: ModelPair, kind: str) -> dict:
    """What every output file records first: the target, λ grid and temperatures."""
    cfg = target.cfg
    student_t, teacher_t = loss_temperatures(cfg, spec)
    policy = spectrum_policy(cfg, spec.lams[0])
    return {
        "kind": kind,
        "target": target.source,
        "student": str(target.student),
        "teacher": cfg.model.teacher,
        "task": cfg.task.name,
        "seed": cfg.seed,
        "lams": list(spec.lams),
        "prompts": spec.prompts,
        "temperatures": {
            "loss_student": student_t,
            "loss_teacher": teacher_t,
            "sampling_student": policy.student_temperature,
            "sampling_teacher": policy.teacher_temperature,
            "spectrum_temperatures": cfg.rollout.spectrum_temperatures,
        },
        "vocab_size": pair.vocab_size,
    }


def write_analysis(out_dir: Path, name: str, data: dict) -> Path:
    """``out_dir/name`` as indented JSON (atomic); NaN is written as null."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    atomic_write_text(path, json.dumps(_finite(data), indent=1, ensure_ascii=False) + "\n")
    return path


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# Estimators (docs/method.md §2)


@torch.no_grad()
def estimator_analysis(target: Target, spec: AnalysisSpec, pair: ModelPair | None = None) -> dict:
    """Bias and standard deviation of every sampled estimator against the exact KL, per λ and
    position bin (:mod:`distillscope.objectives.estimator_bias`); the ``estimators.json`` dict.

    Each row has the exact bias and per-draw std (enumerating the vocabulary), and the sample
    bias ± standard error and std of ``spec.samples`` fresh draws per position from π_S and
    from π_T at the loss temperatures (stream ``(seed, 0, ESTIMATOR)``). ``unbiased``: the exact
    bias is 0 to float tolerance (expected for k1, k3 and their forward forms:
    ``expected_unbiased``); ``sample_agrees``: the sample bias is within 3 standard errors of
    the exact one (false flags a heavy tail that finite batches miss).
    """
    cfg = target.cfg
    pair = pair or load_models(target)
    student_t, teacher_t = loss_temperatures(cfg, spec)
    edges = bin_edges(cfg.task.max_new_tokens, spec.n_bins)
    topk = min(spec.topk, pair.vocab_size - 1)
    rows, bins = [], []
    for lam, (_, r) in draw_rollouts(cfg, pair, spec).items():
        logp_s = tempered_log_softmax(
            completion_logits(pair.student, r, "student", pair.vocab_size), student_t
        )
        logp_t = tempered_log_softmax(
            completion_logits(pair.teacher, r, "teacher", pair.vocab_size), teacher_t
        ).to(logp_s.device)
        mask_B_T = r.completion_mask_B_T.bool().to(logp_s.device)
        gen = model_generator(pair.student, cfg.seed, 0, Stream.ESTIMATOR)
        uniforms = torch.rand((2, spec.samples, *mask_B_T.shape), generator=gen, device=gen.device)
        estimates, targets = estimator_draws(logp_s, logp_t, uniforms.to(logp_s.device), topk)
        moments = exact_moments(logp_s, logp_t, topk)
        for name, values in estimates.items():
            row, per_bin = _estimator_rows(
                name, values, moments[name], targets[TARGETS[name]], mask_B_T, edges
            )
            rows.append({"lam": lam, **row})
            bins.append({"lam": lam, **per_bin})
    out = header(target, spec, pair, "estimators")
    out |= {"samples": spec.samples, "topk": topk, "edges": edges, "rows": rows, "bins": bins}
    return out


def _estimator_rows(
    name: str,
    values_S_B_T: torch.Tensor,
    moments: tuple[torch.Tensor, torch.Tensor],
    kl_B_T: torch.Tensor,
    mask_B_T: torch.Tensor,
    edges: list[int],
) -> tuple[dict, dict]:
    """One estimator's summary row (all positions) and its per-bin profile."""
    random = name != "topk_tail"
    s = overall_summary(values_S_B_T, kl_B_T, mask_B_T, random)
    width = max(int(mask_B_T.sum(dim=-1).max()), 1)
    ((exact_bias, exact_std),) = exact_summaries(*moments, kl_B_T, mask_B_T, bin_edges(width, 1))
    tolerance = 1e-5 * (1.0 + abs(s.target_mean))
    row = {
        "estimator": name,
        "target": TARGETS[name],
        "exact_bias": exact_bias,
        "exact_std": exact_std,
        **s.row(),
        "expected_unbiased": name in UNBIASED,
        "unbiased": bool(abs(exact_bias) <= tolerance),
        "sample_agrees": bool(abs(s.bias - exact_bias) <= 3 * s.se) if random else None,
    }
    per_bin = error_summaries(values_S_B_T, kl_B_T, mask_B_T, edges, random)
    exact = exact_summaries(*moments, kl_B_T, mask_B_T, edges)
    profile = {
        "estimator": name,
        "exact_bias": [e[0] for e in exact],
        "exact_std": [e[1] for e in exact],
        "bias": [b.bias for b in per_bin],
        "se": [b.se for b in per_bin],
        "std": [b.std for b in per_bin],
        "target_mean": [b.target_mean for b in per_bin],
    }
    return row, profile
