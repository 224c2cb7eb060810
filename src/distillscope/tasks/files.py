r"""Tasks read from local files: multiple-choice questions and boxed-answer math (docs/method.md
§7).

Real datasets cannot be bundled, so they are loaded from a local JSONL file (``.jsonl`` or
``.json-lines``: one JSON object per line, blank lines skipped) or Parquet file (``.parquet``),
one problem per row, in one of two schemas. Fields not listed are kept in
``Problem.meta["extra"]``.

Multiple choice (:class:`MultipleChoiceTask`):

- ``question`` (string): the question.
- ``options``: a list of 2–26 strings, lettered A, B, C, … in order; or an object
  ``{"A": "...", "B": "...", ...}`` whose keys are the letters A, B, C, … in sequence (null
  values are dropped, so a Parquet struct column serves rows with fewer options).
- ``answer``: the correct option, as a letter ``"A"``–``"Z"`` (case-insensitive) or a 0-based
  integer index into ``options``.
- ``id`` (string or integer, optional): kept as ``Problem.meta["id"]``.

Math (:class:`BoxedMathTask`):

- ``problem`` (string): the problem.
- ``answer`` (string; an integer is accepted): the final answer as it would appear inside
  ``\boxed{}``, LaTeX allowed (e.g. ``\frac{1}{2}``); compared by math-verify.
- ``id`` (string or integer, optional): kept as ``Problem.meta["id"]``.

A bad row raises ValueError naming the file, the line (JSONL) or row (Parquet) number and the
field, e.g. ``data/sci.jsonl line 17: field 'answer' must be one of A..D, got 'E'``, or
``data/sci.jsonl line 17: missing column 'answer' (its columns: …)``; every value quoted
in a message is cut to ~200 characters. A JSONL file must be UTF-8 (else: ``not UTF-8 text at
byte N``) and no row may nest lists/objects deeper than :data:`MAX_JSON_DEPTH` levels.

Scoring never raises; malformed or oversized (> :data:`MAX_CHARS` characters) completions score 0.

- Multiple choice: 1 when the last ``<answer>…</answer>`` holds exactly the gold letter
  (case-insensitive, surrounding whitespace and one pair of parentheses allowed: ``(b)``).
- Math: 1 when the content of the last ``\boxed{…}`` is equivalent to the gold answer under
  math-verify (``\boxed{\frac{1}{2}}`` matches ``0.5``).
"""

from __future__ import annotations

import json
import os
import random
import re
import string
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distillscope.safeyaml import clip, quote
from distillscope.tasks.base import Problem
from distillscope.tasks.verify import answer_block

MAX_JSON_DEPTH = 64  # a JSONL row nested deeper is refused (a schema row needs 2 levels)
MAX_CHARS = 20_000  # longer completions are runaway generations: score 0 without parsing
MAX_BOXED_CHARS = 1_000  # longest \boxed{} content handed to math-verify
MATH_TIMEOUT_S = 5  # math-verify's per-call limit, enforced only in a process's main thread
JSONL_SUFFIXES = (".jsonl", ".json-lines")
PARQUET_SUFFIXES = (".parquet",)
LETTERS = string.ascii_uppercase

MCQ_INSTRUCTION = (
    "Answer the multiple-choice question. Give the option letter inside <answer></answer>."
)
MATH_INSTRUCTION = "Solve the problem. Put the final answer in \\boxed{}."

_LETTER_RE = re.compile(r"\(\s*([A-Za-z])\s*\)|([A-Za-z])")


# ---------------------------------------------------------------------------------------------
# Reading rows


