"""docs/method.md §9 and docs/scorecard.md's claim table are the rendering of the specs."""

from __future__ import annotations

import pytest

from distillscope.scorecard.claim_docs import BLOCKS, DOCS, RENDER, rendered_block
from distillscope.scorecard.claims import CLAIMS


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_docs_are_rendered_from_the_specifications(name):
    block = rendered_block((DOCS / name).read_text(encoding="utf-8"), name)
    assert block is not None, f"docs/{name} lost its claim markers"
    assert block == RENDER[name](), (
        f"docs/{name} is stale: regenerate it with `python -m distillscope.scorecard.claim_docs`"
    )


def test_every_specification_states_its_margins_and_sources():
    for c in CLAIMS:
        assert c.quotes and c.source.startswith(("[P]", "[D]")) and c.experiments, c.id
        for p in (*c.premises, *c.parts):
            assert p.why and p.estimand and p.name, (c.id, p.name)
            assert p.claimed() in c.rule()


def test_the_docs_list_every_claims_quotes():
    text = (DOCS / "method.md").read_text(encoding="utf-8")
    for c in CLAIMS:
        for q in c.quotes:
            assert f"`{q.seed}:{q.line}`" in text and q.original in text and q.english in text
    assert text.count("*(instrument check: no seed states it)*") == 3
