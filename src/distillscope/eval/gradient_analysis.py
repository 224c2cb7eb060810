"""The gradient analysis of docs/method.md §5 on real rollouts: ``gradients.json``.

For each λ of the spectrum, on one batch of rollouts ρ_λ (:func:`.analysis.draw_rollouts`):

- per completion position: ‖∂F/∂z_S‖, ‖∂R/∂z_S‖, the log-ratio spread R_n, F_n and R_n, and
  TV(π_λ, π_λ') against every other λ' at the same prefix (the sampling distributions);
- per sequence y: the parameter gradients g_F(y), g_R(y) of its token-mean F and R (one
  backward each); their mean over the batch is ∇L(ρ_λ) as training's ``seq_mean`` computes it,
  so ‖∇L‖ is the pre-clip global gradient norm of one step, and E‖g‖² the second moment;
- Jacobian probes: at ``probes`` positions, ‖J_nᵀ u‖ / ‖u‖ for u = ∂F/∂z_S and ∂R/∂z_S, with
  J_n = ∂z_S,n / ∂θ. Their largest value is the **empirical B** — a lower estimate of the true
  bound B (which is over all v), so a bound that holds with it also holds with the true B.

Checks: every §5 bound at the logit level (exact, B = 1/τ_S) and at the parameter level with the
empirical B; for pairs of λ, ‖∇L(ρ_λ) − ∇L(ρ_λ')‖ against the bound at E_x[TV], where the
sequence TV is estimated from above by min(1, Σ_n TV_n) along each side's rollouts (the coupling
bound, averaged over the prompts; the smaller of the two sides). Finite batches add sampling
noise to the gradient difference, recorded beside it (``noise``: its standard error).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from distillscope.eval.analysis import (
    AnalysisSpec,
    Target,
    completion_logits,
    draw_rollouts,
    header,
    load_models,
    loss_temperatures,
)
from distillscope.models.load import ModelPair
from distillscope.objectives.divergences import (
    forward_kl_tokens,
    reverse_kl_tokens,
    tempered_log_softmax,
)
from distillscope.objectives.gradient_bounds import (
    PositionGradients,
    check_bound,
    forward_difference_bound,
    forward_norm_bound,
    forward_second_moment_bound,
    logit_gradients,
    logit_level_checks,
    position_gradients,
    reverse_difference_bound,
    reverse_second_moment_bound,
    total_variation,
)
from distillscope.objectives.positions import bin_edges, binned_means
from distillscope.rollout.policies import behavior_logprobs
from distillscope.rollout.rollouts import Rollouts
from distillscope.rollout.spectrum import spectrum_scores

#: the per-position quantities, named as the fields of PositionGradients
_QUANTITIES = ("forward_norm", "reverse_norm", "spread", "forward_kl", "reverse_kl")


@dataclass
class _LamResult:
    """What one λ's batch gives: per-position tensors, per-sequence gradient sums, probes."""

    mask_B_T: torch.Tensor
    positions: dict[str, torch.Tensor]  # name → [B, T]
    sampling_logp: torch.Tensor  # [B, T, V] log π_λ at each prefix (for TV against other λ)
    pair_logp: dict[float, torch.Tensor] = field(default_factory=dict)  # λ' → log π_λ' [B,T,V]
    grad_sum: dict[str, torch.Tensor] = field(default_factory=dict)  # "forward"/"reverse" → Σ g
    sq_sum: dict[str, float] = field(default_factory=dict)  # Σ ‖g(y)‖²
    rows: int = 0  # sequences with ≥ 1 completion token
    ratios: list[float] = field(default_factory=list)  # ‖Jᵀu‖ / ‖u‖ of the probes

    def grad(self, direction: str) -> torch.Tensor:
        return self.grad_sum[direction] / max(self.rows, 1)

    def mean_sq(self, direction: str) -> float:
        return self.sq_sum[direction] / max(self.rows, 1)

    def noise_var(self, direction: str) -> float:
        """Variance of the batch mean gradient: (E‖g‖² − ‖E g‖²) / n."""
        spread = self.mean_sq(direction) - float(self.grad(direction).square().sum())
        return max(spread, 0.0) / max(self.rows, 1)


