"""The claims scorecard: each published finding of docs/method.md §9 scored against one study.

    from distillscope.scorecard import score_claims
    for r in score_claims(results_df, study_dir):
        print(r.id, r.verdict, r.reason, r.evidence)

A generic runner over the specifications of ``scorecard.claims`` (features → parts → verdict →
reason): trajectory features the claims declare are read from ``runs/*/metrics.jsonl``; each
claim reads only its declared experiments (``scorecard.evidence``); its premises and parts are
estimated per stratum and decided on both sides of their margins (``scorecard.verdicts``).

Every claim ends as *supported*, *contradicted*, *inconclusive* (always with its reason: lacks
power, or effect near its margin), *not applicable* (a premise is absent), *not tested* (the
study lacks an experiment, a metric or seeds; the result names what), *not implemented* (no
code measures what the claim needs) or *error* (the rule raised: a bug, shown with its
message).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from distillscope.results.aggregate import hashable_axes
from distillscope.results.items import ItemTable, load_items
from distillscope.results.reader import Study, metrics_frame
from distillscope.results.stats import ALPHA
from distillscope.scorecard.claim_spec import (
    INSTRUMENT,
    PUBLISHED,
    Part,
    Quote,
    Routes,
    replayed_ids,
    unit_suffix,
)
from distillscope.scorecard.claims import CLAIMS, Claim
from distillscope.scorecard.evidence import ClaimEvidence, Evidence
from distillscope.scorecard.regime_premises import EXACT_NOTE
from distillscope.scorecard.verdicts import (
    CONTRADICTED,
    NO_VARIANCE,
    NOT_TESTED,
    SUPPORTED,
    UNDECIDED,
    Decision,
    ci_label,
    decide_part,
    decide_routes,
    first_reason,
    interval_text,
    worst,
)
from distillscope.store import run_dir

INCONCLUSIVE, NOT_APPLICABLE = "inconclusive", "not applicable"
NOT_IMPLEMENTED, ERROR = "not implemented", "error"
#: The verdicts of a claim the study could test (beside not tested / implemented, error).
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_APPLICABLE)
#: Every claim id the scorecard scores, in order.
CLAIM_IDS: tuple[int, ...] = tuple(c.id for c in CLAIMS)
#: Per claim, the metric keys it needs that no code of distillscope writes yet.
UNMEASURED: dict[int, tuple[str, ...]] = {c.id: c.unmeasured for c in CLAIMS}


@dataclass(frozen=True)
class ClaimResult:
    """A claim scored against a study; ``verdict`` is one of the verdicts above."""

    id: int
    claim: str
    verdict: str
    evidence: str
    rule: str
    headline: str = ""  # the one number behind the verdict (the report's summary)
    reason: str = ""  # why an undecided claim is undecided, in words (the summary's line)
    kind: str = PUBLISHED  # a published claim or an instrument check (``spec.KINDS``)
    quotes: tuple[Quote, ...] = ()  # the seed sentences it tests (``Claim.quotes``)
    #: Its regime premises with their measured values ("low-LR bf16 sparsity of `main`: 5.1%
    #: [4.8, 5.4], needs > 20%: absent"); "" for a claim without one.
    regime: str = ""

    @property
    def instrument(self) -> bool:
        """Whether it is an instrument check: reported apart, never counted among published
        claims (docs/method.md §9 "Provenance")."""
        return self.kind == INSTRUMENT


def published(results: Collection[ClaimResult]) -> list[ClaimResult]:
    """The results of published claims (instrument checks left out): what counts are of."""
    return [r for r in results if not r.instrument]


def instrument_checks(results: Collection[ClaimResult]) -> list[ClaimResult]:
    """The results of the instrument checks (claims no seed states), in claim order."""
    return [r for r in results if r.instrument]


def score_claims(
    df: pd.DataFrame,
    study_dir: Path | None = None,
    strict: bool = False,
    claims: Collection[int] | None = None,
    alpha: float = ALPHA,
    items: ItemTable | None = None,
) -> list[ClaimResult]:
    """Score docs/method.md §9 claims against a results table (one row per run).

    Args:
        df: the study's ``results.parquet`` (all statuses; only finished runs count).
        study_dir: when given, the trajectory features the claims declare are read from
            ``runs/*/metrics.jsonl`` and, unless ``items`` is given, the runs' per-item
            outcomes from ``runs/*/eval_items.parquet`` (``items.load_items``).
        strict: re-raise a rule's exception (tests); otherwise the verdict is "error".
        claims: the ids to score (default: all).
        alpha: each test's one-sided level (``ALPHA``; α / K at each look of
            ``study --until-decided``).
        items: the runs' per-item outcomes (a calibration's drawn ones); without them and
            without ``study_dir`` every interval is over seeds only.

    Returns:
        One ClaimResult per claim, in claim order.
    """
    df = hashable_axes(df)
    specs = [c for c in CLAIMS if claims is None or c.id in claims]
    if study_dir is not None:
        df = add_features(df, lambda rid: metrics_frame(run_dir(Path(study_dir), rid)), specs)
        items = items if items is not None else load_items(Path(study_dir), df)
    ev = Evidence(df, items)
    return [score_spec(c, ev, strict, alpha) for c in specs]


def score_study(study: Study, alpha: float = ALPHA) -> list[ClaimResult]:
    """Every claim scored on a loaded study, reading what it has already read: its runs with
    the baseline rows (``Study.scored``), their per-item outcomes (``Study.items``) and each
    run's ``metrics.jsonl`` (``Study.metrics``) for the trajectory features."""
    df = add_features(study.scored, study.metrics, list(CLAIMS))  # its axes already hashable
    ev = Evidence(df, study.items)
    return [score_spec(c, ev, False, alpha) for c in CLAIMS]


