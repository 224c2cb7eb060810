"""Properties of the hub row adapters' parsers: lettered option text round-trips, an answer names
its own option, and neither parser raises or runs long on any text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from distillscope.tasks.adapters import (
    LETTERS,
    labelled_options,
    match_answer,
    medreason_row,
    parse_option_lines,
)

# one line of text: no character str.splitlines() breaks at
line_text = st.text(
    st.characters(
        blacklist_categories=("Cc", "Zl", "Zp", "Cs"), blacklist_characters="\x1c\x1d\x1e\x85"
    ),
    min_size=1,
    max_size=30,
).filter(str.strip)
option_lists = st.lists(line_text, min_size=2, max_size=26)
words = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)


@given(option_lists, st.sampled_from(["", "Answer Choices:\n", "Options:\n\n"]))
def test_lettered_option_lines_round_trip(options, header):
    text = header + "\n".join(f"{LETTERS[k]}. {o}" for k, o in enumerate(options))
    assert parse_option_lines(text) == {LETTERS[k]: o.strip() for k, o in enumerate(options)}


@given(st.text(max_size=300))
def test_any_text_parses_to_lettered_options_or_none(text):
    parsed = parse_option_lines(text)
    assert parsed is None or (len(parsed) >= 2 and list(parsed) == list(LETTERS[: len(parsed)]))


@settings(max_examples=200)
@given(
    st.lists(words, min_size=2, max_size=8, unique=True),
    st.data(),
    st.sampled_from(["", ".", ". Explanation: because", ", as shown", " (see above)"]),
)
def test_an_answer_names_its_own_option(options, data, tail):
    k = data.draw(st.integers(0, len(options) - 1))
    letters = {LETTERS[i]: o for i, o in enumerate(options)}
    lead = data.draw(st.sampled_from(["", "The answer is ", "The final decision is: "]))
    answer = lead + options[k].upper() + tail
    assert match_answer(answer, letters) == LETTERS[k]
    row = {"question": "Q?", "options": "\n".join(f"{L}. {o}" for L, o in letters.items())}
    assert medreason_row({**row, "answer": answer}, "here")["answer"] == LETTERS[k]


def test_the_longest_option_an_answer_starts_with_wins_and_ties_name_none():
    options = {"A": "Lead", "B": "Lead acetate", "C": "Mercury"}
    assert match_answer("Lead acetate poisoning", options) == "B"
    assert match_answer("Lead. Explanation: lead acetate is not it", options) == "A"
    assert match_answer("Leadership", options) is None
    assert match_answer("Mercury", {**options, "D": "mercury"}) is None
    assert match_answer("anything", {}) is None


@given(st.text(max_size=200), st.dictionaries(st.sampled_from(LETTERS[:6]), st.text(max_size=20)))
def test_match_answer_never_raises(answer, options):
    result = match_answer(answer, options)
    assert result is None or result in options


def test_long_option_text_is_read_in_linear_time():
    text = "Answer Choices:\n" + "A. x\n" * 10 + ("B" * 5_000 + "\n") * 3
    assert parse_option_lines(text) is None  # one option only (the A lines continue each other)
    assert parse_option_lines("A. x\nB. y\n" + "z" * 30_000) is None  # over the bound: skipped


def test_labelled_options_map_labels_to_texts():
    assert labelled_options({"text": ["x", "y"], "label": ["A", "B"]}, "w") == {"A": "x", "B": "y"}
    assert labelled_options({"text": ["x", "y"]}, "w") == ["x", "y"]
    assert labelled_options(["x", "y"], "w") == ["x", "y"]
