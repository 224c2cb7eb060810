"""The report's summary in words: which claims a study supports, contradicts, cannot decide or
does not test, each decided claim with the one number behind it.

    for g in summary_groups(score_claims(df)):
        print(g.label, len(g.items), [(i.id, i.claim, i.headline) for i in g.items])

Plain text only, like ``tables``: ``render`` escapes it and lays it out (HTML, Markdown).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from distillscope.report.scorecard import ClaimResult
from distillscope.report.tables import VERDICT_ORDER, drop_asides, excerpt, headline_text

CLAIM_CHARS = 80  # a short claim name: the finding, not its published numbers
#: How each verdict is named in the summary, and whether its claims show their headline.
GROUP_LABEL = {
    "supported": "Supported",
    "contradicted": "Contradicted",
    "inconclusive": "Inconclusive",
    "not applicable": "Not applicable (a premise is absent)",
    "not tested": "Not tested",
    "not implemented": "Not implemented",
    "error": "Error",
}
WITH_HEADLINE = ("supported", "contradicted", "inconclusive", "not applicable", "error")
#: Verdicts whose line gives the claim's reason (why it is undecided) before its numbers.
WITH_REASON = ("inconclusive", "not applicable")
UNTESTED = ("not tested", "not implemented")


@dataclass(frozen=True)
class SummaryItem:
    """One claim in the summary: its number, short name and headline ("" when not shown)."""

    id: int
    claim: str
    headline: str


@dataclass(frozen=True)
class SummaryGroup:
    """The claims that ended with one verdict, in claim order."""

    verdict: str
    label: str
    items: list[SummaryItem]


def short_claim(claim: str, limit: int = CLAIM_CHARS) -> str:
    """A claim's finding without its published numbers: parenthesised asides dropped, cut at
    the first ":" or ";", no final period, at most ``limit`` characters (cut at a word).

    "KL direction matters more: forward KL 71–73% in every cell" → "KL direction matters more".
    """
    text = re.split(r"[:;]", drop_asides(claim), maxsplit=1)[0].strip().rstrip(".").strip()
    return excerpt(text or claim.strip(), limit)


def summary_groups(results: Sequence[ClaimResult]) -> list[SummaryGroup]:
    """The non-empty verdict groups in ``VERDICT_ORDER`` (decided ones first)."""
    groups = []
    for verdict in VERDICT_ORDER:
        items = [
            SummaryItem(
                r.id,
                short_claim(r.claim),
                line_text(r) if verdict in WITH_HEADLINE else "",
            )
            for r in results
            if r.verdict == verdict
        ]
        if items:
            groups.append(SummaryGroup(verdict, GROUP_LABEL.get(verdict, verdict), items))
    return groups


def line_text(result: ClaimResult) -> str:
    """The summary line of a claim: for an undecided one its reason in words ("lacks power
    (…)", "effect near its margin: …", "premise … is absent"), else its headline."""
    if result.verdict in WITH_REASON and result.reason:
        return f"why: {result.reason}"
    return headline_text(result)


def summary_sentence(results: Sequence[ClaimResult]) -> str:
    """One sentence with the counts: "Of 18 published claims this study supports 11, …"."""
    n = {v: sum(r.verdict == v for r in results) for v in VERDICT_ORDER}
    untested = sum(n[v] for v in UNTESTED)
    text = (
        f"Of {len(results)} published claims (docs/method.md §9) this study supports "
        f"{n['supported']}, contradicts {n['contradicted']} and cannot decide "
        f"{n['inconclusive']}; it does not test {untested}"
    )
    if n["not applicable"]:
        text += f"; {n['not applicable']} do not apply (a premise is absent)"
    if n["not implemented"]:
        text += f" ({n['not implemented']} of them not implemented in distillscope yet)"
    if n["error"]:
        text += f"; {n['error']} rule(s) failed with an error (a bug)"
    return text + "."
