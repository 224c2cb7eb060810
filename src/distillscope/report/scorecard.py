"""The claims scorecard: each published finding of docs/method.md §9 scored against one study.

    from distillscope.report import score_claims
    for r in score_claims(results_df, study_dir):
        print(r.id, r.verdict, r.reason, r.evidence)

A generic runner over the specifications of ``report.claims`` (features → parts → verdict →
reason): trajectory features the claims declare are read from ``runs/*/metrics.jsonl``; each
claim reads only its declared experiments (``claims.evidence``); its premises and parts are
estimated per stratum and decided on both sides of their margins (``report.verdicts``).

Every claim ends as *supported*, *contradicted*, *inconclusive* (always with its reason: lacks
power, or effect near its margin), *not applicable* (a premise is absent), *not tested* (the
study lacks an experiment, a metric or seeds; the result names what), *not implemented* (no
code measures what the claim needs) or *error* (the rule raised: a bug, shown with its
message). Claims not yet specified in ``report.claims`` run their legacy rule
(``claimkit.ClaimRule``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from distillscope.report.aggregate import hashable_axes
from distillscope.report.claimkit import ClaimRule, Scoring
from distillscope.report.claims import CLAIMS, Claim
from distillscope.report.claims.evidence import ClaimEvidence, Evidence
from distillscope.report.claims_grid import RULES_GRID
from distillscope.report.claims_rlvr import RULES_RLVR
from distillscope.report.claims_robustness import RULES_ROBUSTNESS
from distillscope.report.load import metrics_frame
from distillscope.report.stats import ALPHA
from distillscope.report.verdicts import (
    CONTRADICTED,
    NOT_TESTED,
    SUPPORTED,
    UNDECIDED,
    ci_label,
    decide_part,
    first_reason,
    interval_text,
    worst,
)
from distillscope.store import run_dir

INCONCLUSIVE, NOT_APPLICABLE = "inconclusive", "not applicable"
NOT_IMPLEMENTED, ERROR = "not implemented", "error"
_SPECIFIED = {c.id for c in CLAIMS}
#: The legacy rules of the claims not yet specified in ``report.claims``.
LEGACY: list[ClaimRule] = sorted(
    (
        r
        for r in [
            *RULES_GRID,
            *RULES_ROBUSTNESS,
            *RULES_RLVR,
        ]
        if r.id not in _SPECIFIED
    ),
    key=lambda r: r.id,
)
#: Every claim id the scorecard scores, in order.
CLAIM_IDS: tuple[int, ...] = tuple(sorted(_SPECIFIED | {r.id for r in LEGACY}))
#: Per claim, the metric keys it needs that no code of distillscope writes yet.
UNMEASURED: dict[int, tuple[str, ...]] = {
    **{r.id: r.unmeasured for r in LEGACY},
    **{c.id: c.unmeasured for c in CLAIMS},
}


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


def score_claims(
    df: pd.DataFrame,
    study_dir: Path | None = None,
    strict: bool = False,
    claims: Collection[int] | None = None,
    alpha: float = ALPHA,
) -> list[ClaimResult]:
    """Score docs/method.md §9 claims against a results table (one row per run).

    Args:
        df: the study's ``results.parquet`` (all statuses; only finished runs count).
        study_dir: when given, the trajectory features the claims declare are read from
            ``runs/*/metrics.jsonl``; nothing else is read.
        strict: re-raise a rule's exception (tests); otherwise the verdict is "error".
        claims: the ids to score (default: all).
        alpha: each test's one-sided level (``ALPHA``; α / K at each look of
            ``study --until-decided``). Legacy rules keep ``ALPHA``.

    Returns:
        One ClaimResult per claim, in claim order.
    """
    df = hashable_axes(df)
    wanted = [c for c in CLAIM_IDS if claims is None or c in claims]
    specs = [c for c in CLAIMS if c.id in wanted]
    if study_dir is not None:
        df = add_features(df, Path(study_dir), specs)
    ev = Evidence(df)
    scoring = Scoring(df)
    by_id = {c.id: c for c in specs}
    legacy = {r.id: r for r in LEGACY}
    out = []
    for cid in wanted:
        if cid in by_id:
            out.append(score_spec(by_id[cid], ev, strict, alpha))
        else:
            out.append(score_legacy(legacy[cid], scoring, strict))
    return out


def score_spec(
    claim: Claim, ev: Evidence, strict: bool = False, alpha: float = ALPHA
) -> ClaimResult:
    """One specified claim scored on the evidence (see the module docstring)."""

    def result(verdict: str, evidence: str, head: str = "", reason: str = "") -> ClaimResult:
        return ClaimResult(claim.id, claim.title, verdict, evidence, claim.rule(), head, reason)

    if claim.unmeasured:
        return result(NOT_IMPLEMENTED, f"no code writes {', '.join(claim.unmeasured)} yet")
    view = ev.for_claim(claim.experiments)
    try:
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
    items = [(p, p.estimate(view)) for p in (*claim.premises, *claim.parts)]
    k = sum(max(len(xs), 1) for _, xs in items)
    decided = [(p, xs, decide_part(p, xs, alpha / k, alpha)) for p, xs in items]
    premises, parts = decided[: len(claim.premises)], decided[len(claim.premises) :]
    text = " | ".join(d.text for _, _, d in decided)
    note = view.note()
    evidence = f"{text}. {note}" if note else text
    head = headline(parts + premises, alpha)
    absent = [p for p, _, d in premises if d.state == CONTRADICTED]
    if absent:
        why = f"premise {absent[0].claimed()} is absent"
        return result(NOT_APPLICABLE, evidence, head, why)
    states = [d.state for _, _, d in parts]
    missing = [d.reason for _, _, d in decided if d.state == NOT_TESTED]
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


def _names(claim: Claim) -> str:
    return " or ".join(f"`{e}`" for e in claim.experiments)


def headline(decided, alpha: float = ALPHA) -> str:
    """Each part's stratum closest to failing, ``Δ_KL +1.9 pp [−0.4, +4.2]``, joined (the
    interval at ``alpha`` each side)."""
    parts = []
    for p, xs, _ in decided:
        x = worst(p, xs)
        if x is not None:
            label = "" if x.label in ("pooled", p.name) else f" [{x.label}]"
            parts.append(
                f"{p.name}{label} "
                f"{interval_text(x, alpha, p.unit).replace(f' ({ci_label(alpha)})', '')}"
            )
    return "; ".join(parts)


def score_legacy(rule: ClaimRule, scoring: Scoring, strict: bool = False) -> ClaimResult:
    """A claim not yet specified in ``report.claims``, scored by its legacy rule."""
    if rule.unmeasured:
        text = f"no code of distillscope writes {', '.join(rule.unmeasured)} yet"
        return ClaimResult(rule.id, rule.claim, NOT_IMPLEMENTED, text, "—")
    try:
        if not rule.applicable(scoring):
            text = f"needs {rule.needs}"
            return ClaimResult(rule.id, rule.claim, NOT_TESTED, text, "—", reason=text)
        lacking = rule.lacking(scoring) if rule.lacking is not None else []
        if lacking:
            text = f"needs {rule.needs}; this study lacks {', '.join(lacking)}"
            return ClaimResult(rule.id, rule.claim, NOT_TESTED, text, "—", reason=text)
        v = rule.judge(scoring)
    except Exception as err:
        if strict:
            raise
        text = f"the rule raised {type(err).__name__}: {err} (a bug in distillscope)"
        return ClaimResult(rule.id, rule.claim, ERROR, text, "—")
    reason = _legacy_reason(v.verdict, v.evidence)
    return ClaimResult(rule.id, rule.claim, v.verdict, v.evidence, v.rule, v.headline, reason)


def _legacy_reason(verdict: str, evidence: str) -> str:
    if verdict != INCONCLUSIVE:
        return ""
    if evidence.startswith("no power"):
        return "lacks power: the students did not learn beyond uncertainty"
    return "not beyond its margins (a legacy rule: no power analysis)"


def add_features(df: pd.DataFrame, study_dir: Path, claims: list[Claim]) -> pd.DataFrame:
    """The trajectory features the ``claims`` declare, one column each, for the runs of their
    experiments (NaN where a run has no metrics.jsonl)."""
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
                frames[rid] = metrics_frame(run_dir(study_dir, rid))
            df.at[i, name] = fn(frames[rid])
    return df
