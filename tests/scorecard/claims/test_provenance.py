"""Provenance (docs/method.md §9): every claim quotes the seed sentences it tests — file, line,
the sentence in the seed's language and in English — and the quotes are found in the seeds
(copied into docs/seeds/: CI clones only the repository). A sentence that quantifies over a
stratum ("under both KL directions") is tested stratum by stratum in at least one claim."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from distillscope.scorecard.claim_spec import INSTRUMENT, POOLED, SEEDS, Claim, Part, Quote, Routes
from distillscope.scorecard.claims import CLAIMS

SEED_DIR = Path(__file__).resolve().parents[3] / "docs" / "seeds"
#: The shared originals, where this checkout has them (not in CI).
SHARED = Path("/work/shared/seeds")


def _normal(text: str) -> str:
    return " ".join(text.split())


def _line(seed: str, line: int) -> str:
    lines = (SEED_DIR / seed).read_text(encoding="utf-8").split("\n")
    return lines[line - 1] if 0 < line <= len(lines) else ""


def found(q: Quote) -> bool:
    """Whether the quote's original is a substring of its named line (whitespace normalised)."""
    return _normal(q.original) in _normal(_line(q.seed, q.line))


def test_the_seed_copies_are_all_here_and_unchanged():
    assert sorted(p.name for p in SEED_DIR.glob("*.txt")) == sorted(SEEDS)
    assert (SEED_DIR / "README.md").is_file()
    if SHARED.is_dir():  # a checkout beside the shared originals: the copies are verbatim
        for name in SEEDS:
            assert (SEED_DIR / name).read_bytes() == (SHARED / name).read_bytes(), name


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"claim{c.id}")
def test_every_quote_is_found_on_its_named_line(claim: Claim):
    assert claim.quotes, f"claim {claim.id} quotes no seed sentence"
    for q in claim.quotes:
        assert q.english.strip() and q.original.strip(), (claim.id, q)
        assert found(q), f"claim {claim.id}: {q.original!r} is not on {q.seed}:{q.line}"


def test_a_misquote_or_a_wrong_line_is_caught():
    q = CLAIMS[0].quotes[0]
    assert found(q)
    assert not found(Quote(q.seed, q.line + 1, q.original, q.english))
    assert not found(Quote(q.seed, q.line, q.original.replace("72%", "74%"), q.english))
    assert found(Quote(q.seed, q.line, "  " + q.original.replace(" ", "\n "), q.english))
    with pytest.raises(ValueError, match="seed"):
        Quote("999_unknown.txt", 1, "x", "x")
    with pytest.raises(ValueError, match="quotes"):
        Claim(99, "t", (), ("main",), (), "needs")


def test_the_instrument_checks_are_the_statements_no_seed_makes():
    # read against the five seeds: no seed states claims 7, 8 and 13 (docs/method.md §9)
    assert {c.id for c in CLAIMS if c.kind == INSTRUMENT} == {7, 8, 13}
    assert all(c.source.startswith(("[P]", "[D]")) for c in CLAIMS)


#: Phrases of the quotes' English that quantify over a stratum → a word naming that stratum.
QUANTIFIED = {
    "both kl directions": "KL",
    "every combination of rollout and lr": "LR",
    "every matched comparison": "pair",
    "consistently outperforms the naive-opd": "regulation",
    "over the whole range": "λ",
}


def _parts(c: Claim) -> list[Part]:
    out: list[Part] = []
    for p in (*c.premises, *c.parts):
        out += list(p.routes) if isinstance(p, Routes) else [p]
    for r in c.replays:
        out += _parts(r.main)
    return out


def stratified(word: str, claims=CLAIMS) -> bool:
    """Whether some part tests stratum ``word`` one stratum at a time: a non-pooled quantifier
    over it, or a range over every cell of it (every pair of cells is judged)."""
    for c in claims:
        for p in _parts(c):
            if p.quantifier != POOLED and word in p.over:
                return True
            if re.search(rf"(every|over|all)[^.;]*{re.escape(word)}", p.estimand):
                if p.name.endswith("range"):
                    return True
    return False


def test_a_quantified_sentence_is_tested_stratum_by_stratum_somewhere():
    seen = set()
    for c in CLAIMS:
        for q in c.quotes:
            for phrase, word in QUANTIFIED.items():
                if phrase in q.english.lower():
                    seen.add(phrase)
                    assert stratified(word), f"claim {c.id}: {phrase!r} is pooled everywhere"
    assert seen == set(QUANTIFIED)  # every phrase is still quoted somewhere


def test_a_pooled_only_registry_fails_the_quantifier_check():
    pooled = [c for c in CLAIMS if c.id == 1]  # one pooled contrast, nothing per KL direction
    assert not stratified("KL", pooled)
    assert stratified("KL", [c for c in CLAIMS if c.id == 10])