def _sampling_logp(policy, z_s: torch.Tensor, z_t: torch.Tensor, lam: float) -> torch.Tensor:
    """log π_λ ``[..., V]`` of the spectrum at λ with ``policy``'s sampling temperatures."""
    ell_s = tempered_log_softmax(z_s, policy.student_temperature)
    ell_t = tempered_log_softmax(z_t, policy.teacher_temperature)
    scores = spectrum_scores(ell_s, ell_t, lam, policy.alpha, policy.c)
    return behavior_logprobs(scores, policy.top_p, normalized=abs(lam) == 1.0)


def _flat(grads: tuple, params: list[torch.Tensor]) -> torch.Tensor:
    """One fp32 vector of a gradient tuple (unused parameters count as zeros)."""
    parts = [
        torch.zeros_like(p).reshape(-1) if g is None else g.reshape(-1)
        for g, p in zip(grads, params, strict=True)
    ]
    return torch.cat(parts).float()


def _row_gradients(
    pair: ModelPair,
    r: Rollouts,
    z_t_B_T_V: torch.Tensor,
    temperatures: tuple[float, float],
    probes_per_row: int,
    out: _LamResult,
    rng: random.Random,
) -> None:
    """Per sequence: one student forward, g_F(y) and g_R(y) by autograd, the Jacobian probes."""
    student = pair.student
    params = [p for p in student.parameters() if p.requires_grad]
    student_t, teacher_t = temperatures
    for b in range(r.batch_size):
        keep_T = out.mask_B_T[b]
        n_tokens = int(keep_T.sum())
        if not n_tokens:
            continue
        z_s_T_V = completion_logits(
            student, r.rows(torch.tensor([b])), "student", z_t_B_T_V.shape[-1]
        )[0]
        logp_s = tempered_log_softmax(z_s_T_V, student_t)
        logp_t = tempered_log_softmax(z_t_B_T_V[b], teacher_t).to(logp_s.device)
        keep = keep_T.to(logp_s.device)
        losses = {
            "forward": forward_kl_tokens(logp_s, logp_t)[keep].mean(),
            "reverse": reverse_kl_tokens(logp_s, logp_t)[keep].mean(),
        }
        for direction, loss in losses.items():
            g = _flat(
                torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True), params
            )
            out.grad_sum[direction] = out.grad_sum.get(direction, 0.0) + g
            out.sq_sum[direction] = out.sq_sum.get(direction, 0.0) + float(g.square().sum())
        out.rows += 1
        u_f, u_r = logit_gradients(logp_s.detach(), logp_t, student_t)
        positions = keep.nonzero().squeeze(-1).tolist()
        for n in rng.sample(positions, min(probes_per_row, len(positions))):
            for u_V in (u_f[n], u_r[n]):
                norm_u = float(u_V.norm())
                if norm_u == 0.0:
                    continue
                vjp = torch.autograd.grad(
                    (z_s_T_V[n] * u_V).sum(), params, retain_graph=True, allow_unused=True
                )
                out.ratios.append(float(_flat(vjp, params).norm()) / norm_u)


