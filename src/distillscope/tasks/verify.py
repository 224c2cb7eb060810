"""The Countdown verifier: parses step equations and checks them with integer arithmetic.

Accepted forms (docs/method.md §7): ``2+3=5,5*4=20`` (plain style), ``2p3>5;5x4>20`` (the
testbed's alternative style), either bare or inside ``<answer>…</answer>``; any reasoning before
the answer (``<think>…</think>``) is skipped. Nothing is ever evaluated as code. What is bounded
is the parsed answer, not the reasoning: the text may be up to :data:`MAX_TEXT_CHARS` characters
and is scanned once for its last answer block; that block (or a bare equation list) may be up to
:data:`MAX_ANSWER_CHARS` characters, and every number up to :data:`MAX_DIGITS` ASCII digits. So
a correct 512-token chat answer scores 1 and a hostile completion is rejected in microseconds.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal

MAX_TEXT_CHARS = 200_000  # longer completions are runaway generations: score 0 unread
MAX_ANSWER_CHARS = 2_000  # longest answer block (or bare equation list) that is parsed
MAX_DIGITS = 12

PLAIN_OPS = {"+": "+", "-": "-", "*": "*", "/": "/", "×": "*", "÷": "/"}
ALT_OPS = {"p": "+", "m": "-", "x": "*", "d": "/"}
_ALL_OPS = {**PLAIN_OPS, **ALT_OPS}

_OPEN, _CLOSE = "<answer>", "</answer>"
_NUM = rf"(-?[0-9]{{1,{MAX_DIGITS}}})"  # ASCII digits only: int() would also read "٣"
_STEP_RE = re.compile(rf"\s*{_NUM}\s*([+\-*/×÷pmxd])\s*{_NUM}\s*([=>])\s*{_NUM}\s*")
_SEPARATORS = ",;"

Style = Literal["plain", "alt", "mixed", "none"]


def answer_block(text: str) -> str | None:
    """The content of the last ``<answer>…</answer>`` block, or None when there is none.

    The block opens at the last ``<answer>`` that a ``</answer>`` follows and ends at the first
    ``</answer>`` after it. Three substring searches: linear time in ``len(text)`` whatever the
    text holds (a regex ``<answer>(.*?)</answer>`` is quadratic on many unclosed tags).
    """
    close = text.rfind(_CLOSE)
    if close < 0:
        return None
    start = text.rfind(_OPEN, 0, close)
    if start < 0:
        return None
    start += len(_OPEN)
    return text[start : text.find(_CLOSE, start)]


def extract_answer(text: str) -> str:
    """The content of the last ``<answer>`` block (:func:`answer_block`), else the whole text."""
    block = answer_block(text)
    return text if block is None else block


def parse_steps(text: str) -> list[tuple[int, str, int, int, str]] | None:
    """Parse ``a op b = r`` steps separated by ``,`` or ``;``.

    The steps are the last ``<answer>`` block's content, or the whole text when it has none.
    Returns ``(a, op, b, r, style)`` per step with ``op`` normalised to ``+ - * /`` and
    ``style`` in {"plain", "alt"}, or ``None`` when any piece is malformed or over a bound
    (text over :data:`MAX_TEXT_CHARS`, answer over :data:`MAX_ANSWER_CHARS` characters).
    """
    if len(text) > MAX_TEXT_CHARS:
        return None
    body = extract_answer(text)
    if len(body) > MAX_ANSWER_CHARS:
        return None
    body = body.strip().strip(_SEPARATORS).strip()
    if not body:
        return None
    steps = []
    for piece in re.split(r"[,;]", body):
        m = _STEP_RE.fullmatch(piece)
        if m is None:
            return None
        a, op, b, eq, r = m.groups()
        style = "alt" if op in ALT_OPS or eq == ">" else "plain"
        steps.append((int(a), _ALL_OPS[op], int(b), int(r), style))
    return steps


def _apply(a: int, op: str, b: int) -> int | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0 or a % b != 0:  # only exact integer division counts
        return None
    return a // b


def check_countdown(numbers: list[int], target: int, text: str) -> bool:
    """True iff ``text`` combines *all* of ``numbers`` into ``target`` (docs/method.md §7).

    Each step must use numbers still available (every operand once; a step's result becomes
    available), the arithmetic must be right, divisions exact, and the pool must end as
    exactly ``[target]``. Malformed or oversized text gives ``False``; it never raises.
    """
    try:
        steps = parse_steps(text)
    except (ValueError, TypeError):  # defensive: parse_steps is designed not to raise
        return False
    if not steps:
        return False
    pool = Counter(numbers)
    for a, op, b, r, _ in steps:
        need = Counter([a, b])
        if any(pool[v] < k for v, k in need.items()):
            return False
        if _apply(a, op, b) != r:
            return False
        pool -= need
        pool[r] += 1
    return +pool == Counter([target])


def detect_style(text: str) -> Style:
    """Which answer style a completion uses: ``plain``, ``alt``, ``mixed`` or ``none``.

    Judged from the glyphs of the parsed steps when the text parses, else from the glyphs that
    only one style uses (in the first :data:`MAX_ANSWER_CHARS` characters of the answer block,
    or of the text when it has none); ``none`` when neither style's glyphs appear. Linear time
    in ``len(text)``.
    """
    steps = parse_steps(text)
    if steps:
        styles = {s[-1] for s in steps}
        return styles.pop() if len(styles) == 1 else "mixed"
    body = extract_answer(text)[:MAX_ANSWER_CHARS]
    plain = any(ch in body for ch in "+*/=,")
    alt = re.search(r"\d[pmxd]\d|>", body) is not None
    if plain and alt:
        return "mixed"
    return "plain" if plain else "alt" if alt else "none"
