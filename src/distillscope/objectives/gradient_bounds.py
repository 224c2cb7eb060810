"""Logit gradients of forward and reverse KL and the bounds of docs/method.md §5 ([P] §5.1, App. C).

Pure tensor functions over the last (vocabulary) dimension; inputs are normalised fp32 log-probs
ℓ_S = log π_S, ℓ_T = log π_T (``tempered_log_softmax`` of each model's logits at the loss
temperatures). With z_S the student logits and τ_S its loss temperature (π_S = softmax(z_S/τ_S)):

    ∂F/∂z_S = (π_S − π_T) / τ_S                                  ([P] Eq. 4, τ_S = 1)
    ∂R/∂z_S = π_S ⊙ (ℓ_S − ℓ_T − R) / τ_S,   R = Σ_v π_S (ℓ_S − ℓ_T)   ([P] Eq. 5, τ_S = 1)

The bounds, for a student whose per-position logit Jacobian J_θ satisfies ‖J_θᵀ v‖ ≤ B‖v‖ and a
log-ratio spread R_n = max_v r − min_v r ≤ R (r = ℓ_S − ℓ_T):

    forward:  ‖∇L_F(ρ) − ∇L_F(ρ')‖ ≤ 2√2 · B · E_x[TV(ρ, ρ')],   E‖g_F‖² ≤ 2B²
    reverse:  ‖∇L_R(ρ) − ∇L_R(ρ')‖ ≤ 2 B R · E_x[TV(ρ, ρ')],     E‖g_R‖² ≤ B²R²

Both follow from a per-position gradient bound (‖π_S − π_T‖₂ ≤ √2; ‖π_S ⊙ (r − R)‖₂ ≤ R_n) and
‖E_ρ g − E_ρ' g‖ ≤ 2 TV(ρ, ρ') · sup ‖g‖. At the logit level (J = identity) B = 1/τ_S. The
forward bounds are attained (disjoint one-hot π_S, π_T); the reverse ones are not: the sharp
logit-level constant is ‖∂R/∂z_S‖ ≤ R_n / (2√2) (two tokens of mass ½ at the ends of the
spread), so R is a factor 2√2 loose there. Without a spread bound reverse KL has no
distribution-free bound: :func:`two_token_counterexample`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

SQRT2 = math.sqrt(2.0)
#: the sharp logit-level reverse constant: sup ‖π_S ⊙ (r − R)‖₂ / R_n over all distributions
REVERSE_SHARP = 1.0 / (2.0 * SQRT2)


def logit_gradients(
    logp_student_V: torch.Tensor, logp_teacher_V: torch.Tensor, student_temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(∂F/∂z_S, ∂R/∂z_S) in closed form ([P] Eq. 4–5), each shaped like the inputs.

    F = KL(π_T ‖ π_S), R = KL(π_S ‖ π_T); the teacher's temperature is already in ℓ_T (it has no
    gradient), the student's enters as the factor 1/τ_S of z_S / τ_S.
    """
    p_student_V = logp_student_V.exp()
    log_ratio_V = logp_student_V - logp_teacher_V  # r = ℓ_S − ℓ_T
    reverse_1 = (p_student_V * log_ratio_V).sum(dim=-1, keepdim=True)  # R, per position
    grad_forward_V = (p_student_V - logp_teacher_V.exp()) / student_temperature
    grad_reverse_V = p_student_V * (log_ratio_V - reverse_1) / student_temperature
    return grad_forward_V, grad_reverse_V


def log_ratio_spread(logp_student_V: torch.Tensor, logp_teacher_V: torch.Tensor) -> torch.Tensor:
    """R_n = max_v r(v) − min_v r(v), r = ℓ_S − ℓ_T over the shared vocabulary; shape ``[...]``."""
    log_ratio_V = logp_student_V - logp_teacher_V
    return log_ratio_V.amax(dim=-1) - log_ratio_V.amin(dim=-1)


def total_variation(logp_p_V: torch.Tensor, logp_q_V: torch.Tensor) -> torch.Tensor:
    """TV(p, q) = ½ Σ_v |p(v) − q(v)| per position, from log-probs; shape ``[...]``, in [0, 1]."""
    return 0.5 * (logp_p_V.exp() - logp_q_V.exp()).abs().sum(dim=-1)


