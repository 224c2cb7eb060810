"""docs/method.md §9's claim list (each claim's seed quotes, parts and margins) and
docs/scorecard.md's claim table, rendered from the specs.

    python -m distillscope.scorecard.claim_docs      # rewrite both between their markers

Each document keeps a marked block (``<!-- claims:begin -->`` … ``<!-- claims:end -->`` in
docs/method.md, ``<!-- claim-table:begin -->`` … ``<!-- claim-table:end -->`` in
docs/scorecard.md) that is exactly the rendering of the specifications (``scorecard.claims``); a
test fails when either drifts.
"""

from __future__ import annotations

import sys
from pathlib import Path

from distillscope.scorecard.claim_spec import REPLAY_RULE, Part, Quote, replayed_ids
from distillscope.scorecard.claims import CLAIMS, Claim

DOCS = Path(__file__).resolve().parents[3] / "docs"
BLOCKS = {
    "method.md": ("<!-- claims:begin -->\n", "<!-- claims:end -->"),
    "scorecard.md": ("<!-- claim-table:begin -->\n", "<!-- claim-table:end -->"),
}


def _part_line(kind: str, p: Part) -> str:
    size = (
        f"published ≈ {p.published:g}"
        if p.sized
        else f"no size stated: power at the planted {p.published:g}"
    )
    return (
        f"   - {kind} `{p.claimed()}` ({p.quantified()}; {size}): {p.estimand}. *Margin:* {p.why}"
    )


def _quote_line(q: Quote) -> str:
    """A quote's line: where it is, the sentence in the seed's language, its English."""
    where = f"`{q.seed}:{q.line}`" + (f", {q.section}" if q.section else "")
    return f"   - *Seed* {where}: “{q.original}” — “{q.english}”"


def _claim_text(c: Claim) -> list[str]:
    kind = f" *({c.kind}: no seed states it)*" if c.instrument else ""
    lines = [
        f"{c.id}. **{c.title}**{kind} {c.source}. Reads only "
        f"{', '.join(f'`{e}`' for e in c.experiments)}."
    ]
    lines += [_quote_line(q) for q in c.quotes]
    lines += [
        _part_line(f"Regime premise ({p.regime})" if p.regime else "Premise", p) for p in c.premises
    ]
    lines += [_part_line("Part", p) for p in c.parts]
    if c.replays:
        grid = c.replays[0].grid
        lines.append(f"   - On the {grid}: {REPLAY_RULE.format(ids=replayed_ids(c.replays))}")
    return lines


def method_claims() -> str:
    """The numbered claim list of docs/method.md §9."""
    return "\n".join(line for c in CLAIMS for line in _claim_text(c)) + "\n"


def scorecard_table() -> str:
    """The claim table of docs/scorecard.md: claim, finding, what a study must contain."""
    rows = ["| claim | finding | source | a study must contain |", "|---|---|---|---|"]
    for c in CLAIMS:
        title = f"{c.title} *({c.kind})*" if c.instrument else c.title
        rows.append(f"| {c.id} | {title} | {c.source or '—'} | {c.needs} |")
    return "\n".join(rows) + "\n"


RENDER = {"method.md": method_claims, "scorecard.md": scorecard_table}


def rendered_block(text: str, name: str) -> str | None:
    """The marked block of document ``name``'s ``text`` (None when the markers are missing)."""
    begin, end = BLOCKS[name]
    _, found, rest = text.partition(begin)
    block, found_end, _ = rest.partition(end)
    return block if found and found_end else None


def rewrite(name: str) -> None:
    """Rewrite document ``name``'s marked block from the specifications."""
    path = DOCS / name
    begin, end = BLOCKS[name]
    head, found, rest = path.read_text(encoding="utf-8").partition(begin)
    _, found_end, tail = rest.partition(end)
    if not (found and found_end):
        sys.exit(f"{path}: the markers {begin.strip()} … {end} are missing")
    path.write_text(head + begin + RENDER[name]() + end + tail, encoding="utf-8")
    print(f"wrote the claims of {path}")


if __name__ == "__main__":
    for doc in BLOCKS:
        rewrite(doc)
