"""Pure evaluation metrics: pass@k (docs/method.md §8) and update sparsity (docs/method.md §8)."""

from __future__ import annotations

from collections.abc import Mapping

import torch


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct (Chen et al. 2021,
    docs/method.md §8).

    pass@k = 1 − C(n−c, k) / C(n, k), computed stably as 1 − Π_{i=n−c+1..n} (1 − k/i);
    1.0 when n − c < k.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 ≤ c ≤ n and 1 ≤ k ≤ n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_at_k_curve(correct_counts: list[int], n: int, ks: list[int]) -> dict[int, float]:
    """Mean pass@k over items, each with ``n`` samples and ``correct_counts[i]`` correct."""
    if not correct_counts:
        return {}
    return {
        k: sum(pass_at_k(n, c, k) for c in correct_counts) / len(correct_counts)
        for k in ks
        if k <= n
    }


def _unique_tensors(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop entries that share storage with an earlier one (tied weights are counted once)."""
    seen: set[tuple[int, int, tuple[int, ...]]] = set()
    out = {}
    for name, t in state.items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        if key in seen:
            continue
        seen.add(key)
        out[name] = t
    return out


def update_sparsity(
    initial_state_dict: Mapping[str, torch.Tensor],
    final_state_dict: Mapping[str, torch.Tensor],
    tau: float = 1e-6,
    dtype: torch.dtype | None = None,
) -> float:
    """Share of parameters that did not move: S_τ = (1/P) Σ_i 1[|θ_final − θ_init| < τ]
    (docs/method.md §8).

    Tied weights (entries sharing storage in ``final_state_dict``) count once. ``dtype`` casts
    both tensors before comparing — ``torch.bfloat16`` gives the bf16 view in which sparse
    updates were first reported; ``None`` compares in float32.
    """
    final = _unique_tensors(final_state_dict)
    missing = [name for name in final if name not in initial_state_dict]
    if missing:
        raise ValueError(f"update_sparsity: initial state lacks {missing[0]!r}")
    view = dtype or torch.float32
    unchanged, total = 0, 0
    for name, after in final.items():
        before = initial_state_dict[name]
        if before.shape != after.shape:
            raise ValueError(f"update_sparsity: shape of {name!r} changed")
        delta = after.detach().to("cpu", view).float() - before.detach().to("cpu", view).float()
        unchanged += int((delta.abs() < tau).sum())
        total += delta.numel()
    return unchanged / total if total else 1.0