def read_rows(path: str | os.PathLike) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(where, row)`` for each row of a JSONL or Parquet file, in file order.

    ``where`` is ``"<path> line N"`` (JSONL, physical line) or ``"<path> row N"`` (Parquet),
    1-based, for error messages. Raises ValueError for an unknown suffix, a missing file,
    unreadable content or a row that is not a JSON object.
    """
    src = Path(path)
    suffix = src.suffix.lower()
    if suffix not in JSONL_SUFFIXES + PARQUET_SUFFIXES:
        known = ", ".join(JSONL_SUFFIXES + PARQUET_SUFFIXES)
        raise ValueError(f"{src}: unknown task file type {src.suffix!r}; use one of {known}")
    if not src.is_file():
        raise ValueError(f"{src}: no such task file")
    if suffix in PARQUET_SUFFIXES:
        yield from _read_parquet(src)
        return
    with src.open("rb") as f:
        offset = 0  # byte offset of the current line in the file
        for n, raw in enumerate(f, start=1):
            where = f"{src} line {n}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(f"{where}: not UTF-8 text at byte {offset + err.start}") from None
            offset += len(raw)
            if not line.strip():
                continue
            yield where, _parse_row(line, where)


def _parse_row(line: str, where: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not valid JSON ({err.msg})") from None
    except RecursionError:  # the C decoder's own recursion guard (nesting in the thousands)
        raise ValueError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as err:  # e.g. an integer over Python's 4,300-digit conversion limit
        raise ValueError(f"{where}: not valid JSON ({quote(str(err), 100)})") from None
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if _depth_over(row, MAX_JSON_DEPTH):
        raise ValueError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels")
    return row


def _depth_over(value: Any, limit: int) -> bool:
    """Whether lists/objects in ``value`` nest deeper than ``limit`` (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _read_parquet(src: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    import pyarrow.parquet as pq  # imported here: only Parquet users pay for it

    try:
        rows = pq.read_table(src).to_pylist()
    except Exception as err:  # pyarrow raises its own error types for corrupt files
        raise ValueError(f"{src}: cannot read Parquet ({clip(str(err), 200)})") from err
    for n, row in enumerate(rows, start=1):
        yield f"{src} row {n}", row


def _load(
    path: str | os.PathLike, to_problem: Callable[[dict[str, Any], str, int], Problem]
) -> tuple[Problem, ...]:
    problems = tuple(to_problem(row, where, i) for i, (where, row) in enumerate(read_rows(path)))
    if not problems:
        raise ValueError(f"{path}: the task file holds no rows")
    return problems


def _column(row: dict[str, Any], key: str, where: str) -> Any:
    """``row[key]``; a row without the column is one line naming it and the file (not a bad
    value of ``None``)."""
    if key not in row:
        present = clip(", ".join(map(str, row)), 120) or "none"
        raise ValueError(f"{where}: missing column {key!r} (its columns: {present})")
    return row[key]


def _text_field(row: dict[str, Any], key: str, where: str) -> str:
    value = _column(row, key, where)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: field {key!r} must be a non-empty string, got {quote(value)}")
    return value


def _meta(row: dict[str, Any], where: str, index: int, fields: tuple[str, ...]) -> dict[str, Any]:
    row_id = row.get("id")
    if row_id is not None and (isinstance(row_id, bool) or not isinstance(row_id, (str, int))):
        raise ValueError(f"{where}: field 'id' must be a string or an integer, got {quote(row_id)}")
    extra = {k: v for k, v in row.items() if k not in fields and k != "id"}
    return {"id": row_id, "index": index, "source": where, "extra": extra}


# ---------------------------------------------------------------------------------------------
# Multiple choice


def _mcq_options(value: Any, where: str) -> list[str]:
    if isinstance(value, dict):
        items = {str(k).strip().upper(): v for k, v in value.items() if v is not None}
        expected = list(LETTERS[: len(items)])
        if sorted(items) != expected:
            raise ValueError(
                f"{where}: field 'options' keys must be the letters {', '.join(expected)}, "
                f"got {clip(', '.join(sorted(items)))}"
            )
        value = [items[k] for k in expected]
    if not isinstance(value, (list, tuple)):
        raise ValueError(
            f"{where}: field 'options' must be a list of strings or an object mapping letters "
            f"to strings, got {type(value).__name__}"
        )
    if not 2 <= len(value) <= len(LETTERS):
        raise ValueError(f"{where}: field 'options' must hold 2 to 26 options, got {len(value)}")
    for k, option in enumerate(value):
        if not isinstance(option, str) or not option.strip():
            raise ValueError(
                f"{where}: field 'options' option {LETTERS[k]} must be a non-empty string, "
                f"got {quote(option)}"
            )
    return list(value)


def _mcq_answer(value: Any, n_options: int, where: str) -> str:
    letters = LETTERS[:n_options]
    if isinstance(value, str) and len(value.strip()) == 1 and value.strip().upper() in letters:
        return value.strip().upper()
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < n_options:
            return letters[value]
        raise ValueError(
            f"{where}: field 'answer' must be an index in 0..{n_options - 1}, got {quote(value)}"
        )
    raise ValueError(f"{where}: field 'answer' must be one of A..{letters[-1]}, got {quote(value)}")


def _mcq_problem(row: dict[str, Any], where: str, index: int) -> Problem:
    question = _text_field(row, "question", where)
    options = _mcq_options(_column(row, "options", where), where)
    answer = _mcq_answer(_column(row, "answer", where), len(options), where)
    lines = [question.strip()] + [f"{LETTERS[k]}. {opt.strip()}" for k, opt in enumerate(options)]
    meta = _meta(row, where, index, ("question", "options", "answer"))
    return Problem(prompt="\n".join(lines), answer=answer, meta=meta)


def score_choice(gold_letter: str, completion: str) -> float:
    """1.0 when the last ``<answer>…</answer>`` of ``completion`` holds ``gold_letter``, else 0.0.

    The content may carry surrounding whitespace and one pair of parentheses; the letter is
    case-insensitive. Anything else (no block, two letters, ``A.``) scores 0. Never raises.
    """
    if not isinstance(completion, str) or len(completion) > MAX_CHARS:
        return 0.0
    block = answer_block(completion)  # linear time, like the Countdown verifier
    if block is None:
        return 0.0
    m = _LETTER_RE.fullmatch(block.strip())
    if m is None:
        return 0.0
    letter = (m.group(1) or m.group(2)).upper()
    return float(letter == str(gold_letter).upper())


@dataclass(frozen=True)
class MultipleChoiceTask:
    """Multiple-choice questions from a file; the gold answer of each problem is its letter.

    Attributes:
        name: identifier used in configs and tables (the file's stem by default).
        items: every problem, in file order.
    """

    name: str
    items: tuple[Problem, ...] = field(repr=False)

    @classmethod
    def from_file(cls, path: str | os.PathLike, name: str | None = None) -> MultipleChoiceTask:
        """Load a JSONL or Parquet file in the multiple-choice schema (module docstring)."""
        return cls(name or Path(path).stem, _load(path, _mcq_problem))

    def problems(self) -> list[Problem]:
        """All problems in file order (for a deterministic evaluation over the whole file)."""
        return list(self.items)

    def sample(self, rng: random.Random) -> Problem:
        """One problem drawn uniformly with ``rng``."""
        return self.items[rng.randrange(len(self.items))]

    def score(self, problem: Problem, completion: str) -> float:
        """1.0 when the completion's ``<answer>`` letter is the gold one (:func:`score_choice`)."""
        return score_choice(problem.answer, completion)

    def chat_messages(self, problem: Problem) -> list[dict[str, str]]:
        """One user message: the instruction, then the question and lettered options."""
        return [{"role": "user", "content": f"{MCQ_INSTRUCTION}\n\n{problem.prompt}"}]


# ---------------------------------------------------------------------------------------------
# Math with a boxed final answer


def _math_answer(value: Any, where: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: field 'answer' must be a non-empty string, got {quote(value)}")
    return value.strip()


def _math_problem(row: dict[str, Any], where: str, index: int) -> Problem:
    text = _text_field(row, "problem", where)
    answer = _math_answer(_column(row, "answer", where), where)
    meta = _meta(row, where, index, ("problem", "answer"))
    return Problem(prompt=text.strip(), answer=answer, meta=meta)


def last_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{…}`` in ``text``, matching nested braces.

    Escaped braces (``\{``, ``\}``) do not count. Returns None when there is no ``\boxed``, when
    the last one is unclosed or has no brace, or when its content exceeds
    :data:`MAX_BOXED_CHARS` characters.
    """
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    i = start + len("\\boxed")
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text) or text[i] != "{":
        return None
    depth, begin = 0, i + 1
    while i < len(text) and i - begin <= MAX_BOXED_CHARS:
        ch = text[i]
        if ch == "\\":
            i += 2  # skip the escaped character (\{, \}, \\)
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[begin:i]
        i += 1
    return None


def math_equal(gold: str, predicted: str) -> bool:
    r"""Whether ``predicted`` is equivalent to ``gold`` under math-verify; never raises.

    Both are parsed as the content of a ``\boxed{}``. math-verify bounds each parse and
    comparison with a SIGALRM timer, which Python only allows in a process's main thread: there
    we use :data:`MATH_TIMEOUT_S`; in any other thread the timer is switched off (so the call
    does not fail) and a pathological answer such as ``10^{10^{10}}`` can run unbounded — score
    in worker processes, not threads, when completions are untrusted.
    """
    # Imported here: math-verify pulls in sympy and an ANTLR parser (seconds of import time).
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    timeout = MATH_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:
        gold_parsed = parse(f"\\boxed{{{gold}}}", parsing_timeout=timeout)
        pred_parsed = parse(f"\\boxed{{{predicted}}}", parsing_timeout=timeout)
        if not gold_parsed or not pred_parsed:
            return False
        return bool(verify(gold_parsed, pred_parsed, timeout_seconds=timeout))
    except (Exception, TimeoutException):  # TimeoutException derives from BaseException
        return False


def score_boxed(gold: str, completion: str) -> float:
    """1.0 when the last ``\\boxed{}`` of ``completion`` matches ``gold`` (:func:`math_equal`)."""
    if not isinstance(completion, str) or len(completion) > MAX_CHARS:
        return 0.0
    predicted = last_boxed(completion)
    if predicted is None or not predicted.strip():
        return 0.0
    return float(math_equal(str(gold), predicted))


@dataclass(frozen=True)
class BoxedMathTask:
    """Math problems from a file; a completion is right when its last ``\\boxed{}`` is.

    Attributes:
        name: identifier used in configs and tables (the file's stem by default).
        items: every problem, in file order; ``Problem.answer`` is the gold answer string.
    """

    name: str
    items: tuple[Problem, ...] = field(repr=False)

    @classmethod
    def from_file(cls, path: str | os.PathLike, name: str | None = None) -> BoxedMathTask:
        """Load a JSONL or Parquet file in the math schema (module docstring)."""
        return cls(name or Path(path).stem, _load(path, _math_problem))

    def problems(self) -> list[Problem]:
        """All problems in file order (for a deterministic evaluation over the whole file)."""
        return list(self.items)

    def sample(self, rng: random.Random) -> Problem:
        """One problem drawn uniformly with ``rng``."""
        return self.items[rng.randrange(len(self.items))]

    def score(self, problem: Problem, completion: str) -> float:
        """1.0 when the completion's last boxed answer equals the gold one (:func:`score_boxed`)."""
        return score_boxed(problem.answer, completion)

    def chat_messages(self, problem: Problem) -> list[dict[str, str]]:
        """One user message: the instruction, then the problem."""
        return [{"role": "user", "content": f"{MATH_INSTRUCTION}\n\n{problem.prompt}"}]


FILE_TASKS: dict[str, type[MultipleChoiceTask] | type[BoxedMathTask]] = {
    "mcq": MultipleChoiceTask,
    "math": BoxedMathTask,
}


def load_file_task(
    kind: str, path: str | os.PathLike, name: str | None = None
) -> MultipleChoiceTask | BoxedMathTask:
    """``FILE_TASKS[kind].from_file(path, name)``; the error lists the kinds that exist."""
    if kind not in FILE_TASKS:
        raise ValueError(f"unknown file task kind {kind!r}; choose one of {sorted(FILE_TASKS)}")
    return FILE_TASKS[kind].from_file(path, name)
