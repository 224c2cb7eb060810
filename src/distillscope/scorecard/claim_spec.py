"""What a claim's specification is made of (docs/method.md §9 preamble).

A ``Claim`` quotes the seed sentences it tests (``Quote``: file, line, the sentence in the
seed's language and in English, the paper's section) and lists its ``Part``s and premises. A
part is an estimand (``estimate``: one ``Estimate`` per stratum) with a quantifier over those
strata, a direction (``side``) and a margin taken from the published numbers (``why``: how it
follows from them). The runner (``scorecard.runner``) decides each part on both sides of its
margin; this module holds only declarations and the words the docs are generated from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from distillscope.scorecard.estimate import Estimate
    from distillscope.scorecard.evidence import Evidence

#: Quantifiers over a part's strata: the part must hold in every stratum (``EVERY``; one
#: contradicted stratum contradicts it), on one pooled estimate (``POOLED``), in at least one
#: stratum (``ANY``; contradicted only when every stratum is), or for one named stratum against
#: each other one (``ONLY``: one estimate per other stratum, decided as ``EVERY``).
EVERY, POOLED, ANY, ONLY = "every", "pooled", "any", "only"
QUANTIFIERS = (EVERY, POOLED, ANY, ONLY)

#: Directions: the estimand lies above the margin (``ABOVE``: an effect of at least that size;
#: with a negative margin, non-inferiority), below it (``BELOW``), or inside ±margin
#: (``WITHIN``: equivalence, both one-sided bounds inside; contradicted when the interval lies
#: wholly outside the band). A range is ``WITHIN`` with its upper bound against the margin.
ABOVE, BELOW, WITHIN = "above", "below", "within"
SIDES = (ABOVE, BELOW, WITHIN)

Offsets = dict[str, np.ndarray]

#: What a claim is (docs/method.md §9 "Provenance"): a finding a seed states, or an
#: **instrument check** no seed states (the λ-spectrum moves likelihoods as designed; clipping
#: is active) — decided the same way, reported apart, never counted among published claims.
PUBLISHED, INSTRUMENT = "published claim", "instrument check"
KINDS = (PUBLISHED, INSTRUMENT)

#: The five seeds (docs/seeds/, copies of the write-ups the claims quote): file → the paper
#: it reports ("P": Piskorz et al., on- vs off-policy distillation; "D": Demystifying OPD) and
#: its language.
SEEDS = {
    "000_4fa7018284e9b536.txt": ("P", "Portuguese"),
    "001_836273fe8eeeb907.txt": ("D", "Portuguese"),
    "002_c8062276978be7ba.txt": ("P", "Spanish"),
    "003_be658795ea171503.txt": ("P", "Korean"),
    "004_dad148f87bfbc925.txt": ("P", "Italian"),
}


@dataclass(frozen=True)
class Quote:
    """One seed sentence a claim tests: ``original`` is an exact substring (up to whitespace)
    of line ``line`` (1-based) of seed file ``seed``; ``english`` its translation; ``section``
    the paper's section where the seed cites one ("§4.2", "App. D.7"), else "".

    An instrument check quotes the seed sentence that states the design it checks (the
    spectrum's mixing, the clip threshold): what the check serves, not a finding.
    """

    seed: str
    line: int
    original: str
    english: str
    section: str = ""

    def __post_init__(self) -> None:
        if self.seed not in SEEDS:
            raise ValueError(f"quote: seed {self.seed!r} is not one of {sorted(SEEDS)}")
        if self.line < 1 or not self.original.strip() or not self.english.strip():
            raise ValueError(f"quote of {self.seed}: needs a line ≥ 1, the original and English")

    @property
    def paper(self) -> str:
        """``[P]`` or ``[D]``: the paper the seed reports."""
        return f"[{SEEDS[self.seed][0]}]"

    def cite(self) -> str:
        """``002_c8062276978be7ba.txt:5, §4.2``: where the sentence is."""
        return f"{self.seed}:{self.line}" + (f", {self.section}" if self.section else "")

    def text(self) -> str:
        """The quote in one line: “original” (English) — file:line, section."""
        return f"“{self.original}” (“{self.english}”) — {self.cite()}"


def unit_suffix(unit: str) -> str:
    """A value's unit as written after it: ``%`` joined (``20%``), others spaced (``5 pp``)."""
    return unit if unit == "%" else f" {unit}" if unit else ""


@dataclass(frozen=True)
class Part:
    """One estimand of a claim, decided on both sides of its margin in each stratum."""

    name: str  # a short symbol used in the evidence ("Δ_KL")
    estimand: str  # in words, with the experiment rows it reads and how seeds block
    estimate: Callable[[Evidence], list[Estimate]]  # one Estimate per stratum
    quantifier: str  # QUANTIFIERS, with the strata named in ``over``
    side: str  # SIDES
    margin: float  # display units (pp for fractions)
    why: str  # how the margin follows from the published numbers
    published: float  # the published value of the estimand (display units), for power
    over: str = ""  # the strata in words ("LR × KL cell", "KL direction"); "" when pooled
    unit: str = "pp"
    #: A guard ("at no LR reversed beyond uncertainty"): it can only contradict; undecided, it
    #: does not stand in the way of support.
    guard: bool = False
    #: A regime premise (docs/method.md §9 "Regime premises"; ``scorecard.regime_premises``): the
    #: regime condition it measures, in words ("base pass@K of the untrained student"). Only in a
    #: claim's ``premises``: absent or not established → "not applicable — condition: value";
    #: not measurable → "not tested", never supported or contradicted.
    regime: str = ""
    #: Whether the seeds state the estimand's size. A part whose seeds state none is a sign
    #: (docs/method.md §9 "Provenance"): ``published`` is then only the effect the calibration
    #: plants, the one its power is computed at — never a published number.
    sized: bool = True

    def __post_init__(self) -> None:
        if self.quantifier not in QUANTIFIERS:
            raise ValueError(f"part {self.name!r}: quantifier must be one of {QUANTIFIERS}")
        if self.side not in SIDES:
            raise ValueError(f"part {self.name!r}: side must be one of {SIDES}")
        if self.quantifier != POOLED and not self.over:
            raise ValueError(f"part {self.name!r}: a {self.quantifier} part names its strata")

    def claimed(self) -> str:
        """The claimed side in symbols: ``Δ_KL > 5 pp``, ``|Δ| < 2 pp``."""
        m = f"{self.margin:g}{' ' + self.unit if self.unit else ''}"
        if self.side == WITHIN:
            return f"|{self.name}| < {m}"
        if self.guard:
            return f"not {self.name} {'<' if self.side == ABOVE else '>'} {m}"
        return f"{self.name} {'>' if self.side == ABOVE else '<'} {m}"

    def quantified(self) -> str:
        """``every LR × KL cell``, ``pooled``, ``only OnPD + reverse KL``."""
        return self.quantifier if self.quantifier == POOLED else f"{self.quantifier} {self.over}"


@dataclass(frozen=True)
class Routes:
    """A part that holds by any one of several routes in each stratum: each route a ``Part``
    with its own estimand, side and margin ("the gap after RLVR is within ±2 pp, or reversed,
    or smaller than before").

    In a stratum (a label common to the routes' estimates) the part is supported when some
    route is, each route at α / r (Bonferroni over the r routes), and contradicted when every
    route is; over strata the quantifier (``EVERY`` or ``POOLED``) combines them as for a part.
    """

    name: str
    routes: tuple[Part, ...]
    quantifier: str = POOLED
    over: str = ""
    guard: bool = False

    def __post_init__(self) -> None:
        if len(self.routes) < 2:
            raise ValueError(f"part {self.name!r}: routes needs at least two routes")
        if self.quantifier not in (EVERY, POOLED):
            raise ValueError(f"part {self.name!r}: routes combine over strata by every/pooled")

    @property
    def unit(self) -> str:
        return self.routes[0].unit

    @property
    def published(self) -> float:
        return self.routes[0].published

    @property
    def sized(self) -> bool:
        return self.routes[0].sized

    @property
    def estimand(self) -> str:
        return "; or ".join(r.estimand for r in self.routes)

    @property
    def why(self) -> str:
        return " ".join(r.why for r in self.routes)

    def claimed(self) -> str:
        """``|Δ| < 2 pp or Δ < 0 pp``: the routes' claimed sides."""
        return " or ".join(r.claimed() for r in self.routes)

    def quantified(self) -> str:
        return self.quantifier if self.quantifier == POOLED else f"{self.quantifier} {self.over}"


@dataclass(frozen=True)
class Simulated:
    """How the calibration draws a trajectory feature a claim reads (``Claim.simulated``): its
    value in a world without the effect, its run-to-run SD (training noise, no seed or
    evaluation part), and which runs of a design have it (a mask; the others get NaN)."""

    null: float
    sd: float
    runs: Callable[[pd.DataFrame], np.ndarray]


@dataclass(frozen=True)
class MarginCase:
    """One part of a claim planted exactly at its margin, where "supported" is false.

    ``offsets(design)`` gives per-metric offsets (stored units, one value per design row);
    with ``on_planted`` they add to the published effects (every other part holds), else they
    sit on the null world.
    """

    name: str
    offsets: Callable[[pd.DataFrame], Offsets]
    on_planted: bool = False
    #: The case falsifies the claim only on a table where claim ``given`` is decided (supported
    #: or contradicted): a replayed claim's case on an ablation (claims 14 and 15 judge only
    #: the conclusions the main grid reaches, docs/method.md §9).
    given: int | None = None


@dataclass(frozen=True)
class Claim:
    """One finding of docs/method.md §9 as a specification the runner decides: a published
    claim, or an instrument check (``kind``)."""

    id: int
    title: str  # one line, the finding with its published numbers
    quotes: tuple[Quote, ...]  # the seed sentences it tests (at least one)
    experiments: tuple[str, ...]  # the only experiments it reads (no fallback)
    parts: tuple[Part | Routes, ...]
    needs: str  # what a study must contain to test it (shown when it cannot)
    #: absent (contradicted) → "not applicable"; a regime premise (``Part.regime``) also when
    #: not established, and "not tested" when not measurable
    premises: tuple[Part, ...] = ()
    #: Trajectory features the claim reads: name → function of a run's metrics.jsonl frame.
    features: dict[str, Callable[[pd.DataFrame], float]] = field(default_factory=dict)
    #: The published effects in a design (calibration's "planted" world): offsets per metric.
    plant: Callable[[pd.DataFrame], Offsets] | None = None
    #: Published effects in units of each metric's seed-noise SD (the study's, else 0.01).
    plant_sd: Callable[[pd.DataFrame], Offsets] | None = None
    #: Metrics its ``plant`` sets as levels, not as offsets from the study's typical value.
    levels: tuple[str, ...] = ()
    #: Its trajectory features as the calibration draws them (``Simulated``), by column.
    simulated: dict[str, Simulated] = field(default_factory=dict)
    margin_cases: tuple[MarginCase, ...] = ()
    #: Columns the claim compares as one measure (experiment, metric, like): in the
    #: calibration's simulated worlds ``metric`` of ``experiment``'s runs sits at the level of
    #: ``like`` (claim 27: GRPO's rlvr/eval_accuracy against OPD's eval/accuracy), so that the
    #: null world has no effect on it.
    aligned: tuple[tuple[str, str, str], ...] = ()
    #: A null world (no effect of any axis, students learned) makes the claim true.
    null_true: bool = False
    #: Metric keys it needs that no code of distillscope writes yet: "not implemented".
    unmeasured: tuple[str, ...] = ()
    #: Other claims' specifications run again on an ablation (claims 14, 15): the claim holds
    #: when each conclusion the main grid decides is reached there too (``Replay``).
    replays: tuple[Replay, ...] = ()
    kind: str = PUBLISHED  # KINDS

    def __post_init__(self) -> None:
        if not self.quotes:
            raise ValueError(f"claim {self.id}: quotes the seed sentence(s) it tests")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind must be one of {KINDS}")

    @property
    def source(self) -> str:
        """``[P] §4.2``: the papers and sections its quotes cite."""
        papers = dict.fromkeys(q.paper for q in self.quotes)
        cites = []
        for paper in papers:
            sections = [q.section for q in self.quotes if q.paper == paper and q.section]
            cites.append(f"{paper} {', '.join(dict.fromkeys(sections))}".strip())
        return "; ".join(cites)

    @property
    def instrument(self) -> bool:
        """Whether it is an instrument check (never counted among published claims)."""
        return self.kind == INSTRUMENT

    def rule(self) -> str:
        """The rule in words (the report's Rule column; docs/method.md §9), from the parts."""
        lines = [f"Reads only: {', '.join(self.experiments)}."]
        for p in self.premises:
            kind = f"Regime premise ({p.regime})" if p.regime else "Premise"
            lines.append(f"{kind} {p.claimed()} ({p.quantified()}): {p.estimand}. {p.why}")
        for p in self.parts:
            lines.append(f"Part {p.claimed()} ({p.quantified()}): {p.estimand}. {p.why}")
        if self.replays:
            lines.append(REPLAY_RULE.format(ids=replayed_ids(self.replays)))
        return " ".join(lines)


#: How a claim with replays is decided (``scorecard.runner``), in words.
REPLAY_RULE = (
    "Replays claims {ids} on the ablation's runs (each claim's own parts and margins). "
    "Premise: at least one of them is supported on the main grid (a conclusion the main grid "
    "contradicts or leaves undecided is none that can 'hold'; absent: not applicable). "
    "Supported: every one supported on the main grid is supported on the ablation (else 'not "
    "tested' when one cannot be tested there). Contradicted: one is reversed there — "
    "contradicted on the ablation but not on the main grid, decided or not. Else inconclusive."
)


def replayed_ids(replays: tuple[Replay, ...]) -> str:
    """``1–4`` or ``1 and 2``: the claims replayed."""
    ids = [r.main.id for r in replays]
    return f"{ids[0]}–{ids[-1]}" if len(ids) > 2 else " and ".join(map(str, ids))


@dataclass(frozen=True)
class Replay:
    """A claim's specification run again on an ablation (claims 14 and 15): ``main`` as the
    main grid decides it, ``ablation`` the same parts and margins reading the ablation's runs
    (``grid``: its name in words)."""

    main: Claim
    ablation: Claim
    grid: str