@dataclass(frozen=True)
class PositionGradients:
    """Per-position quantities of §5 (each ``[B, T]``): logit-gradient norms, spread, both KLs."""

    forward_norm: torch.Tensor  # ‖∂F/∂z_S‖₂
    reverse_norm: torch.Tensor  # ‖∂R/∂z_S‖₂
    spread: torch.Tensor  # R_n = max r − min r
    forward_kl: torch.Tensor  # F_n
    reverse_kl: torch.Tensor  # R_n's KL, Σ π_S r


@torch.no_grad()
def position_gradients(
    logp_student_B_T_V: torch.Tensor,
    logp_teacher_B_T_V: torch.Tensor,
    student_temperature: float = 1.0,
) -> PositionGradients:
    """:func:`logit_gradients`' norms, :func:`log_ratio_spread` and F, R at every position."""
    grad_f, grad_r = logit_gradients(logp_student_B_T_V, logp_teacher_B_T_V, student_temperature)
    log_ratio = logp_student_B_T_V - logp_teacher_B_T_V
    return PositionGradients(
        forward_norm=grad_f.norm(dim=-1),
        reverse_norm=grad_r.norm(dim=-1),
        spread=log_ratio_spread(logp_student_B_T_V, logp_teacher_B_T_V),
        forward_kl=(logp_teacher_B_T_V.exp() * -log_ratio).sum(dim=-1),
        reverse_kl=(logp_student_B_T_V.exp() * log_ratio).sum(dim=-1),
    )


# ---------------------------------------------------------------------------------------------
# The bounds


def forward_norm_bound(b: float) -> float:
    """sup ‖g_F‖ = √2 · B (per position; so also per sequence and per batch)."""
    return SQRT2 * b


def forward_second_moment_bound(b: float) -> float:
    """E‖g_F‖² ≤ 2B²."""
    return 2.0 * b * b


def reverse_second_moment_bound(b: float, spread: float) -> float:
    """E‖g_R‖² ≤ B²R² with R the bound on the log-ratio spread."""
    return (b * spread) ** 2


def forward_difference_bound(b: float, tv: float) -> float:
    """‖∇L_F(ρ) − ∇L_F(ρ')‖ ≤ 2√2 · B · E_x[TV(ρ, ρ')]."""
    return 2.0 * SQRT2 * b * tv


def reverse_difference_bound(b: float, spread: float, tv: float) -> float:
    """‖∇L_R(ρ) − ∇L_R(ρ')‖ ≤ 2 · B · R · E_x[TV(ρ, ρ')]."""
    return 2.0 * b * spread * tv


@dataclass(frozen=True)
class BoundCheck:
    """One bound checked numerically: its formula and value, what was observed, whether it held."""

    name: str  # what is bounded, e.g. "E‖∂F/∂z‖²"
    level: str  # "logit" (J = identity, exact) or "parameter" (B empirical)
    formula: str  # the bound, e.g. "2B²"
    inputs: str  # the values it was evaluated at, e.g. "B = 1"
    bound: float  # its value
    observed: float  # the observed maximum (for an expectation: the sample mean)
    holds: bool

    def row(self) -> dict:
        """A JSON-ready dict (floats, a bool)."""
        return asdict(self)


def check_bound(
    name: str,
    level: str,
    formula: str,
    inputs: str,
    bound: float,
    observed: float,
    rtol: float = 1e-5,
) -> BoundCheck:
    """``observed ≤ bound`` up to a relative float tolerance ``rtol`` (a NaN never holds)."""
    holds = bool(observed <= bound * (1.0 + rtol) + 1e-12)
    return BoundCheck(name, level, formula, inputs, float(bound), float(observed), holds)


