"""Rollout policies ρ: who writes the completion tokens (docs/method.md §3).

A policy is a small frozen dataclass. The sampler (``sampler.py``) runs the models a policy
needs, hands it the tempered log-probs ℓ_S = log_softmax(z_S / T_S) and ℓ_T = log_softmax(z_T / T_T)
of the current position, and the policy draws the next token with :meth:`draw`, returning it with
its exact behaviour log-prob log ρ(y) (what OPD uses as π_old, docs/method.md §4).

All randomness comes from the caller's ``torch.Generator``. Every policy draws one
inverse-CDF sample (:func:`sample_token`) over the whole ``[B, V]`` batch per step
(interleaving a second one in steps where a proposal is rejected), so policies that
coincide (λ = ±1, mixture p ∈ {0, 1}, interleave with k = V) consume the generator
identically and write the same tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import torch
import torch.nn.functional as F

from distillscope.rollout.spectrum import DEFAULT_ALPHA, DEFAULT_CLIP, spectrum_scores

#: ``Rollouts.source_B`` codes: who wrote each sequence.
SOURCE_TEACHER = 0
SOURCE_STUDENT = 1
#: Both models shaped the tokens (λ-spectrum strictly between the pure ends, interleaving).
SOURCE_JOINT = -1


class RolloutPolicy(Protocol):
    """What the sampler needs from a policy (every policy below implements it)."""

    @property
    def name(self) -> str:
        """Short label stored in ``Rollouts.source``, e.g. ``spectrum(lam=0.5)``."""
        ...

    @property
    def student_temperature(self) -> float | None:
        """Temperature T_S of ℓ_S; None when the policy never runs the student."""
        ...

    @property
    def teacher_temperature(self) -> float | None:
        """Temperature T_T of ℓ_T; None when the policy never runs the teacher."""
        ...

    def assign_sources(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        """``source_B`` (int8, codes above) decided before decoding starts."""
        ...

    def models_needed(self, source_B: torch.Tensor) -> tuple[bool, bool]:
        """(run the student?, run the teacher?) for these sequences."""
        ...

    def draw(
        self,
        logp_student_B_V: torch.Tensor | None,
        logp_teacher_B_V: torch.Tensor | None,
        source_B: torch.Tensor,
        active_B: torch.Tensor,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Next token ``token_B`` and its behaviour log-prob ``logp_behavior_B`` (fp32)."""
        ...


