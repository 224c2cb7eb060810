"""The objectives' typed options and chunk settings, torch-free: configs read their defaults here.

- :class:`Weight` — one weight a divergence reads, declared here once (:data:`JSD_BETA`,
  :data:`MIXTURE_ALPHA`) and named by its declaration and its registry entry;
- :class:`DivergenceOptions` — what a full-vocabulary divergence reads (temperatures,
  reduction, and its weights by name);
- :class:`OPDOptions` — what only OPD reads ([D], docs/method.md §4): the advantage
  regulation, the trust region, the updates per rollout batch and the tempered-teacher opt-in;
  the ``objective.*`` fields of the same names default to its defaults;
- :class:`ChunkSpec` — how many token rows of a (rows × V) buffer the hidden-state path holds at
  once: a memory budget, or an explicit row count (:func:`chunk_rows`).

Each is built once per run from the config (``ObjectiveConfig.divergence_options()`` …) and
passed as one value, so no option list travels through the call sites.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

Reduction = Literal["seq_mean", "token_mean", "sum"]
REDUCTIONS: tuple[str, ...] = ("seq_mean", "token_mean", "sum")
Regulation = Literal["none", "hard_clip", "log_compress"]
REGULATIONS: tuple[str, ...] = ("none", "hard_clip", "log_compress")

DEFAULT_MEMORY_BUDGET_MB = 256.0
"""Default budget for a chunk's transient (rows × V) buffers; see :func:`chunk_rows`."""


def chunk_rows(
    memory_budget_mb: float, vocab_size: int, *, buffers: int = 4, bytes_per_value: int = 4
) -> int:
    """Token rows per chunk so that ``buffers`` (rows × vocab_size) buffers fit the budget.

    rows = ⌊budget / (buffers · vocab_size · bytes_per_value)⌋ with budget in MB (10⁶ bytes),
    and at least 1 (one row is the floor: a budget below one row's buffers is not honoured).
    Non-decreasing in the budget, non-increasing in the vocabulary size and buffer count.
    """
    if not memory_budget_mb > 0:
        raise ValueError(f"memory_budget_mb must be positive, got {memory_budget_mb}")
    if vocab_size < 1 or buffers < 1 or bytes_per_value < 1:
        raise ValueError(
            f"vocab_size, buffers and bytes_per_value must be ≥ 1, got "
            f"{vocab_size}, {buffers}, {bytes_per_value}"
        )
    bytes_per_row = buffers * vocab_size * bytes_per_value
    return max(1, int(memory_budget_mb * 1e6) // bytes_per_row)


@dataclass(frozen=True)
class ChunkSpec:
    """Rows per chunk of the hidden-state path: ``chunk_size`` if set, else what fits the budget.

    ``memory_budget_mb`` bounds one chunk's transient (rows × V) buffers (:func:`chunk_rows`);
    ``chunk_size`` (≥ 1) overrides it (tests, benchmarks; ``objective.chunk_size``).
    """

    memory_budget_mb: float = DEFAULT_MEMORY_BUDGET_MB
    chunk_size: int | None = None

    def __post_init__(self) -> None:
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {self.chunk_size}")
        if not self.memory_budget_mb > 0:
            raise ValueError(f"memory_budget_mb must be positive, got {self.memory_budget_mb}")

    def rows(self, vocab_size: int, *, buffers: int, bytes_per_value: int = 4) -> int:
        """The row bound for ``buffers`` (rows × ``vocab_size``) buffers of ``bytes_per_value``."""
        if self.chunk_size is not None:
            return self.chunk_size
        return chunk_rows(
            self.memory_budget_mb, vocab_size, buffers=buffers, bytes_per_value=bytes_per_value
        )


@dataclass(frozen=True)
class Weight:
    """One weight a divergence reads, a number in [0, 1]: jsd's β, the mixture's α.

    Declared once, here (torch-free: the config reads it without importing torch), and named by
    the :class:`~.divergences.Divergence` that reads it and by that divergence's registry entry
    (:mod:`.registry`); the ``objective.<name>`` config field (default, range [0, 1],
    description ``"<kind>: <description>"``), the refusal of that field under every other kind,
    the entry in :attr:`DivergenceOptions.weights` and the keyword argument of the divergence's
    ``value`` and ``gradient`` all follow from it.
    """

    name: str  # the config field objective.<name> and the keyword the divergence takes
    default: float
    description: str  # what it weighs, shown by `distillscope config` after "<kind>: "

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"a weight's name must be an identifier, got {self.name!r}")
        if not 0.0 <= self.default <= 1.0:
            raise ValueError(f"weight {self.name}: default must be in [0, 1], got {self.default}")


#: The generalised JSD's β (GKD Eq. 1): M = β π_T + (1−β) π_S.
JSD_BETA = Weight("beta", 0.5, "generalised JSD β")
#: The mixture's α: α F + (1−α) R.
MIXTURE_ALPHA = Weight("alpha", 0.5, "weight of forward KL")


@dataclass(frozen=True)
class DivergenceOptions:
    """What a full-vocabulary divergence reads: π = softmax(z / τ) per model, the reduction of
    the per-token values (docs/method.md §1) and its weights by name (``{"beta": 0.3}``); a
    divergence takes each of its :class:`Weight` s from ``weights``, or the weight's default when
    the name is absent (``Divergence.weights_of``). ``weights`` is stored read-only."""

    student_temperature: float = 1.0
    teacher_temperature: float = 1.0
    reduction: Reduction = "seq_mean"
    weights: Mapping[str, float] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", MappingProxyType(dict(self.weights)))


@dataclass(frozen=True)
class OPDOptions:
    """What only OPD reads ([D], docs/method.md §4); its fields are the ``objective.*`` fields
    of the same names, refused under every other kind.

    ``regulation``: the advantage shaping g — none, hard_clip (clip(Δℓ, clip_min, clip_max)) or
    log_compress (sign(Δℓ) · log(1 + |Δℓ|)). [D] gives no thresholds; ours default to ±3
    (docs/method.md §10). ``eps_low``/``eps_high``: the importance ratio's clip
    [1 − ε_low, 1 + ε_high]. ``updates_per_batch``: optimizer steps over one rollout batch
    (PPO-style epochs, *ours*); with one, r_t = 1 and the clip never acts. ``tempered_teacher``:
    the opt-in for a teacher temperature ≠ 1 in the advantage (by default both models enter
    Δℓ = log π_T − log π_S at temperature 1, their own distributions).
    """

    regulation: Regulation = "none"
    clip_min: float = -3.0
    clip_max: float = 3.0
    eps_low: float = 0.2
    eps_high: float = 0.2
    updates_per_batch: int = 1
    tempered_teacher: bool = False

    def __post_init__(self) -> None:
        if self.updates_per_batch < 1:
            raise ValueError(f"updates_per_batch must be at least 1, got {self.updates_per_batch}")
