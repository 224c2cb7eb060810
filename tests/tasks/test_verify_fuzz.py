"""Fuzz the Countdown verifier with hostile completions.

Every completion is checked two ways, independently of ``distillscope.tasks.verify``:

- **soundness** — whenever the verifier accepts, the test's own parser (whitespace-insensitive,
  written separately) must read steps whose arithmetic and number bookkeeping replay correctly,
  and the target must be reachable from the numbers by a brute-force solver over every binary
  combination (:func:`reachable`); so no accepted completion can be wrong;
- **labels** — completions built from known-valid steps (wrapped in reasoning, tags, unicode
  operators) must be accepted, and ones over a documented bound must be refused.

About 12,000 completions are timed one by one; the worst and median times are printed.
"""

from __future__ import annotations

import bisect
import gc
import random
import re
import statistics
import time
from collections import Counter
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from distillscope.tasks.catalogue import COUNTDOWN_3, COUNTDOWN_4, COUNTDOWN_4E
from distillscope.tasks.verify import (
    MAX_ANSWER_CHARS,
    MAX_TEXT_CHARS,
    check_countdown,
    detect_style,
)

PLAIN = {"+": "+", "-": "-", "*": "*", "/": "/"}
ALT = {"+": "p", "-": "m", "*": "x", "/": "d"}
UNICODE_OPS = {"+": "+", "-": "-", "*": "×", "/": "÷"}
GLYPHS = "0123456789+-*/×÷pmxd=>,; \n\t<>/answerthink"
DIGIT_SETS = ["٠١٢٣٤٥٦٧٨٩", "０１２３４５６７８９", "𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗", "০১২৩৪৫৬৭৮৯"]

# ---------------------------------------------------------------------------------------------
# The independent oracle