def _analyse_lam(pair, target, spec, lam, policy, r, lams) -> _LamResult:
    """Everything one λ's rollouts give (positions, per-sequence gradients, probes)."""
    cfg = target.cfg
    student_t, teacher_t = loss_temperatures(cfg, spec)
    with torch.no_grad():
        z_t = completion_logits(pair.teacher, r, "teacher", pair.vocab_size)
        z_s = completion_logits(pair.student, r, "student", pair.vocab_size)
        z_t = z_t.to(z_s.device)
        logp_s, logp_t = tempered_log_softmax(z_s, student_t), tempered_log_softmax(z_t, teacher_t)
        g = position_gradients(logp_s, logp_t, student_t)
        others = {other: _sampling_logp(policy, z_s, z_t, other) for other in lams if other != lam}
        result = _LamResult(
            mask_B_T=r.completion_mask_B_T.bool().to(z_s.device),
            positions={name: getattr(g, name) for name in _QUANTITIES},
            sampling_logp=_sampling_logp(policy, z_s, z_t, lam),
            pair_logp=others,
        )
    per_row = -(-spec.probes // max(r.batch_size, 1))  # ceil: about ``probes`` in all
    rng = random.Random(f"{cfg.seed}/probes/{lam}")
    _row_gradients(pair, r, z_t, (student_t, teacher_t), per_row, result, rng)
    return result


def _sequence_tv(a: _LamResult, lam_b: float) -> tuple[float, torch.Tensor]:
    """(E_x[min(1, Σ_n TV_n)] along a's rollouts, per-position TV ``[B, T]``) against λ_b."""
    tv_B_T = total_variation(a.sampling_logp, a.pair_logp[lam_b])
    tv_B_T = torch.where(a.mask_B_T, tv_B_T, torch.zeros_like(tv_B_T))
    rows = a.mask_B_T.any(dim=-1)
    per_seq = tv_B_T.sum(dim=-1).clamp(max=1.0)[rows]
    return (float(per_seq.mean()) if per_seq.numel() else 0.0), tv_B_T


def _bins(values_B_T: torch.Tensor, mask_B_T: torch.Tensor, edges: list[int]) -> list[float]:
    return [b.mean for b in binned_means(values_B_T, mask_B_T, edges)]


def _lam_record(lam: float, res: _LamResult, edges: list[int], b_emp: float) -> tuple[dict, list]:
    """One λ's summary, per-bin profile and parameter-level checks."""
    keep = res.mask_B_T
    spread = float(res.positions["spread"][keep].max()) if bool(keep.any()) else 0.0
    norms = {d: float(res.grad(d).norm()) for d in ("forward", "reverse")}
    record = {
        "lam": lam,
        "tokens": int(keep.sum()),
        "sequences": res.rows,
        "grad_norm_forward": norms["forward"],
        "grad_norm_reverse": norms["reverse"],
        "mean_sq_forward": res.mean_sq("forward"),
        "mean_sq_reverse": res.mean_sq("reverse"),
        "max_spread": spread,
        "bins": {name: _bins(res.positions[name], keep, edges) for name in _QUANTITIES},
    }
    b_text, r_text = f"B = {b_emp:.4g}", f"B = {b_emp:.4g}, R = {spread:.4g}"
    f_sq, r_sq = res.mean_sq("forward"), res.mean_sq("reverse")
    checks = [
        check_bound("‖∇L_F‖ pre-clip", "parameter", "√2·B", b_text,
                    forward_norm_bound(b_emp), norms["forward"]),
        check_bound("E‖g_F(y)‖²", "parameter", "2B²", b_text,
                    forward_second_moment_bound(b_emp), f_sq),
        check_bound("‖∇L_R‖ pre-clip", "parameter", "B·R", r_text, b_emp * spread,
                    norms["reverse"]),
        check_bound("E‖g_R(y)‖²", "parameter", "B²R²", r_text,
                    reverse_second_moment_bound(b_emp, spread), r_sq),
    ]  # fmt: skip
    return record, checks


def _pair_record(
    lam_a: float, lam_b: float, results: dict, edges: list[int], b_emp: float, spreads: dict
) -> tuple[dict, list]:
    """‖∇L(ρ_a) − ∇L(ρ_b)‖ against the difference bounds at E_x[TV(ρ_a, ρ_b)]."""
    a, b = results[lam_a], results[lam_b]
    tv_a, tv_a_B_T = _sequence_tv(a, lam_b)
    tv_b, _ = _sequence_tv(b, lam_a)
    tv = min(tv_a, tv_b)
    spread = max(spreads[lam_a], spreads[lam_b])
    diff = {d: float((a.grad(d) - b.grad(d)).norm()) for d in ("forward", "reverse")}
    noise = {d: (a.noise_var(d) + b.noise_var(d)) ** 0.5 for d in ("forward", "reverse")}
    record = {
        "lams": [lam_a, lam_b],
        "tv_sequence": tv,
        "tv_position_mean": float(tv_a_B_T[a.mask_B_T].mean()) if bool(a.mask_B_T.any()) else 0.0,
        "tv_bins": _bins(tv_a_B_T, a.mask_B_T, edges),
        "diff_forward": diff["forward"],
        "diff_reverse": diff["reverse"],
        "noise_forward": noise["forward"],
        "noise_reverse": noise["reverse"],
        "spread": spread,
    }
    b_text = f"B = {b_emp:.4g}, TV ≤ {tv:.4g}"
    checks = [
        check_bound("‖∇L_F(ρ) − ∇L_F(ρ')‖", "parameter", "2√2·B·TV", b_text,
                    forward_difference_bound(b_emp, tv), diff["forward"]),
        check_bound("‖∇L_R(ρ) − ∇L_R(ρ')‖", "parameter", "2·B·R·TV",
                    f"{b_text}, R = {spread:.4g}",
                    reverse_difference_bound(b_emp, spread, tv), diff["reverse"]),
    ]  # fmt: skip
    return record, checks


def gradient_analysis(target: Target, spec: AnalysisSpec, pair: ModelPair | None = None) -> dict:
    """The whole §5 analysis of ``target`` at ``spec.lams``; the ``gradients.json`` dict.

    ``checks`` lists every bound (level, λ or pair, formula, value, observed, holds); ``per_lam``
    and ``pairs`` the numbers behind them with per-position-bin profiles over ``edges``.
    """
    cfg = target.cfg
    pair = pair or load_models(target)
    student_t, _ = loss_temperatures(cfg, spec)
    edges = bin_edges(cfg.task.max_new_tokens, spec.n_bins)
    pair.student.eval()  # no dropout: the gradient of the model that sampled
    results = {
        lam: _analyse_lam(pair, target, spec, lam, policy, r, spec.lams)
        for lam, (policy, r) in draw_rollouts(cfg, pair, spec).items()
    }
    ratios = [x for res in results.values() for x in res.ratios]
    b_emp = max(ratios) if ratios else float("nan")
    checks, per_lam, spreads = [], [], {}
    for lam, res in results.items():
        positions = PositionGradients(**res.positions)
        for c in logit_level_checks(positions, res.mask_B_T, student_t):
            checks.append({"lam": lam, **c.row()})
        record, lam_checks = _lam_record(lam, res, edges, b_emp)
        spreads[lam] = record["max_spread"]
        per_lam.append(record)
        checks += [{"lam": lam, **c.row()} for c in lam_checks]
    pairs = []
    lams = list(results)
    for i, lam_a in enumerate(lams):
        for lam_b in lams[i + 1 :]:
            record, pair_checks = _pair_record(lam_a, lam_b, results, edges, b_emp, spreads)
            pairs.append(record)
            checks += [{"lam": None, "pair": [lam_a, lam_b], **c.row()} for c in pair_checks]
    out = header(target, spec, pair, "gradients")
    out["empirical_B"] = {
        "value": b_emp,
        "probes": len(ratios),
        "meaning": "largest ‖J_nᵀu‖/‖u‖ over the probed positions and u = ∂F/∂z, ∂R/∂z: a lower "
        "estimate of the true Jacobian bound B",
    }
    out |= {"edges": edges, "checks": checks, "per_lam": per_lam, "pairs": pairs}
    return out
