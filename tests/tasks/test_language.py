"""The language identifier of chat-format style runs, on short texts written here."""

from __future__ import annotations

import pytest

from distillscope.tasks.language import (
    LANGUAGE_CODES,
    MAX_IDENTIFIED_CHARS,
    MISSING_LINGUA,
    language_identifier,
    reasoning_text,
    require_lingua,
)

lingua = pytest.importorskip("lingua", reason="the optional extra lang is not installed")

ENGLISH = [
    "First I add three and five to get eight, then I multiply eight by seven.",
    "Let me try a different combination of the numbers before giving up.",
    "That does not reach the target, so I will subtract two from the larger number.",
    "The product is too large; dividing by four gives an exact integer.",
    "I need to use each number exactly once and only integer divisions.",
    "So the answer is fifty six, which matches the target.",
    "Maybe starting with the biggest number works better here.",
    "Wait, that uses the five twice.",
]
SPANISH = [
    "Primero sumo tres y cinco para obtener ocho, luego multiplico ocho por siete.",
    "Voy a probar otra combinación de los números antes de rendirme.",
    "Eso no llega al objetivo, así que resto dos del número más grande.",
    "El producto es demasiado grande; al dividir entre cuatro obtengo un entero exacto.",
    "Tengo que usar cada número exactamente una vez y solo divisiones enteras.",
    "Entonces la respuesta es cincuenta y seis, que coincide con el objetivo.",
    "Quizás empezar con el número más grande funciona mejor aquí.",
    "Espera, eso usa el cinco dos veces.",
]


@pytest.fixture(scope="module")
def spanish():
    return language_identifier("es")


def test_the_codes_are_lingua_s_languages():
    from lingua import Language

    assert sorted(LANGUAGE_CODES) == sorted(
        lang.iso_code_639_1.name.lower() for lang in Language.all()
    )
    assert len(LANGUAGE_CODES) == 75


@pytest.mark.parametrize("text", SPANISH)
def test_spanish_sentences_are_spanish(spanish, text):
    assert spanish.is_language(text)


@pytest.mark.parametrize("text", ENGLISH)
def test_english_sentences_are_not_spanish(spanish, text):
    assert not spanish.is_language(text)


def test_english_is_identified_as_english():
    english = language_identifier("en")
    assert english.identify(ENGLISH) == [True] * len(ENGLISH)
    assert english.identify(SPANISH) == [False] * len(SPANISH)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "Sí.", "Hola, vale", "3+5=8,8*7=56", "<answer>3+5=8,8*7=56</answer>", "<think>"],
)
def test_empty_very_short_or_letterless_texts_are_never_the_language(spanish, text):
    assert not spanish.is_language(text)


def test_mixed_texts_are_the_language_most_of_them_is_written_in(spanish):
    mostly_spanish = f"{SPANISH[0]} {SPANISH[2]} {SPANISH[4]} Okay, done."
    mostly_english = f"{ENGLISH[0]} {ENGLISH[2]} {ENGLISH[4]} Vale, listo."
    assert spanish.is_language(mostly_spanish)
    assert not spanish.is_language(mostly_english)


def test_the_reasoning_is_what_is_identified(spanish):
    answer = "<answer>3+5=8,8*7=56</answer>"
    assert spanish.is_language(f"<think>{SPANISH[0]} {SPANISH[1]}</think> {answer}")
    # English reasoning with a Spanish sentence after the think block: the reasoning counts
    assert not spanish.is_language(f"<think>{ENGLISH[0]}</think> {SPANISH[1]} {answer}")
    assert spanish.is_language(f"<think>{SPANISH[3]}")  # cut off before </think>
    assert spanish.is_language(f"{SPANISH[5]} {answer}")  # no think block: the whole text


def test_reasoning_text_cuts_at_the_think_tags_and_the_length_bound():
    assert reasoning_text("a <think>b c</think> d <think>e</think>") == "b c"
    assert reasoning_text("x <think>open to the end") == "open to the end"
    assert reasoning_text("no tags") == "no tags"
    assert len(reasoning_text("a" * (MAX_IDENTIFIED_CHARS + 50))) == MAX_IDENTIFIED_CHARS


def test_one_identifier_per_language_and_process():
    assert language_identifier("es") is language_identifier("es")
    assert language_identifier("es").language == lingua.Language.SPANISH


def test_an_unknown_code_is_refused():
    with pytest.raises(ValueError, match="'xx' is not the ISO 639-1 code"):
        language_identifier("xx")


def test_without_lingua_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "lingua", None)  # import lingua raises
    with pytest.raises(ValueError) as err:
        require_lingua()
    assert str(err.value) == MISSING_LINGUA
    assert "distillscope[lang]" in MISSING_LINGUA and "\n" not in MISSING_LINGUA