@cache
def reachable(numbers: tuple[int, ...]) -> frozenset[int]:
    """Every value a binary tree of + − × and exact ÷ over *all* of ``numbers`` can take."""
    if len(numbers) == 1:
        return frozenset(numbers)
    out: set[int] = set()
    n = len(numbers)
    for mask in range(1, 2**n - 1):
        left = tuple(sorted(numbers[i] for i in range(n) if mask >> i & 1))
        right = tuple(sorted(numbers[i] for i in range(n) if not mask >> i & 1))
        for a in reachable(left):
            for b in reachable(right):
                out.update((a + b, a - b, a * b))
                if b != 0 and a % b == 0:
                    out.add(a // b)
    return frozenset(out)


def last_block(text: str) -> str | None:
    """Content between the last ``<answer>`` that some ``</answer>`` follows and that close."""
    opens = [m.start() for m in re.finditer("<answer>", text)]
    closes = [m.start() for m in re.finditer("</answer>", text)]
    if not opens or not closes:
        return None
    candidates = [o for o in opens if o + len("<answer>") <= closes[-1]]
    if not candidates:
        return None
    start = candidates[-1] + len("<answer>")
    return text[start : closes[bisect.bisect_left(closes, start)]]


_ORACLE_STEP = re.compile(r"(-?[0-9]+)([-+*/×÷pmxd])(-?[0-9]+)[=>](-?[0-9]+)", re.ASCII)
_OPS = {"+": "+", "-": "-", "*": "*", "/": "/", "×": "*", "÷": "/"} | {v: k for k, v in ALT.items()}


def replays(numbers: list[int], target: int, text: str) -> bool:
    """Whether the answer's steps, read leniently, are genuinely valid (the independent check)."""
    block = last_block(text)
    region = text if block is None else block
    pool = Counter(numbers)
    steps = 0
    for piece in re.split("[,;]", region):
        compact = "".join(piece.split())
        if not compact:
            continue
        m = _ORACLE_STEP.fullmatch(compact)
        if m is None:
            return False
        a, op, b, r = int(m[1]), _OPS[m[2]], int(m[3]), int(m[4])
        if pool[a] < 1 or pool[b] < 1 + (a == b):
            return False
        if op == "/":
            if b == 0 or a % b != 0 or a // b != r:
                return False
        elif {"+": a + b, "-": a - b, "*": a * b}[op] != r:
            return False
        pool -= Counter([a, b])
        pool[r] += 1
        steps += 1
    return steps > 0 and +pool == Counter([target])


def check_one(numbers: list[int], target: int, text: str, label: bool | None) -> None:
    """Score ``text``; assert soundness, and the label when it is known."""
    accepted = check_countdown(numbers, target, text)
    assert accepted in (True, False)
    if accepted:
        assert replays(numbers, target, text), (numbers, target, text[-300:])
        assert target in reachable(tuple(sorted(numbers))), (numbers, target, text[-300:])
    if label is not None:
        assert accepted == label, (label, numbers, target, text[-300:])


def timed(numbers: list[int], target: int, text: str, repeats: int = 3) -> tuple[float, float]:
    """(first call, best of ``repeats`` calls) of ``check_countdown`` in seconds."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        check_countdown(numbers, target, text)
        times.append(time.perf_counter() - t0)
    return times[0], min(times)


# ---------------------------------------------------------------------------------------------
# Hostile completion families: each returns (numbers, target, text, label)


def random_valid_steps(rng: random.Random, numbers: list[int]) -> tuple[list, int]:
    """A random valid solution allowing negatives and zero (beyond the task generator's rules)."""
    pool = list(numbers)
    steps = []
    while len(pool) > 1:
        a = pool.pop(rng.randrange(len(pool)))
        b = pool.pop(rng.randrange(len(pool)))
        ops = ["+", "-", "*"] + (["/"] if b != 0 and a % b == 0 else [])
        op = rng.choice(ops)
        r = {"+": a + b, "-": a - b, "*": a * b}[op] if op != "/" else a // b
        steps.append((a, op, b, r))
        pool.append(r)
    return steps, pool[0]


def write(steps: list, glyphs: dict[str, str], rng: random.Random) -> str:
    eq, sep = (">", ";") if glyphs is ALT else ("=", ",")
    sp = rng.choice(["", " ", "  ", "\t"])
    return sep.join(f"{sp}{a}{sp}{glyphs[op]}{sp}{b}{sp}{eq}{sp}{r}{sp}" for a, op, b, r in steps)


def reasoning(rng: random.Random, n_chars: int) -> str:
    words = ["so", "try", "3*5=15", "then", "<", ">", "=", "hmm", "8x7", "56", "no,", "answer"]
    out, size = [], 0
    while size < n_chars:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def problem(rng: random.Random) -> tuple[list[int], int, list]:
    task = rng.choice([COUNTDOWN_3, COUNTDOWN_4, COUNTDOWN_4E])
    p = task.sample(rng)
    nums, target = list(p.answer["numbers"]), p.answer["target"]
    steps = [
        (int(a), op, int(b), int(r))
        for a, op, b, r in re.findall(r"(\d+)([-+*/])(\d+)=(\d+)", p.meta["solution"])
    ]
    return nums, target, steps


def fam_valid_wrapped(rng, noise):
    nums, target, steps = problem(rng)
    glyphs = rng.choice([PLAIN, ALT, UNICODE_OPS])
    answer = write(steps, glyphs, rng)
    think = f"<think>{reasoning(rng, rng.choice([0, 100, 2_000, 6_000]))}{noise}</think>\n"
    wrapper = rng.choice(["bare", "tag", "think", "earlier_wrong"])
    if wrapper == "bare":
        return nums, target, answer, True
    if wrapper == "tag":
        return nums, target, f"<answer>{answer}</answer>", True
    if wrapper == "think":
        return nums, target, f"{think}<answer>{answer}</answer>", True
    return nums, target, f"<answer>1+1=3</answer>{think}<answer>{answer}</answer>", True


def fam_valid_negative(rng, noise):
    nums = [rng.randint(-20, 30) for _ in range(rng.choice([2, 3, 4]))]
    steps, target = random_valid_steps(rng, nums)
    return nums, target, f"<answer>{write(steps, rng.choice([PLAIN, ALT]), rng)}</answer>", True


def fam_near_miss(rng, noise):
    nums, target, steps = problem(rng)
    steps = [list(s) for s in steps]
    k = rng.randrange(len(steps))
    mutation = rng.choice(["result", "operand", "op", "drop", "dup", "target", "swap"])
    if mutation == "result":
        steps[k][3] += rng.choice([-1, 1, 10])
    elif mutation == "operand":
        steps[k][0] = rng.choice([steps[k][0] + 1, 0, -steps[k][0], 10**11])
    elif mutation == "op":
        steps[k][1] = rng.choice("+-*/")
    elif mutation == "drop":
        steps.pop(k)
    elif mutation == "dup":
        steps.insert(k, steps[k])
    elif mutation == "target":
        target += rng.choice([-1, 1])
    else:
        steps[k][0], steps[k][2] = steps[k][2], steps[k][0]
    text = write([tuple(s) for s in steps], rng.choice([PLAIN, ALT]), rng)
    return nums, target, f"<answer>{text}</answer>" if rng.random() < 0.5 else text, None


def fam_huge_numbers(rng, noise):
    nums, target, steps = problem(rng)
    digits = rng.choice([13, 20, 400, 5_000])
    big = "9" * digits
    forms = [f"{big}+1={big}", f"{nums[0]}*{big}={big}", f"0{'0' * 12}{nums[0]}+1=2"]
    return nums, target, f"<answer>{rng.choice(forms)}</answer>", False  # over 12 digits


def fam_deep_tags(rng, noise):
    nums, target, steps = problem(rng)
    answer = write(steps, PLAIN, rng)
    k = rng.choice([2, 50, 1_000, 10_000])
    shape = rng.choice(["nested", "unclosed", "closes", "think", "interleaved"])
    if shape == "nested":
        return nums, target, "<answer>" * k + answer + "</answer>" * k, True
    # Only the innermost block of a nest is read; stray tags left in the steps make them fail.
    if shape == "unclosed":
        return nums, target, "<answer>" * k + answer, False
    if shape == "closes":
        return nums, target, answer + "</answer>" * k, False
    if shape == "think":
        return nums, target, "<think>" * k + answer + "</think>" * k, False
    return nums, target, "<answer></answer>" * k + f"<answer>{answer}", False


def fam_unicode_digits(rng, noise):
    nums, target, steps = problem(rng)
    digits = rng.choice(DIGIT_SETS)
    text = write(steps, PLAIN, rng).translate(str.maketrans("0123456789", digits))
    minus = rng.choice(["-", "−", "–"])
    text = text.replace("-", minus)
    return nums, target, f"<answer>{text}</answer>", False


def fam_glyph_soup(rng, noise):
    nums = [rng.randint(1, 12) for _ in range(rng.choice([2, 3]))]
    target = rng.randint(0, 50)
    text = "".join(rng.choice(GLYPHS) for _ in range(rng.randint(0, 80)))
    if rng.random() < 0.5:
        text = f"<answer>{text}</answer>"
    return nums, target, text + noise, None


def fam_small_equations(rng, noise):
    # Short, well-formed step lists over tiny numbers: the likeliest way to sneak a wrong yes.
    nums = [rng.randint(0, 6) for _ in range(rng.choice([2, 3]))]
    target = rng.randint(-5, 40)
    steps = [
        (rng.choice(nums + [rng.randint(-3, 9)]), rng.choice("+-*/"), rng.randint(-3, 9), 0)
        for _ in range(rng.randint(1, 3))
    ]
    steps = [
        (a, op, b, rng.choice([rng.randint(-10, 40), a + b, a * b, a - b])) for a, op, b, _ in steps
    ]
    return nums, target, write(steps, rng.choice([PLAIN, ALT]), rng), None


def fam_bounds(rng, noise):
    nums, target, steps = problem(rng)
    answer = f"<answer>{write(steps, PLAIN, rng)}</answer>"
    case = rng.choice(["text_over", "text_at", "answer_over", "bare_over"])
    if case == "text_over":
        return nums, target, " " * (MAX_TEXT_CHARS - len(answer) + 1) + answer, False
    if case == "text_at":
        return (
            nums,
            target,
            reasoning(rng, MAX_TEXT_CHARS - 200)[: MAX_TEXT_CHARS - len(answer)] + answer,
            True,
        )
    if case == "answer_over":
        return nums, target, "<answer>" + " " * MAX_ANSWER_CHARS + answer[8:], False
    return nums, target, " " * MAX_ANSWER_CHARS + write(steps, PLAIN, rng), False


def fam_random_text(rng, noise):
    nums = [rng.randint(1, 20) for _ in range(3)]
    alphabet = [chr(rng.randint(0, 0x2FFF)) for _ in range(20)] + list("0123456789=+")
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
    return nums, rng.randint(1, 100), noise + text, None


FAMILIES = [
    fam_valid_wrapped,
    fam_valid_negative,
    fam_near_miss,
    fam_huge_numbers,
    fam_deep_tags,
    fam_unicode_digits,
    fam_glyph_soup,
    fam_small_equations,
    fam_bounds,
    fam_random_text,
]
WEIGHTS = [4, 2, 4, 1, 1, 1, 3, 4, 0.2, 2]


def completions(seed: int, n: int, noise: str = ""):
    rng = random.Random(seed)
    for family in rng.choices(FAMILIES, WEIGHTS, k=n):
        yield family(rng, noise)


# ---------------------------------------------------------------------------------------------
# Tests


def test_ten_thousand_hostile_completions_are_sound_and_fast():
    cases = list(completions(seed=2026, n=12_000))
    for case in cases:
        check_one(*case)
    # Timed apart from generation, with the garbage collector paused (its pauses belong to the
    # test's own garbage). "first" is one call; "best" is the best of three, free of the
    # scheduler noise of shared CI cores, and is what the < 5 ms bound is about. A single call
    # can be pre-empted for tens of milliseconds on a loaded machine, so it is printed, not
    # asserted.
    gc.collect()
    gc.disable()
    try:
        first, best = zip(*(timed(n, t, text) for n, t, text, _ in cases), strict=True)
    finally:
        gc.enable()
    print(
        f"\nverifier over {len(cases)} completions: worst {max(first) * 1e3:.2f} ms "
        f"(best of 3: {max(best) * 1e3:.3f} ms), median {statistics.median(first) * 1e6:.1f} µs"
    )
    assert len(cases) >= 10_000
    assert max(best) < 0.005


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.text(max_size=40))
def test_verifier_fuzz_by_seed(seed, noise):
    # Hypothesis explores seeds and noise (and shrinks a failure to one seed); 60 × 40 more.
    for c in completions(seed, 40, noise):
        check_one(*c)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-5, 30), min_size=2, max_size=4), st.integers(-50, 200), st.text())
def test_arbitrary_text_never_raises_nor_lies(numbers, target, text):
    check_one(numbers, target, text, None)
    check_one(numbers, target, f"<answer>{text}</answer>", None)
    assert detect_style(text) in ("plain", "alt", "mixed", "none")


def _best_time(text: str) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(10):
            detect_style(text)
        best = min(best, time.perf_counter() - t0)
    return best


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(list(GLYPHS) + ["<answer>", "</answer>"]), min_size=1, max_size=12))
def test_detect_style_time_is_linear(pieces):
    # Sizes N and 8N (both under the verifier's text bound, so the parse path runs): linear time
    # gives a ratio near 8, quadratic near 64. Timings are best of 5 batches of 10 calls.
    chunk = "".join(pieces)
    small = chunk * (20_000 // len(chunk))
    large = chunk * (160_000 // len(chunk))
    t_small, t_large = _best_time(small), _best_time(large)
    assert t_large < 24 * t_small + 2e-3, (chunk, t_small, t_large)
