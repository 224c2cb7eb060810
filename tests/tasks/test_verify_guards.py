"""The verifier's edges, stated exactly: the answer-length bound, separators at the ends, the
style of each glyph, the style of text that does not parse, and "never raises"."""

from __future__ import annotations

import pytest

from distillscope.tasks import verify
from distillscope.tasks.verify import MAX_ANSWER_CHARS, check_countdown, detect_style, parse_steps


def test_an_answer_of_exactly_the_bound_is_parsed_and_one_more_is_not():
    body = "2+3=5".ljust(MAX_ANSWER_CHARS)
    assert parse_steps(body) == [(2, "+", 3, 5, "plain")]
    assert parse_steps(body + " ") is None
    assert parse_steps(f"<answer>{body}</answer>") == [(2, "+", 3, 5, "plain")]


@pytest.mark.parametrize("text", ["2+3=5,", ",2+3=5", ";2+3=5;", " , 2+3=5 ; "])
def test_separators_at_the_ends_are_ignored(text):
    assert parse_steps(text) == [(2, "+", 3, 5, "plain")]


@pytest.mark.parametrize(
    ("text", "style"),
    [("2+3=5", "plain"), ("2p3>5", "alt"), ("2p3=5", "alt"), ("2+3>5", "alt"), ("2×3=6", "plain")],
)
def test_an_alt_glyph_or_an_alt_equals_sign_makes_a_step_alt(text, style):
    assert parse_steps(text)[0][-1] == style


@pytest.mark.parametrize(
    ("text", "style"),
    [
        ("2x3=6", "alt"),  # parses: judged by its steps, not by its glyphs ("=" is plain's)
        ("2+3=5,5p1>6", "mixed"),
        ("2+3=", "plain"),  # does not parse: judged by the glyphs only one style uses
        ("2p3 and then", "alt"),
        ("2p3>", "alt"),
        ("> 5", "alt"),
        ("2+3>", "mixed"),
        ("X marks the spot", "none"),
        ("P M X D", "none"),
        ("2P3", "none"),
        ("", "none"),
    ],
)
def test_detect_style(text, style):
    assert detect_style(text) == style


def test_check_countdown_gives_false_when_parsing_raises(monkeypatch):
    def broken(text):
        raise ValueError("boom")

    monkeypatch.setattr(verify, "parse_steps", broken)
    assert check_countdown([2, 3], 5, "2+3=5") is False
