"""Row adapters of the hub tasks: published dataset rows turned into the task schemas.

The multiple-choice and math schemas are those of the file tasks (:mod:`distillscope.tasks.files`);
Countdown rows hold ``numbers`` and ``target``. Each adapter takes a row whose columns are already
renamed to the schema's field names (``task.fields``) and returns the schema row, or None for a
row the task does not use (a free-text question in a multiple-choice dataset, a proof in a math
dataset). It never evaluates text; every parser is linear in its input.

- MedReason stores the options as one text (``Answer Choices:\\nA. …\\nB. …``) and the answer as
  the correct option's text, often followed by an explanation (``Colle's fascia. Explanation:
  …``): :func:`parse_option_lines` letters the options, :func:`match_answer` finds the option the
  answer names.
- SciKnowEval stores the options as ``{"text": [...], "label": ["A", ...]}``
  (:func:`labelled_options`) and the answer as a letter (``answerKey``).
- NuminaMath-1.5 marks rows without a final answer with ``proof`` or ``notfound``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from distillscope.safeyaml import quote
from distillscope.tasks.base import Problem
from distillscope.tasks.countdown import countdown_messages
from distillscope.tasks.split import countdown_identity
from distillscope.tasks.verify import MAX_DIGITS, check_countdown

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_OPTIONS_CHARS = 20_000  # a longer option text is not a list of options: the row is skipped
MAX_OPERANDS = 10
#: NuminaMath-1.5's ``answer`` of a row that has no final answer (compared case-insensitively).
NO_FINAL_ANSWER = ("", "proof", "notfound")

# "A. text", "A) text", "(A) text", "A: text", "A.: text"
_OPTION_LINE = re.compile(r"\s*\(?([A-Z])\s*[.):]{1,2}\s*(.*)")
# "The final decision is: yes", "The answer is B" (PubMedQA-style rows of MedReason)
_LEAD_IN = re.compile(r"\s*(?:the\s+)?(?:final\s+)?(?:answer|decision)\s+is\s*:?\s*", re.I)


# ---------------------------------------------------------------------------------------------
# Multiple choice: options as one text, answers as text


def parse_option_lines(text: str) -> dict[str, str] | None:
    """``{"A": "...", "B": "...", …}`` from lettered option lines, or None when there are fewer
    than two.

    Option lines read ``A. text`` (or ``A) text``, ``(A) text``, ``A: text``) with letters in
    order from A; lines before the first option (``Answer Choices:``) are skipped, and a line
    that is not the next letter's continues the option above it.
    """
    if not isinstance(text, str) or len(text) > MAX_OPTIONS_CHARS:
        return None
    pieces: list[list[str]] = []  # each option's lines
    for line in text.splitlines():
        m = _OPTION_LINE.fullmatch(line)
        expected = LETTERS[len(pieces)] if len(pieces) < len(LETTERS) else None
        if m is not None and m.group(1) == expected and m.group(2).strip():
            pieces.append([m.group(2).strip()])
        elif pieces and line.strip():
            pieces[-1].append(line.strip())
    if len(pieces) < 2:
        return None
    return {LETTERS[k]: " ".join(lines) for k, lines in enumerate(pieces)}


def _norm(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(" .")


def match_answer(answer: str, options: dict[str, str]) -> str | None:
    """The letter of the option ``answer`` names, or None when it names none or two.

    The answer names an option when, case and spacing aside, it is the option's text or starts
    with it followed by a non-alphanumeric character (``Colle's fascia. Explanation: …``); a lead-in
    ``The answer is`` / ``The final decision is:`` is skipped. The longest such option wins
    (``Lead acetate poisoning`` names ``Lead acetate``, not ``Lead``).
    """
    lead = _LEAD_IN.match(answer)
    text = _norm(answer[lead.end() :] if lead else answer)
    best: list[tuple[int, str]] = []
    for letter, option in options.items():
        o = _norm(option)
        if o and (text == o or (text.startswith(o) and not text[len(o)].isalnum())):
            best.append((len(o), letter))
    if not best:
        return None
    best.sort(reverse=True)
    if len(best) > 1 and best[0][0] == best[1][0]:  # two options with the same text
        return None
    return best[0][1]


def _as_letters(options: Any) -> dict[str, str] | None:
    if isinstance(options, dict):
        return {str(k).strip().upper(): v for k, v in options.items() if isinstance(v, str)}
    if isinstance(options, (list, tuple)) and len(options) <= len(LETTERS):
        return {LETTERS[k]: v for k, v in enumerate(options) if isinstance(v, str)}
    return None


def _letter(answer: Any, options: dict[str, str]) -> str | None:
    """``answer`` as an option letter: the option its text names, else a letter itself."""
    if not isinstance(answer, str):
        return None
    named = match_answer(answer, options)
    bare = answer.strip().strip("()").strip()
    if named is None and len(bare) == 1 and bare.upper() in options:
        return bare.upper()
    return named


def medreason_row(row: dict[str, Any], where: str) -> dict[str, Any] | None:
    """MedReason: options from their text, the answer text as its letter; None for a row without
    lettered options (a free-text source) or whose answer names no single option."""
    options = row.get("options")
    if isinstance(options, str):
        options = parse_option_lines(options)
    letters = _as_letters(options) if options else None
    if not letters:
        return None
    answer = row.get("answer")
    if not (isinstance(answer, int) and not isinstance(answer, bool)):  # an index is kept
        answer = _letter(answer, letters)
        if answer is None:
            return None
    return {**row, "options": options, "answer": answer}


def labelled_options(value: Any, where: str) -> Any:
    """``{"text": [...], "label": [...]}`` as ``{label: text}`` (without labels: the list);
    any other value unchanged."""
    if not (isinstance(value, dict) and "text" in value):
        return value
    texts, labels = value.get("text"), value.get("label")
    if labels is None:
        return texts
    if not isinstance(texts, (list, tuple)) or not isinstance(labels, (list, tuple)):
        raise ValueError(f"{where}: field 'options' text and label must be lists")
    if len(texts) != len(labels):
        raise ValueError(
            f"{where}: field 'options' has {len(texts)} texts but {len(labels)} labels"
        )
    return dict(zip(labels, texts, strict=True))


def sciknoweval_row(row: dict[str, Any], where: str) -> dict[str, Any] | None:
    """SciKnowEval: labelled options as a letter mapping; None for a row without options or
    answer key (the open-ended, filling and extraction tasks)."""
    options = labelled_options(row.get("options"), where)
    answer = row.get("answer")
    if not options or answer is None or (isinstance(answer, str) and not answer.strip()):
        return None
    return {**row, "options": options, "answer": answer}


def numina_row(row: dict[str, Any], where: str) -> dict[str, Any] | None:
    """NuminaMath: the row unchanged, or None when it has no final answer (a proof)."""
    answer = row.get("answer")
    if answer is None or (isinstance(answer, str) and answer.strip().lower() in NO_FINAL_ANSWER):
        return None
    return row


# ---------------------------------------------------------------------------------------------
# Countdown rows


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def countdown_problem(row: dict[str, Any], where: str, index: int) -> Problem:
    """A Countdown problem from a row with ``numbers`` (2 to :data:`MAX_OPERANDS` positive
    integers) and ``target``; its identity is the Countdown one (sorted operands and target)."""
    numbers, target = row.get("numbers"), row.get("target")
    limit = 10**MAX_DIGITS  # the verifier reads numbers of up to MAX_DIGITS digits
    ok = isinstance(numbers, (list, tuple)) and 2 <= len(numbers) <= MAX_OPERANDS
    if not ok or not all(_is_int(v) and 1 <= v < limit for v in numbers):
        raise ValueError(
            f"{where}: field 'numbers' must be a list of 2 to {MAX_OPERANDS} positive integers "
            f"below 10^{MAX_DIGITS}, got {quote(numbers)}"
        )
    if not _is_int(target) or not 0 <= target < limit:
        raise ValueError(
            f"{where}: field 'target' must be an integer in 0..10^{MAX_DIGITS}, got {quote(target)}"
        )
    numbers = list(numbers)
    extra = {k: v for k, v in row.items() if k not in ("numbers", "target")}
    return Problem(
        prompt=f"cd {','.join(map(str, numbers))} to {target}:",
        answer={"numbers": numbers, "target": target},
        meta={
            "identity": countdown_identity(numbers, target),
            "index": index,
            "source": where,
            "extra": extra,
        },
    )


@dataclass(frozen=True)
class CountdownRowsTask:
    """Countdown problems read from a dataset rather than generated.

    Scored by the Countdown verifier, prompted as Countdown is (:func:`countdown_messages`); a
    row's identity is Countdown's, so the held-out split treats it as a generated problem.

    Attributes:
        name: identifier used in configs and tables.
        items: every problem, in dataset order.
    """

    name: str
    items: tuple[Problem, ...] = field(repr=False)

    def problems(self) -> list[Problem]:
        """All problems in dataset order."""
        return list(self.items)

    def sample(self, rng: random.Random) -> Problem:
        """One problem drawn uniformly with ``rng``."""
        return self.items[rng.randrange(len(self.items))]

    def score(self, problem: Problem, completion: str) -> float:
        """1.0 when the completion solves the problem (:func:`check_countdown`), else 0.0."""
        ans = problem.answer
        return float(check_countdown(ans["numbers"], ans["target"], completion))

    def chat_messages(self, problem: Problem) -> list[dict[str, str]]:
        """The [P] Countdown prompt: system role plus instructions, numbers and target."""
        return countdown_messages(problem.answer["numbers"], problem.answer["target"])