def logit_level_checks(
    g: PositionGradients, mask_B_T: torch.Tensor, student_temperature: float = 1.0
) -> list[BoundCheck]:
    """Every §5 bound at the logit level (J = identity, B = 1/τ_S), exact on each token.

    The per-position gradient bounds (‖∂F/∂z‖ ≤ √2 B; ‖∂R/∂z‖ ≤ B R_n with each token's own
    spread) and the second moments over the masked tokens (E‖g_F‖² ≤ 2B²; E‖g_R‖² ≤ B²R² with
    R the largest spread seen). The difference bounds follow from the first two by
    ‖E_ρ g − E_ρ' g‖ ≤ 2 TV sup ‖g‖ (:func:`gradient_difference`).
    """
    keep = mask_B_T.bool()
    if not bool(keep.any()):
        return []
    b = 1.0 / student_temperature
    f, r, spread = g.forward_norm[keep].double(), g.reverse_norm[keep].double(), g.spread[keep]
    spread = spread.double()
    big_r = float(spread.max())
    per_token_ratio = r / spread.clamp_min(1e-30)  # 0/0 (student = teacher) counts as 0
    b_text = f"B = {b:g}"
    return [
        check_bound("max ‖∂F/∂z‖", "logit", "√2·B", b_text, SQRT2 * b, f.max()),
        check_bound("E‖∂F/∂z‖²", "logit", "2B²", b_text, 2 * b * b, f.square().mean()),
        check_bound("max ‖∂R/∂z‖ / R_n", "logit", "B", b_text, b, per_token_ratio.max()),
        check_bound(
            "E‖∂R/∂z‖²",
            "logit",
            "B²R²",
            f"{b_text}, R = {big_r:.4g}",
            (b * big_r) ** 2,
            r.square().mean(),
        ),
    ]


def gradient_difference(
    rho_K: torch.Tensor, rho_prime_K: torch.Tensor, grads_K_D: torch.Tensor
) -> tuple[float, float]:
    """(‖E_ρ g − E_ρ' g‖, TV(ρ, ρ')) for rollout distributions over K outcomes with gradients g_k.

    The exact difference of two expected gradients, ‖Σ_k (ρ_k − ρ'_k) g_k‖, and the total
    variation ½ Σ_k |ρ_k − ρ'_k|: the two sides of the difference bounds on an enumerable case.
    """
    diff_K = rho_K - rho_prime_K
    difference = (diff_K[:, None] * grads_K_D).sum(dim=0).norm()
    return float(difference), float(0.5 * diff_K.abs().sum())


def two_token_counterexample(eps: float, delta: float) -> dict[str, float]:
    """Reverse KL has no distribution-free bound: a rollout change ε is amplified ~log(1/δ).

    Two prefixes a and b. At a the student equals the teacher (no gradient). At b the student is
    uniform over two tokens and the teacher puts (1 − δ, δ) on them. ρ reaches a only, ρ' reaches
    b with probability ε, so TV(ρ, ρ') = ε and ∇L(ρ) − ∇L(ρ') = −ε g(b) (logit level, B = 1):

        forward:  ‖g_F(b)‖ = √2 (½ − δ) ≤ √2/2         (bounded whatever δ)
        reverse:  ‖g_R(b)‖ = (√2/4) · log((1 − δ)/δ)  (→ ∞ as δ → 0)

    The reverse difference stays within its spread bound 2 R ε with R = log((1 − δ)/δ): the
    bound needs R, and R grows like log(1/δ). Returns TV, both differences, both amplifications
    (difference / TV) and the spread.
    """
    if not (0.0 < eps <= 1.0 and 0.0 < delta < 0.5):
        raise ValueError(f"need 0 < eps ≤ 1 and 0 < delta < 0.5, got eps={eps}, delta={delta}")
    logp_student_2_V = torch.full((2, 2), math.log(0.5), dtype=torch.float64)
    logp_teacher_2_V = torch.tensor(
        [[math.log(0.5), math.log(0.5)], [math.log1p(-delta), math.log(delta)]],
        dtype=torch.float64,
    )
    grad_f_2_V, grad_r_2_V = logit_gradients(logp_student_2_V, logp_teacher_2_V)
    rho = torch.tensor([1.0, 0.0], dtype=torch.float64)
    rho_prime = torch.tensor([1.0 - eps, eps], dtype=torch.float64)
    forward, tv = gradient_difference(rho, rho_prime, grad_f_2_V)
    reverse, _ = gradient_difference(rho, rho_prime, grad_r_2_V)
    spread = float(log_ratio_spread(logp_student_2_V[1], logp_teacher_2_V[1]))
    return {
        "tv": tv,
        "forward_difference": forward,
        "reverse_difference": reverse,
        "forward_amplification": forward / tv,
        "reverse_amplification": reverse / tv,
        "spread": spread,
        "reverse_spread_bound": reverse_difference_bound(1.0, spread, tv),
    }
