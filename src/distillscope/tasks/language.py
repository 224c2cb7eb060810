"""Which language a completion reasons in: the style detector of chat-format style runs.

[P] tells the teacher to reason in Spanish while the student reads the plain prompt
(docs/method.md §8, style transfer). A run with ``task.teacher_instruction`` and
``eval.style_language`` counts the student's answers identified as that language
(``eval/teacher_style_share``); testbed runs keep the glyph detector
(:func:`distillscope.tasks.verify.detect_style`).

What is identified (:func:`reasoning_text`): the ``<think>`` part of a completion when it has
one (the reasoning the instruction is about; the answer block is equations), else the whole
completion — at most :data:`MAX_IDENTIFIED_CHARS` characters of it. A text with fewer than
:data:`MIN_LETTERS` letters is too short to identify and is never the language; a text mixing
languages is the language lingua finds most likely for the whole of it.

Identification uses lingua (``pip install 'distillscope[lang]'``) among all 75 languages it
knows, so that a text in a third language is not forced into the target or English, in its low
accuracy mode (trigram models only): a tenth of the memory and of the load time of the high
accuracy mode (≈ 80 MB and 0.3 CPU s against ≈ 0.9 GB and ≈ 9 s once Latin-script text is
seen), at the cost of errors on texts of a few words, which reasoning is not (BENCHMARKS.md,
"Language identification"). One detector is built per process, on first use.
"""

from __future__ import annotations

import functools

#: ISO 639-1 codes of the 75 languages lingua 2 identifies (tests pin the list to lingua's), so
#: that a config's ``eval.style_language`` is checked without importing lingua.
LANGUAGE_CODES = (
    "af ar az be bg bn bs ca cs cy da de el en eo es et eu fa fi fr ga gu he hi hr hu hy id is "
    "it ja ka kk ko la lg lt lv mi mk mn mr ms nb nl nn pa pl pt ro ru sk sl sn so sq sr st sv "
    "sw ta te th tl tn tr ts uk ur vi xh yo zh zu"
).split()

MIN_LETTERS = 12  # fewer letters than this: too short to identify, never the language
MAX_IDENTIFIED_CHARS = 8_000  # a runaway completion is identified from its first 8,000

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
MISSING_LINGUA = (
    "eval.style_language needs the optional extra lang (lingua-language-detector): "
    "pip install 'distillscope[lang]'"
)


def require_lingua() -> None:
    """Raise a one-line ``ValueError`` naming the extra when lingua is not installed."""
    try:
        import lingua  # noqa: F401
    except ImportError:
        raise ValueError(MISSING_LINGUA) from None


def reasoning_text(completion: str) -> str:
    """The part of ``completion`` whose language is identified: the text after its first
    ``<think>`` up to the next ``</think>`` (or the end), else the whole completion; at most
    :data:`MAX_IDENTIFIED_CHARS` characters. Linear time (two substring searches)."""
    start = completion.find(_THINK_OPEN)
    if start < 0:
        return completion[:MAX_IDENTIFIED_CHARS]
    start += len(_THINK_OPEN)
    end = completion.find(_THINK_CLOSE, start)
    return completion[start : end if end >= 0 else None][:MAX_IDENTIFIED_CHARS]


@functools.cache
def _detector():
    """The process's one lingua detector: all languages, low accuracy mode."""
    require_lingua()
    from lingua import LanguageDetectorBuilder

    return LanguageDetectorBuilder.from_all_languages().with_low_accuracy_mode().build()


class LanguageIdentifier:
    """Tells whether texts are written in one language (``code``, ISO 639-1)."""

    def __init__(self, code: str) -> None:
        require_lingua()
        from lingua import IsoCode639_1, Language

        if code not in LANGUAGE_CODES:
            raise ValueError(f"{code!r} is not the ISO 639-1 code of a language lingua identifies")
        self.code = code
        self.language = Language.from_iso_code_639_1(IsoCode639_1.from_str(code))
        self._detector = _detector()

    def is_language(self, completion: str) -> bool:
        """Whether ``completion``'s reasoning (:func:`reasoning_text`) is in the language."""
        text = reasoning_text(completion)
        if sum(ch.isalpha() for ch in text) < MIN_LETTERS:
            return False
        return self._detector.detect_language_of(text) == self.language

    def identify(self, completions: list[str]) -> list[bool]:
        """:meth:`is_language` of each of ``completions``."""
        return [self.is_language(t) for t in completions]


@functools.cache
def language_identifier(code: str) -> LanguageIdentifier:
    """The process's one :class:`LanguageIdentifier` of ``code`` (built on first use)."""
    return LanguageIdentifier(code)