def score_spec(
    claim: Claim, ev: Evidence, strict: bool = False, alpha: float = ALPHA
) -> ClaimResult:
    """One specified claim scored on the evidence (see the module docstring)."""

    def result(verdict: str, evidence: str, head: str = "", reason: str = "") -> ClaimResult:
        return ClaimResult(
            claim.id,
            claim.title,
            verdict,
            evidence,
            claim.rule(),
            head,
            reason,
            claim.kind,
            claim.quotes,
        )

    if claim.unmeasured:
        return result(NOT_IMPLEMENTED, f"no code writes {', '.join(claim.unmeasured)} yet")
    view = ev.for_claim(claim.experiments)
    try:
        if claim.replays:
            return _judge_replays(claim, ev, view, result, alpha)
        return _judge(claim, view, result, alpha)
    except Exception as err:
        if strict:
            raise
        text = f"the rule raised {type(err).__name__}: {err} (a bug in distillscope)"
        return result(ERROR, text)


def _judge(claim: Claim, view: ClaimEvidence, result, alpha: float = ALPHA) -> ClaimResult:
    if all(view.rows(e).empty and view.rows(e, rlvr=True).empty for e in claim.experiments):
        lack = f"needs {claim.needs}; the study has no finished run of {_names(claim)}"
        return result(NOT_TESTED, lack, reason=lack)
    items = [(p, _estimates(p, view)) for p in (*claim.premises, *claim.parts)]
    k = sum(_strata(p, xs) for p, xs in items)
    decided = [(p, xs, _decide(p, xs, alpha / k, alpha)) for p, xs in items]
    premises, parts = decided[: len(claim.premises)], decided[len(claim.premises) :]
    line = regime_line(premises, alpha)
    if line:
        plain_result = result

        def result(*args) -> ClaimResult:
            return replace(plain_result(*args), regime=line)

    text = " | ".join(d.text for _, _, d in decided)
    note = view.note()
    evidence = f"{text}. {note}" if note else text
    head = headline(parts + premises, alpha)
    absent = [p for p, _, d in premises if d.state == CONTRADICTED]
    states = [d.state for _, _, d in parts]
    missing = [d.reason for _, _, d in decided if d.state == NOT_TESTED]
    unrun = [e for e in claim.experiments if view.rows(e).empty and view.rows(e, rlvr=True).empty]
    if absent and unrun and all(s == NOT_TESTED for s in states):  # its own experiment unrun
        why = f"needs {claim.needs}; the study has no finished run of "
        why += " or ".join(f"`{e}`" for e in unrun)
        why += f" (premise {absent[0].claimed()} is absent where measured)"
        return result(NOT_TESTED, evidence, head, why)
    gate = regime_gate(premises, alpha)
    if gate is not None and gate[0] == NOT_TESTED and unrun:  # its own experiment unrun
        lack = f"needs {claim.needs}; the study has no finished run of "
        return result(NOT_TESTED, evidence, head, lack + " or ".join(f"`{e}`" for e in unrun))
    if gate is not None:
        return result(gate[0], evidence, head, gate[1])
    if absent:
        why = f"premise {absent[0].claimed()} is absent"
        return result(NOT_APPLICABLE, evidence, head, why)
    if CONTRADICTED in states:
        return result(CONTRADICTED, evidence, head)
    if missing:
        why = f"needs {claim.needs}; lacks {'; '.join(dict.fromkeys(missing))}"
        return result(NOT_TESTED, evidence, head, why)
    pending = [d.reason for _, _, d in decided if d.state == UNDECIDED]
    if not pending and all(s == SUPPORTED for s in states):
        return result(SUPPORTED, evidence, head)
    premise_open = [p for p, _, d in premises if d.state == UNDECIDED]
    why = first_reason(pending)
    if premise_open and not why.startswith(premise_open[0].name):
        why = f"premise {premise_open[0].claimed()} undecided; {why}"
    return result(INCONCLUSIVE, evidence, head, why)


