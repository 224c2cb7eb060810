"""Completion positions in bins: the per-position profiles of docs/method.md §5 and §8.

Per-position diagnostics (forward KL, teacher entropy, cross-entropy, estimator bias, gradient
norms) are averaged over the completion tokens whose position falls in the same bin. A token's
position is its index among its row's completion tokens (0 for the first, EOS included), so a
bin pools the same stage of every answer whatever its prompt length.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PositionBin:
    """Completion positions ``[start, stop)``: the mean of a quantity over their tokens."""

    start: int
    stop: int
    mean: float
    count: int


def completion_positions(mask_B_T: torch.Tensor) -> torch.Tensor:
    """Index of each completion token among its row's completion tokens, −1 elsewhere;
    ``[B, T]``."""
    keep_B_T = mask_B_T.bool()
    index_B_T = keep_B_T.long().cumsum(dim=-1) - 1
    return index_B_T.masked_fill(~keep_B_T, -1)


def bin_edges(max_len: int, n_bins: int) -> list[int]:
    """``n_bins`` + 1 increasing edges splitting positions ``0 … max_len − 1`` into contiguous
    bins of (nearly) equal width; fewer bins when ``max_len`` < ``n_bins``."""
    if max_len < 1 or n_bins < 1:
        raise ValueError(f"need max_len ≥ 1 and n_bins ≥ 1, got {max_len}, {n_bins}")
    n = min(n_bins, max_len)
    return [round(i * max_len / n) for i in range(n + 1)]


def binned_means(
    values_B_T: torch.Tensor, mask_B_T: torch.Tensor, edges: list[int]
) -> list[PositionBin]:
    """The mean of ``values_B_T`` over the completion tokens of each position bin.

    ``edges`` from :func:`bin_edges`; a token at position p counts in the bin with
    ``edges[i] ≤ p < edges[i + 1]`` (positions past the last edge are left out). An empty bin has
    mean NaN and count 0. Values are reduced in fp64 with one device sync.
    """
    if values_B_T.shape != mask_B_T.shape:
        raise ValueError(
            f"values_B_T {tuple(values_B_T.shape)} and mask_B_T {tuple(mask_B_T.shape)} differ"
        )
    pos_B_T = completion_positions(mask_B_T)
    values = values_B_T.detach().double()
    sums, counts = [], []
    for start, stop in zip(edges[:-1], edges[1:], strict=True):
        in_bin_B_T = (pos_B_T >= start) & (pos_B_T < stop)
        sums.append(torch.where(in_bin_B_T, values, 0.0).sum())
        counts.append(in_bin_B_T.sum().double())
    stacked = torch.stack([torch.stack(sums), torch.stack(counts)]).tolist()  # one sync
    out = []
    for i, (total, count) in enumerate(zip(*stacked, strict=True)):
        mean = total / count if count else float("nan")
        out.append(PositionBin(edges[i], edges[i + 1], mean, int(count)))
    return out
