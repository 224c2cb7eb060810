"""The report's summary in words: which claims a study supports, contradicts, cannot decide or
does not test, each decided claim with the one number behind it.

    for g in summary_groups(score_claims(df)):
        print(g.label, len(g.items), [(i.id, i.claim, i.headline) for i in g.items])

Plain text only, like ``tables``: ``html_page`` and ``markdown_page`` escape it and lay it out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distillscope.report.tables import (
    VERDICT_ORDER,
    Table,
    drop_asides,
    excerpt,
    headline_text,
    quote_text,
)
from distillscope.results.aggregate import percent_scale
from distillscope.scorecard.runner import ClaimResult, instrument_checks, published

CLAIM_CHARS = 80  # a short claim name: the finding, not its published numbers
#: How each verdict is named in the summary, and whether its claims show their headline.
GROUP_LABEL = {
    "supported": "Supported",
    "contradicted": "Contradicted",
    "inconclusive": "Inconclusive",
    "not applicable": "Not applicable (a regime or premise is absent in this study)",
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
    """One claim in the summary: its number, short name, headline ("" when not shown) and the
    seed sentences it tests (``quote_text``)."""

    id: int
    claim: str
    headline: str
    quote: str = ""


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


#: Verdict groups whose label names the study's scope (``report.scope``): what was tested.
SCOPED_LABEL = {
    "supported": "Supported {scope}",
    "contradicted": "Contradicted — not reproduced {scope}",
    "inconclusive": "Inconclusive {scope}",
}


def group_label(verdict: str, scope: str = "") -> str:
    """A verdict group's name, with the scope ("with testbed:student (0.86M) on …") when given:
    a verdict is about the study that produced it (docs/method.md §9 "Scope")."""
    if scope and verdict in SCOPED_LABEL:
        return SCOPED_LABEL[verdict].format(scope=scope)
    return GROUP_LABEL.get(verdict, verdict)


def summary_groups(
    results: Sequence[ClaimResult], calibration: dict[str, Any] | None = None, scope: str = ""
) -> list[SummaryGroup]:
    """The non-empty verdict groups in ``VERDICT_ORDER`` (decided ones first), labelled with
    ``scope`` (``group_label``); a calibrated claim's line ends with its rule's rates
    (``rates_text``)."""
    groups = []
    for verdict in VERDICT_ORDER:
        items = [
            SummaryItem(
                r.id,
                short_claim(r.claim),
                _with_rates(line_text(r), rates_text(r, calibration))
                if verdict in WITH_HEADLINE
                else "",
                quote_text(r),
            )
            for r in results
            if r.verdict == verdict
        ]
        if items:
            groups.append(SummaryGroup(verdict, group_label(verdict, scope), items))
    return groups


def line_text(result: ClaimResult) -> str:
    """The summary line of a claim: for an undecided one its reason in words ("lacks power
    (…)", "effect near its margin: …", "premise … is absent"), else its headline."""
    if result.verdict in WITH_REASON and result.reason:
        return f"why: {result.reason}"
    return headline_text(result)


def summary_sentence(results: Sequence[ClaimResult], scope: str = "") -> str:
    """One sentence with the counts: "Of 18 published claims this study supports 11, …" — of
    the published claims only: instrument checks are never counted among them
    (``checks_sentence`` counts those); ``scope`` names what was tested."""
    return _counts_sentence(published(results), "published claims (docs/method.md §9)", scope)


def checks_sentence(results: Sequence[ClaimResult]) -> str:
    """The instrument checks' counts in one sentence ("" when the results hold none)."""
    checks = instrument_checks(results)
    if not checks:
        return ""
    ids = ", ".join(str(r.id) for r in checks)
    what = (
        f"checks of the instrument (claims {ids}: statements no seed makes, decided the same "
        "way and counted apart from the published claims)"
    )
    return _counts_sentence(checks, what)


def _counts_sentence(results: Sequence[ClaimResult], what: str, scope: str = "") -> str:
    n = {v: sum(r.verdict == v for r in results) for v in VERDICT_ORDER}
    untested = sum(n[v] for v in UNTESTED)
    study = f"this study ({scope})" if scope else "this study"
    text = (
        f"Of {len(results)} {what} {study} supports "
        f"{n['supported']}, contradicts {n['contradicted']} and cannot decide "
        f"{n['inconclusive']}; it does not test {untested}"
    )
    if n["not applicable"]:
        one = n["not applicable"] == 1
        text += (
            f"; {n['not applicable']} {'does' if one else 'do'} not apply here (the regime or "
            f"premise {'it presupposes' if one else 'they presuppose'} is absent in this study)"
        )
    if n["not implemented"]:
        text += f" ({n['not implemented']} of them not implemented in distillscope yet)"
    if n["error"]:
        text += f"; {n['error']} rule(s) failed with an error (a bug)"
    return text + "."


# --- the calibration under the study's error structure (scorecard.calibration_run) ------------


def _with_rates(line: str, rates: str) -> str:
    return f"{line} [{rates}]" if rates else line


def rates_text(result: ClaimResult, calibration: dict[str, Any] | None) -> str:
    """ "false support 1.2%, false contradiction 0.0%, power 85% (40 draws)" for a claim its
    calibration rated; "" otherwise (no calibration, or the claim was not calibrated)."""
    if calibration is None:
        return ""
    c = str(result.id)
    rates = [calibration.get(k, {}).get(c) for k in ("false_support", "false_contradiction")]
    power = calibration.get("power", {}).get(c)
    if None in rates or power is None:
        return ""
    return (
        f"false support {100 * rates[0]:.1f}%, false contradiction {100 * rates[1]:.1f}%, "
        f"power {100 * power:.0f}% ({calibration.get('draws', '?')} draws)"
    )


def calibration_sentence(calibration: dict[str, Any] | None) -> str:
    """What the rates beside the verdicts are, how many tables measured them and their Monte
    Carlo error (a rate from N tables: SE ≤ √(0.25/N))."""
    if calibration is None:
        return (
            "Not calibrated: `distillscope report DIR` (without --no-calibrate) measures each "
            "rule's false-verdict rates and power on this study's error structure."
        )
    draws = calibration.get("draws", 0)
    text = f"The rates beside each verdict come from {draws} synthetic tables per scenario"
    if "tables" in calibration:
        text += f" ({calibration['tables']} tables, {calibration.get('seconds', '?')} s)"
    if not _components(calibration):
        return text + (
            " drawn with independent Gaussian seed noise per run (a calibration written before "
            "the error structure was modelled; `distillscope report DIR` recalibrates)."
        )
    se = 100 * (0.25 / max(draws, 1)) ** 0.5
    return text + (
        " of this study's design, drawn with its own error structure: a seed effect shared "
        "by the cells of each seed, training noise per run and per-item binomial evaluation "
        "noise at the study's item and sample counts, each estimated from the study (the "
        f"table below). A rate's Monte Carlo SE is at most {se:.1f} pp."
    )


def _components(calibration: dict[str, Any]) -> dict[str, dict[str, Any]]:
    noise = calibration.get("noise", {})
    return (
        {m: c for m, c in noise.items() if isinstance(c, dict)} if isinstance(noise, dict) else {}
    )


#: Evaluated metrics are fractions (shown ×100, in pp) or pp changes (forgetting).
NOISE_COLUMNS = (
    "Metric",
    "Seed SD (pp)",
    "Training SD (pp)",
    "Evaluation SD (pp)",
    "Items × samples",
    "Source",
)


def noise_source(c: dict[str, Any]) -> str:
    """Where a metric's noise components come from: the evaluation SD from per-item outcomes
    or binomial at the mean level; the seed and training SDs estimated from the runs, or an
    assumed default when the runs give nothing to estimate from (one run per cell, or runs
    that all agree) — never labelled as measured."""
    ev = "per-item outcomes" if c.get("per_item") else "binomial at the mean level"
    k = f", pass@{c['k']}" if int(c.get("k", 1)) > 1 else ""
    if c.get("assumed"):
        return f"assumed default SDs (nothing to estimate from); evaluation: {ev}{k}"
    return ev + k


def noise_table(calibration: dict[str, Any] | None) -> Table | None:
    """The noise components the calibration drew, per metric with evaluation sampling (pp);
    None without components."""
    comps = {m: c for m, c in _components(calibration or {}).items() if c.get("items")}
    if not comps:
        return None
    rows = []
    for m, c in sorted(comps.items()):
        scale = percent_scale(m)
        sds = [f"{scale * float(c[k]):.2f}" for k in ("seed_sd", "train_sd", "eval_sd")]
        rows.append([m, *sds, f"{c['items']} × {c['samples']}", noise_source(c)])
    return Table(list(NOISE_COLUMNS), rows, numeric={1, 2, 3})
