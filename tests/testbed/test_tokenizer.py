"""The testbed tokenizer survives save/load through AutoTokenizer and round-trips its alphabet."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from distillscope.testbed.tokenizer import (
    ALPHABET,
    SPECIAL_TOKENS,
    build_tokenizer,
    encode_checked,
)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """The tokenizer as a model directory serves it: saved, then read back by AutoTokenizer."""
    path = tmp_path_factory.mktemp("testbed-tok")
    build_tokenizer().save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def test_saved_tokenizer_matches_built_one(loaded):
    built = build_tokenizer()
    assert loaded.get_vocab() == built.get_vocab()
    assert len(loaded) == len(SPECIAL_TOKENS) + len(ALPHABET) == 54
    assert (loaded.pad_token_id, loaded.bos_token_id, loaded.eos_token_id) == (0, 1, 2)
    assert loaded.convert_ids_to_tokens([0, 1, 2]) == ["<pad>", "<bos>", "<eos>"]
    assert loaded.padding_side == "left"


def test_encoding_prepends_bos(loaded):
    assert loaded("cd 3,5,7 to 56:").input_ids == [1] + encode_checked("cd 3,5,7 to 56:")


def test_encode_checked_rejects_foreign_characters():
    with pytest.raises(ValueError, match=r"outside the testbed alphabet: \['!', 'A'\]"):
        encode_checked("A!")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=60))
def test_round_trip_over_the_alphabet(loaded, text):
    # "<eos>" typed as text is matched as the special token (the alphabet holds < e o s >);
    # such strings are excluded here and covered by the test below.
    assume(not any(special in text for special in SPECIAL_TOKENS))
    ids = loaded(text).input_ids
    assert ids == [1] + encode_checked(text)  # one id per character after <bos>
    assert loaded.decode(ids, skip_special_tokens=True) == text
    assert loaded.decode(ids[1:]) == text


def test_special_token_text_is_matched_as_the_special_token(loaded):
    # Known behaviour: the literal text "<eos>" encodes as id 2, not as five characters, so it
    # does not round-trip; encode_checked spells it out character by character.
    assert loaded("a<eos>b", add_special_tokens=False).input_ids == [
        encode_checked("a")[0],
        2,
        encode_checked("b")[0],
    ]
    assert len(encode_checked("<eos>")) == 5