@dataclass(frozen=True)
class _OneModelPolicy:
    """A policy where one model writes every token, ρ = π at ``temperature``; the other model
    is never run. ``ROLE`` names the writer ("student" or "teacher")."""

    ROLE: ClassVar[str]
    temperature: float
    top_p: float = 1.0

    def __post_init__(self) -> None:
        _check_sampling(self.temperature, self.top_p)

    @property
    def name(self) -> str:
        return self.ROLE

    @property
    def student_temperature(self) -> float | None:
        return self.temperature if self.ROLE == "student" else None

    @property
    def teacher_temperature(self) -> float | None:
        return self.temperature if self.ROLE == "teacher" else None

    def assign_sources(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        code = SOURCE_STUDENT if self.ROLE == "student" else SOURCE_TEACHER
        return _constant_sources(batch_size, code, generator)

    def models_needed(self, source_B: torch.Tensor) -> tuple[bool, bool]:
        return self.ROLE == "student", self.ROLE == "teacher"

    def draw(
        self,
        logp_student_B_V: torch.Tensor | None,
        logp_teacher_B_V: torch.Tensor | None,
        source_B: torch.Tensor,
        active_B: torch.Tensor,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logp_B_V = logp_student_B_V if self.ROLE == "student" else logp_teacher_B_V
        return sample_token(behavior_logprobs(logp_B_V, self.top_p, True), generator)


@dataclass(frozen=True)
class StudentPolicy(_OneModelPolicy):
    """OnPD: the current student writes, ρ = π_S at ``temperature`` [P] (default 1.0)."""

    ROLE: ClassVar[str] = "student"
    temperature: float = 1.0


@dataclass(frozen=True)
class TeacherPolicy(_OneModelPolicy):
    """OffPD: the teacher writes, ρ = π_T at ``temperature`` [P] (default 0.5)."""

    ROLE: ClassVar[str] = "teacher"
    temperature: float = 0.5


@dataclass(frozen=True)
class SpectrumPolicy:
    """ρ = π_λ of the λ-spectrum, both models decoded in lock step ([P] §5.2; ``spectrum.py``).

    λ = −1 samples exactly like ``TeacherPolicy(teacher_temperature)`` and λ = +1 exactly like
    ``StudentPolicy(student_temperature)``: same tokens and behaviour log-probs for the same
    generator (z_λ is ℓ_T / ℓ_S bit for bit there, and one uniform per row is drawn per step).
    [P] uses temperature 1.0 for both models (``rollout.spectrum_temperatures: paper``);
    ``policies`` passes each pure policy's temperature, which makes the ends OffPD and OnPD.
    """

    lam: float
    student_temperature: float = 1.0
    teacher_temperature: float = 1.0
    alpha: float = DEFAULT_ALPHA
    c: float = DEFAULT_CLIP
    top_p: float = 1.0

    def __post_init__(self) -> None:
        _check_sampling(self.student_temperature, self.top_p)
        _check_sampling(self.teacher_temperature, self.top_p)
        if not (0.0 < self.alpha <= 1.0) or self.c < 0.0 or not math.isfinite(self.lam):
            raise ValueError(
                f"SpectrumPolicy needs a finite lam, 0 < alpha <= 1 and c >= 0; "
                f"got lam={self.lam}, alpha={self.alpha}, c={self.c}"
            )

    @property
    def name(self) -> str:
        return f"spectrum(lam={self.lam:g})"

    def assign_sources(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        code = {1.0: SOURCE_STUDENT, -1.0: SOURCE_TEACHER}.get(float(self.lam), SOURCE_JOINT)
        return _constant_sources(batch_size, code, generator)

    def models_needed(self, source_B: torch.Tensor) -> tuple[bool, bool]:
        return True, True

    def draw(
        self,
        logp_student_B_V: torch.Tensor | None,
        logp_teacher_B_V: torch.Tensor | None,
        source_B: torch.Tensor,
        active_B: torch.Tensor,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        z_B_V = spectrum_scores(logp_student_B_V, logp_teacher_B_V, self.lam, self.alpha, self.c)
        # At λ = ±1, z is ℓ_S or ℓ_T itself: already normalised, exactly as the pure policy.
        normalized = abs(self.lam) == 1.0
        return sample_token(behavior_logprobs(z_B_V, self.top_p, normalized), generator)


@dataclass(frozen=True)
class MixturePolicy:
    """GKD-style sequence mixing (ours, docs/method.md §3): each sequence is student-written with
    probability ``p_student``, else teacher-written, each by its own sub-policy.

    The per-sequence coin flips are drawn from the generator only when 0 < p < 1: a certain
    outcome needs no randomness, so p = 0 / p = 1 write exactly the teacher's / student's
    tokens for the same seed. A model is run only if some sequence needs it.
    """

    p_student: float
    student: StudentPolicy = field(default_factory=StudentPolicy)
    teacher: TeacherPolicy = field(default_factory=TeacherPolicy)

    def __post_init__(self) -> None:
        if not 0.0 <= self.p_student <= 1.0:
            raise ValueError(f"MixturePolicy.p_student must be in [0, 1], got {self.p_student}")

    @property
    def name(self) -> str:
        return f"mix(p={self.p_student:g})"

    @property
    def student_temperature(self) -> float | None:
        return self.student.temperature

    @property
    def teacher_temperature(self) -> float | None:
        return self.teacher.temperature

    def assign_sources(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        if self.p_student in (0.0, 1.0):
            code = SOURCE_STUDENT if self.p_student == 1.0 else SOURCE_TEACHER
            return _constant_sources(batch_size, code, generator)
        u_B = torch.rand(batch_size, generator=generator, device=generator.device)
        return (u_B < self.p_student).to(torch.int8)

    def models_needed(self, source_B: torch.Tensor) -> tuple[bool, bool]:
        is_student_B = source_B == SOURCE_STUDENT
        return bool(is_student_B.any()), bool((~is_student_B).any())

    def draw(
        self,
        logp_student_B_V: torch.Tensor | None,
        logp_teacher_B_V: torch.Tensor | None,
        source_B: torch.Tensor,
        active_B: torch.Tensor,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if logp_teacher_B_V is None:  # every sequence is the student's
            return self.student.draw(logp_student_B_V, None, source_B, active_B, generator)
        if logp_student_B_V is None:
            return self.teacher.draw(None, logp_teacher_B_V, source_B, active_B, generator)
        logp_s_B_V = behavior_logprobs(logp_student_B_V, self.student.top_p, True)
        logp_t_B_V = behavior_logprobs(logp_teacher_B_V, self.teacher.top_p, True)
        is_student_B1 = (source_B == SOURCE_STUDENT)[:, None]
        return sample_token(torch.where(is_student_B1, logp_s_B_V, logp_t_B_V), generator)


@dataclass(frozen=True)
class InterleavePolicy:
    """Token-level interleaving in the style of speculative KD (ours, docs/method.md §3).

    The student proposes y ~ π_S; if y is outside the teacher's top-k at that position it is
    replaced by a fresh draw y' ~ π_T. The behaviour probability of the final token is exact:

        ρ(y) = π_S(y)·1[y ∈ topk_T] + (Σ_{u ∉ topk_T} π_S(u)) · π_T(y)

    (π_S, π_T after each sub-policy's temperature and top-p). Teacher draws happen only in steps
    where some active sequence rejects, so with ``top_k`` = V this is exactly ``StudentPolicy``.
    """

    top_k: int = 5
    student: StudentPolicy = field(default_factory=StudentPolicy)
    teacher: TeacherPolicy = field(default_factory=TeacherPolicy)

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"InterleavePolicy.top_k must be >= 1, got {self.top_k}")

    @property
    def name(self) -> str:
        return f"interleave(k={self.top_k})"

    @property
    def student_temperature(self) -> float | None:
        return self.student.temperature

    @property
    def teacher_temperature(self) -> float | None:
        return self.teacher.temperature

    def assign_sources(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        return _constant_sources(batch_size, SOURCE_JOINT, generator)

    def models_needed(self, source_B: torch.Tensor) -> tuple[bool, bool]:
        return True, True

    def draw(
        self,
        logp_student_B_V: torch.Tensor | None,
        logp_teacher_B_V: torch.Tensor | None,
        source_B: torch.Tensor,
        active_B: torch.Tensor,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logp_prop_B_V = behavior_logprobs(logp_student_B_V, self.student.top_p, True)
        logp_repl_B_V = behavior_logprobs(logp_teacher_B_V, self.teacher.top_p, True)
        token_B, _ = sample_token(logp_prop_B_V, generator)
        k = min(self.top_k, logp_teacher_B_V.shape[-1])
        topk_idx_B_K = logp_teacher_B_V.topk(k, dim=-1).indices
        in_topk_B_V = torch.zeros_like(logp_teacher_B_V, dtype=torch.bool)
        in_topk_B_V.scatter_(-1, topk_idx_B_K, True)
        reject_B = ~_gather(in_topk_B_V, token_B) & active_B
        # Only active rows decide whether the teacher is asked: finished rows' logits are
        # noise, and must not change how much of the generator is consumed.
        if bool(reject_B.any()):
            replacement_B, _ = sample_token(logp_repl_B_V, generator)
            token_B = torch.where(reject_B, replacement_B, token_B)
        return token_B, _interleave_logprob(logp_prop_B_V, logp_repl_B_V, in_topk_B_V, token_B)


def _interleave_logprob(
    logp_prop_B_V: torch.Tensor,
    logp_repl_B_V: torch.Tensor,
    in_topk_B_V: torch.Tensor,
    token_B: torch.Tensor,
) -> torch.Tensor:
    """log ρ(y) = log[π_S(y)·1[y ∈ topk_T] + (Σ_{u ∉ topk_T} π_S(u))·π_T(y)], in log space."""
    log_reject_mass_B = torch.logsumexp(logp_prop_B_V.masked_fill(in_topk_B_V, -math.inf), -1)
    accepted_B = torch.where(
        _gather(in_topk_B_V, token_B), _gather(logp_prop_B_V, token_B), -math.inf
    )
    replaced_B = log_reject_mass_B + _gather(logp_repl_B_V, token_B)
    return torch.logaddexp(accepted_B, replaced_B)


class NonFiniteSamplingError(FloatingPointError):
    """A model's next-token distribution held NaN or infinity (the run has diverged)."""


def behavior_logprobs(
    scores_B_V: torch.Tensor, top_p: float = 1.0, normalized: bool = False
) -> torch.Tensor:
    """The sampling distribution log ρ = log_softmax(nucleus(log_softmax(scores), top_p)).

    Scores are unnormalised log-weights (for a pure policy, ℓ itself). Top-p keeps the smallest
    set of most likely tokens whose mass reaches ``top_p`` (the top token always) and
    renormalises over it [Holtzman et al. 2020]; ``top_p = 1.0`` skips the filter entirely.
    ``normalized=True`` says the scores already are log-probs (a ``log_softmax`` output), so the
    first normalisation is skipped: one pass over ``[B, V]`` less per token, the same ρ.
    """
    logp_B_V = scores_B_V if normalized else F.log_softmax(scores_B_V, dim=-1)
    if top_p >= 1.0:
        return logp_B_V
    sorted_B_V, order_B_V = logp_B_V.sort(dim=-1, descending=True)
    # Mass strictly before each token in sorted order: a token is kept while that mass < top_p.
    mass_before_B_V = sorted_B_V.exp().cumsum(dim=-1) - sorted_B_V.exp()
    drop_sorted_B_V = mass_before_B_V >= top_p
    drop_B_V = torch.zeros_like(drop_sorted_B_V).scatter(-1, order_B_V, drop_sorted_B_V)
    return F.log_softmax(logp_B_V.masked_fill(drop_B_V, -math.inf), dim=-1)


def sample_token(
    logp_B_V: torch.Tensor, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """One draw per row from exp(logp) with ``generator``; returns ``(token_B, logp_B)``.

    Inverse CDF with one u ~ U[0, 1) per row: token = min{v : F(v) > u·F(V)}, F the running
    sum of exp(logp), found in two levels (the block of ``_BLOCK`` tokens by the float64
    running sum of block masses, then the token inside that block), so only one block per row
    is summed token by token. A token of probability 0 (outside the nucleus) is never drawn.
    One uniform per row instead of ``torch.multinomial``'s one exponential per vocabulary
    entry: several times less work per token on CPU at V ≥ 32k. Raises
    :class:`NonFiniteSamplingError` when the distribution holds NaN or infinity.
    """
    p_B_V = logp_B_V.exp()
    b, v = p_B_V.shape
    if not torch.isfinite(p_B_V.sum()):
        raise NonFiniteSamplingError("non-finite sampling distribution (NaN or inf logits)")
    n_blocks = -(-v // _BLOCK)
    if n_blocks * _BLOCK != v:
        p_B_V = F.pad(p_B_V, (0, n_blocks * _BLOCK - v))
    p_B_N_K = p_B_V.view(b, n_blocks, _BLOCK)
    mass_B_N = p_B_N_K.sum(dim=-1, dtype=torch.float64)
    cdf_B_N = mass_B_N.cumsum(dim=-1)
    u_B1 = torch.rand((b, 1), generator=generator, dtype=torch.float64, device=p_B_V.device)
    target_B1 = u_B1 * cdf_B_N[:, -1:]
    block_B1 = torch.searchsorted(cdf_B_N, target_B1, right=True).clamp(max=n_blocks - 1)
    inner_B_K = p_B_N_K.gather(1, block_B1[:, :, None].expand(b, 1, _BLOCK)).squeeze(1)
    inner_cdf_B_K = inner_B_K.cumsum(dim=-1, dtype=torch.float64)
    rest_B1 = target_B1 - (cdf_B_N - mass_B_N).gather(-1, block_B1)
    # Rounding must not carry the target past the block's last token of positive mass.
    rest_B1 = torch.minimum(rest_B1, inner_cdf_B_K[:, -1:] * (1.0 - 2.0**-40))
    offset_B1 = torch.searchsorted(inner_cdf_B_K, rest_B1, right=True).clamp(max=_BLOCK - 1)
    token_B = (block_B1 * _BLOCK + offset_B1).squeeze(-1).clamp(max=v - 1)
    return token_B, _gather(logp_B_V, token_B)


#: Tokens per block of :func:`sample_token`'s two-level search.
_BLOCK = 256


def _gather(values_B_V: torch.Tensor, token_B: torch.Tensor) -> torch.Tensor:
    return values_B_V.gather(-1, token_B[:, None]).squeeze(-1)


def _constant_sources(batch_size: int, code: int, generator: torch.Generator) -> torch.Tensor:
    return torch.full((batch_size,), code, dtype=torch.int8, device=generator.device)


def _check_sampling(temperature: float, top_p: float) -> None:
    if not temperature > 0.0:
        raise ValueError(f"sampling temperature must be > 0, got {temperature}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