def _judge_replays(
    claim: Claim, ev: Evidence, view: ClaimEvidence, result, alpha: float = ALPHA
) -> ClaimResult:
    """A claim that replays others on an ablation (``spec.REPLAY_RULE``)."""
    grid = claim.replays[0].grid
    ablation = sorted({e for r in claim.replays for e in r.ablation.experiments})
    if all(view.rows(e).empty for e in ablation):
        lack = f"needs {claim.needs}; the study has no finished run of " + " or ".join(
            f"`{e}`" for e in ablation
        )
        return result(NOT_TESTED, lack, reason=lack)
    k = max(len(claim.premises), 1)
    premises = [
        (p, xs, decide_part(p, xs, alpha / k, alpha))
        for p in claim.premises
        for xs in [p.estimate(view)]
    ]
    got = [
        (r.main.id, *(score_spec(c, ev, alpha=alpha) for c in (r.main, r.ablation)))
        for r in claim.replays
    ]
    lines = [d.text for _, _, d in premises] + [
        f"claim {i}: main grid {_said(m)}, {grid} {_said(a)}" for i, m, a in got
    ]
    evidence = " | ".join(lines)
    head = f"{grid}: " + ", ".join(
        f"claim {i} {'same' if a.verdict == m.verdict else a.verdict}" for i, m, a in got
    )
    absent = [p for p, _, d in premises if d.state == CONTRADICTED]
    if absent:
        return result(NOT_APPLICABLE, evidence, head, f"premise {absent[0].claimed()} is absent")
    held = [(i, m, a) for i, m, a in got if m.verdict == SUPPORTED]
    if not held:  # a conclusion the main grid does not reach cannot "hold" on an ablation
        said = ", ".join(f"{i} {m.verdict}" for i, m, _ in got)
        why = f"premise: one of claims {replayed_ids(claim.replays)} supported on the main grid "
        why += f"is absent (main grid: {said})"
        return result(NOT_APPLICABLE, evidence, head, why)
    if any(_reversed(m.verdict, a.verdict) for _, m, a in got):
        return result(CONTRADICTED, evidence, head)
    untested = [
        (i, a) for i, _, a in held if a.verdict not in (SUPPORTED, CONTRADICTED, INCONCLUSIVE)
    ]
    if untested:
        why = "; ".join(
            f"claim {i} on the {grid}: {a.verdict} ({a.reason or a.evidence})" for i, a in untested
        )
        return result(NOT_TESTED, evidence, head, f"needs {claim.needs}; {why}")
    open_ = [d.reason for _, _, d in premises if d.state != SUPPORTED]
    open_ += [f"claim {i} on the {grid}: {a.reason}" for i, _, a in held if a.verdict != SUPPORTED]
    if not open_:
        return result(SUPPORTED, evidence, head)
    return result(INCONCLUSIVE, evidence, head, first_reason(open_))


#: How a regime premise's decision reads beside its measured value.
REGIME_STATE = {
    SUPPORTED: "present",
    CONTRADICTED: "absent",
    UNDECIDED: "not established",
    NOT_TESTED: "not measured",
}


def regime_value(p: Part, xs: list, alpha: float = ALPHA) -> str:
    """A regime premise's measured value per stratum: ``5.1% [4.8, 5.4]``, ``0.0% in every
    seed``, ``held-out accuracy +1.5 pp [−5.0, +8.1]``; "not measured (lacks …)"."""
    shown = []
    for x in xs:
        if x.missing:
            shown.append(f"not measured (lacks {x.missing})")
            continue
        u = unit_suffix(p.unit)
        lo, hi = x.bounds(alpha)
        f = ".1f" if p.unit == "%" else "+.1f"  # a level in %, else a difference
        if EXACT_NOTE in x.note:
            value = f"{x.value:{f}}{u} in every seed"
        elif math.isnan(lo):
            value = f"{x.value:{f}}{u} (no interval: {NO_VARIANCE.split(':')[0]})"
        else:
            value = f"{x.value:{f}}{u} [{lo:{f}}, {hi:{f}}]"
        label = "" if x.label in ("pooled", p.name) else f"{x.label} "
        shown.append(label + value)
    return ", ".join(shown) or "not measured"


def regime_line(premises: list, alpha: float = ALPHA) -> str:
    """Each regime premise of a decided claim as ``condition: value, needs …: state``."""
    return "; ".join(
        f"{p.regime}: {regime_value(p, xs, alpha)}, needs {p.claimed()} "
        f"({REGIME_STATE.get(d.state, d.state)})"
        for p, xs, d in premises
        if p.regime
    )


def regime_gate(premises: list, alpha: float = ALPHA) -> tuple[str, str] | None:
    """(verdict, reason) when a regime premise keeps the claim from being decided
    (docs/method.md §9 "Regime premises"): absent → not applicable; not measured → not tested,
    naming what is missing; not established → not applicable; else None."""
    regime = [(p, xs, d) for p, xs, d in premises if p.regime]
    for p, xs, d in regime:
        if d.state == CONTRADICTED:
            why = f"{p.regime}: {regime_value(p, xs, alpha)} — the regime needs {p.claimed()}"
            return NOT_APPLICABLE, why
    for p, _, d in regime:
        if d.state == NOT_TESTED:
            return NOT_TESTED, f"regime premise not measured — {p.regime}: lacks {d.reason}"
    for p, xs, d in regime:
        if d.state == UNDECIDED:
            why = (
                f"{p.regime} not established: {regime_value(p, xs, alpha)} — the regime needs "
                f"{p.claimed()} beyond uncertainty"
            )
            return NOT_APPLICABLE, why
    return None


def _said(r: ClaimResult) -> str:
    """A replayed claim's verdict with its reason (undecided) or its headline (decided)."""
    return f"{r.verdict} ({r.reason or r.headline or '—'})"


def _reversed(main: str, ablation: str) -> bool:
    """Whether an ablation reverses a main-grid conclusion: contradicted there but not on the
    main grid (decided or not). A claim the main grid contradicts is no conclusion to reverse."""
    return ablation == CONTRADICTED and main != CONTRADICTED


def _estimates(p: Part | Routes, view: ClaimEvidence) -> list:
    """A part's estimates per stratum; a multi-route part's, per route."""
    return [r.estimate(view) for r in p.routes] if isinstance(p, Routes) else p.estimate(view)


def _strata(p: Part | Routes, xs: list) -> int:
    """How many contradiction tests a part adds (a multi-route part: one per stratum)."""
    return max(len(xs[0]) if isinstance(p, Routes) else len(xs), 1)


def _decide(p: Part | Routes, xs: list, alpha_contra: float, level: float = ALPHA) -> Decision:
    if isinstance(p, Routes):
        return decide_routes(p, xs, alpha_contra, level)
    return decide_part(p, xs, alpha_contra, level)


def _names(claim: Claim) -> str:
    return " or ".join(f"`{e}`" for e in claim.experiments)


def headline(decided, alpha: float = ALPHA) -> str:
    """Each part's stratum closest to failing, ``Δ_KL +1.9 pp [−0.4, +4.2]``, joined (the
    interval at ``alpha`` each side)."""
    parts = []
    for p, xs, _ in decided:
        if isinstance(p, Routes):  # the first route's estimand stands for the part
            p, xs = p.routes[0], xs[0]
        x = worst(p, xs)
        if x is not None:
            label = "" if x.label in ("pooled", p.name) else f" [{x.label}]"
            parts.append(
                f"{p.name}{label} "
                f"{interval_text(x, alpha, p.unit).replace(f' ({ci_label(alpha)})', '')}"
            )
    return "; ".join(parts)


def add_features(
    df: pd.DataFrame, metrics: Callable[[str], pd.DataFrame], claims: list[Claim]
) -> pd.DataFrame:
    """The trajectory features the ``claims`` declare, one column each, for the runs of their
    experiments (NaN where a run has no metrics.jsonl); ``metrics(run_id)`` reads a run's
    ``metrics.jsonl`` as a table."""
    wanted = [(c, name, fn) for c in claims for name, fn in c.features.items()]
    if not wanted or "run_id" not in df.columns or "experiment" not in df.columns:
        return df
    df = df.copy()
    frames: dict[str, pd.DataFrame] = {}
    for claim, name, fn in wanted:
        if name not in df.columns:
            df[name] = float("nan")
        for i in df.index[df["experiment"].map(str).isin(claim.experiments)]:
            rid = str(df.at[i, "run_id"])
            if rid not in frames:
                frames[rid] = metrics(rid)
            df.at[i, name] = fn(frames[rid])
    return df
