"""File-backed tasks: loading JSONL/Parquet, row validation, and scoring that never raises."""

from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distillscope.tasks import BoxedMathTask, MultipleChoiceTask, Task, load_file_task
from distillscope.tasks.files import (
    MAX_BOXED_CHARS,
    MAX_CHARS,
    last_boxed,
    score_boxed,
    score_choice,
)

MCQ_ROWS = [
    {
        "id": "q1",
        "question": "Which gas do plants absorb?",
        "options": ["O2", "CO2"],
        "answer": "B",
    },
    {
        "question": "Largest planet?",
        "options": {"B": "Jupiter", "A": "Mars", "C": "Venus", "D": None},
        "answer": 1,
        "subject": "astronomy",
    },
    {"id": 7, "question": "2 + 2 =", "options": ["3", "4", "5", "22"], "answer": "b"},
]
MATH_ROWS = [
    {"id": "m1", "problem": "Compute 1/2 as a decimal.", "answer": "0.5"},
    {"problem": "Expand (x+1)^2 - 2x.", "answer": "x^2+1", "level": 3},
    {"problem": "What is 6 times 7?", "answer": 42},
]


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_parquet(path: Path, rows: list) -> Path:
    pd.DataFrame(rows).to_parquet(path)
    return path


# --- loading -----------------------------------------------------------------------------------


def test_mcq_jsonl_round_trip(tmp_path):
    path = write_jsonl(tmp_path / "sci.jsonl", MCQ_ROWS)
    task = MultipleChoiceTask.from_file(path)
    assert task.name == "sci"
    assert isinstance(task, Task)
    problems = task.problems()
    assert [p.answer for p in problems] == ["B", "B", "B"]
    assert problems[0].prompt == "Which gas do plants absorb?\nA. O2\nB. CO2"
    assert problems[1].prompt == "Largest planet?\nA. Mars\nB. Jupiter\nC. Venus"
    assert problems[0].meta == {"id": "q1", "index": 0, "source": f"{path} line 1", "extra": {}}
    assert problems[1].meta["id"] is None and problems[1].meta["extra"] == {"subject": "astronomy"}
    assert problems[2].meta["id"] == 7
    assert task.chat_messages(problems[0]) == [
        {
            "role": "user",
            "content": "Answer the multiple-choice question. Give the option letter inside "
            "<answer></answer>.\n\nWhich gas do plants absorb?\nA. O2\nB. CO2",
        }
    ]


def test_mcq_parquet_matches_jsonl(tmp_path):
    from_jsonl = MultipleChoiceTask.from_file(write_jsonl(tmp_path / "a.jsonl", MCQ_ROWS))
    from_parquet = MultipleChoiceTask.from_file(write_parquet(tmp_path / "a.parquet", MCQ_ROWS[:1]))
    assert from_parquet.problems()[0].prompt == from_jsonl.problems()[0].prompt
    assert from_parquet.problems()[0].meta["source"] == f"{tmp_path / 'a.parquet'} row 1"


def test_mcq_parquet_struct_options_with_nulls(tmp_path):
    # pandas writes dict columns as a struct of the union of keys; missing keys become null.
    rows = [
        {"question": "q1", "options": {"A": "x", "B": "y", "C": "z"}, "answer": "C"},
        {"question": "q2", "options": {"A": "u", "B": "v"}, "answer": "a"},
    ]
    task = MultipleChoiceTask.from_file(write_parquet(tmp_path / "s.parquet", rows), name="s2")
    assert task.name == "s2"
    assert [p.prompt for p in task.problems()] == ["q1\nA. x\nB. y\nC. z", "q2\nA. u\nB. v"]
    assert [p.answer for p in task.problems()] == ["C", "A"]


def test_math_jsonl_and_parquet_round_trip(tmp_path):
    for path in (
        write_jsonl(tmp_path / "m.json-lines", MATH_ROWS),
        write_parquet(
            tmp_path / "m.parquet", [{**r, "answer": str(r["answer"])} for r in MATH_ROWS]
        ),
    ):
        task = load_file_task("math", path)
        assert isinstance(task, BoxedMathTask) and isinstance(task, Task)
        problems = task.problems()
        assert [p.answer for p in problems] == ["0.5", "x^2+1", "42"]
        assert problems[0].prompt == "Compute 1/2 as a decimal."
        assert task.chat_messages(problems[2]) == [
            {
                "role": "user",
                "content": "Solve the problem. Put the final answer in \\boxed{}.\n\n"
                "What is 6 times 7?",
            }
        ]


def test_sample_is_uniform_and_seeded(tmp_path):
    rows = [{"problem": f"p{i}", "answer": str(i)} for i in range(5)]
    task = BoxedMathTask.from_file(write_jsonl(tmp_path / "u.jsonl", rows))
    draws = [task.sample(random.Random(3)).answer for _ in range(2)]
    assert draws[0] == draws[1] == str(random.Random(3).randrange(5))
    rng = random.Random(0)
    counts = {str(i): 0 for i in range(5)}
    for _ in range(5000):
        counts[task.sample(rng).answer] += 1
    assert all(900 < c < 1100 for c in counts.values()), counts


def test_blank_lines_are_skipped_and_line_numbers_kept(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text("\n" + json.dumps(MATH_ROWS[0]) + "\n\n" + json.dumps(MATH_ROWS[1]) + "\n")
    sources = [p.meta["source"] for p in BoxedMathTask.from_file(path).problems()]
    assert sources == [f"{path} line 2", f"{path} line 4"]


# --- refusals ----------------------------------------------------------------------------------

GOOD_MCQ = {"question": "q", "options": ["a", "b", "c", "d"], "answer": "A"}


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"answer": "E"}, "field 'answer' must be one of A..D, got 'E'"),
        ({"answer": "AB"}, "field 'answer' must be one of A..D, got 'AB'"),
        ({"answer": 4}, "field 'answer' must be an index in 0..3, got 4"),
        ({"answer": True}, "field 'answer' must be one of A..D, got True"),
        ({"answer": None}, "field 'answer' must be one of A..D, got None"),
        ({"options": ["only"]}, "field 'options' must hold 2 to 26 options, got 1"),
        ({"options": "a,b"}, "field 'options' must be a list of strings or an object"),
        ({"options": ["a", 3]}, "field 'options' option B must be a non-empty string, got 3"),
        (
            {"options": {"A": "x", "C": "y"}},
            "field 'options' keys must be the letters A, B, got A, C",
        ),
        ({"question": ""}, "field 'question' must be a non-empty string, got ''"),
        ({"id": 1.5}, "field 'id' must be a string or an integer, got 1.5"),
    ],
)
def test_bad_mcq_row_names_file_line_and_field(tmp_path, bad, message):
    path = write_jsonl(tmp_path / "sci.jsonl", [GOOD_MCQ, {**GOOD_MCQ, **bad}])
    with pytest.raises(ValueError) as err:
        MultipleChoiceTask.from_file(path)
    assert str(err.value).startswith(f"{path} line 2: {message}")


def test_missing_field_and_parquet_row_number(tmp_path):
    rows = [{"problem": "p", "answer": "1"}, {"problem": "q", "answer": None}]
    with pytest.raises(ValueError, match=r"m\.parquet row 2: field 'answer' must be a non-empty"):
        BoxedMathTask.from_file(write_parquet(tmp_path / "m.parquet", rows))
    with pytest.raises(ValueError, match=r"m\.jsonl line 1: missing column 'problem' \("):
        BoxedMathTask.from_file(write_jsonl(tmp_path / "m.jsonl", [{"answer": "1"}]))


def test_bad_files(tmp_path):
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(ValueError, match=r"e\.jsonl: the task file holds no rows"):
        BoxedMathTask.from_file(tmp_path / "e.jsonl")
    (tmp_path / "j.jsonl").write_text('{"problem": "p", "answer": "1"}\n{oops\n')
    with pytest.raises(ValueError, match=r"j\.jsonl line 2: not valid JSON"):
        BoxedMathTask.from_file(tmp_path / "j.jsonl")
    (tmp_path / "l.jsonl").write_text("[1, 2]\n")
    with pytest.raises(ValueError, match=r"l\.jsonl line 1: expected a JSON object, got list"):
        BoxedMathTask.from_file(tmp_path / "l.jsonl")
    (tmp_path / "d.csv").write_text("problem,answer\n")
    with pytest.raises(ValueError, match=r"d\.csv: unknown task file type '\.csv'"):
        BoxedMathTask.from_file(tmp_path / "d.csv")
    with pytest.raises(ValueError, match=r"nope\.parquet: no such task file"):
        MultipleChoiceTask.from_file(tmp_path / "nope.parquet")
    with pytest.raises(ValueError, match="unknown file task kind 'csv'"):
        load_file_task("csv", tmp_path / "e.jsonl")


# --- multiple-choice scoring -------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("<answer>B</answer>", 1.0),
        ("I think... <answer> (b) </answer>", 1.0),
        ("<answer>\nB\n</answer>", 1.0),
        ("<answer>C</answer> wait <answer>B</answer>", 1.0),
        ("<answer>B</answer> wait <answer>C</answer>", 0.0),
        ("<answer>A</answer>", 0.0),
        ("B", 0.0),
        ("<answer>B.</answer>", 0.0),
        ("<answer>BC</answer>", 0.0),
        ("<answer>(B</answer>", 0.0),
        ("<answer>B", 0.0),
        ("<answer></answer>", 0.0),
        ("<answer>B</answer>" + " " * MAX_CHARS, 0.0),
    ],
)
def test_mcq_scoring(tmp_path, completion, expected):
    task = MultipleChoiceTask.from_file(write_jsonl(tmp_path / "s.jsonl", MCQ_ROWS))
    assert task.score(task.problems()[0], completion) == expected


# --- math scoring ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, content",
    [
        (r"so \boxed{\frac{1}{2}}.", r"\frac{1}{2}"),
        (r"\boxed{1} then \boxed{ {a}{b} }", " {a}{b} "),
        (r"\boxed{\{1,2\}}", r"\{1,2\}"),
        (r"\boxed {3}", "3"),
        (r"\boxed{2} and \boxed{3", None),
        (r"\boxed 3", None),
        ("no box here", None),
        ("\\boxed{" + "1" * (MAX_BOXED_CHARS + 5) + "}", None),
    ],
)
def test_last_boxed(text, content):
    assert last_boxed(text) == content


@pytest.mark.parametrize(
    "gold, completion, expected",
    [
        ("0.5", r"The answer is \boxed{\frac{1}{2}}", 1.0),
        (r"\frac{1}{2}", r"\boxed{0.5}", 1.0),
        ("x^2+1", r"\boxed{1 + x^{2}}", 1.0),
        ("42", r"\boxed{42}", 1.0),
        ("0.5", r"\boxed{2}", 0.0),
        ("0.5", "The answer is 0.5", 0.0),
        ("0.5", r"\boxed{0.5} no, actually \boxed{0.25}", 0.0),
        ("0.5", r"\boxed{}", 0.0),
        ("0.5", r"\boxed{\frac{1}{2}" + " " * MAX_CHARS, 0.0),
    ],
)
def test_math_scoring(gold, completion, expected):
    assert score_boxed(gold, completion) == expected


def test_math_task_scores_through_the_protocol(tmp_path):
    task = BoxedMathTask.from_file(write_jsonl(tmp_path / "m.jsonl", MATH_ROWS))
    first, _, third = task.problems()
    assert task.score(first, r"\boxed{\frac{1}{2}}") == 1.0
    assert task.score(third, r"6*7 = \boxed{42}") == 1.0
    assert task.score(third, r"\boxed{41}") == 0.0


def test_math_scoring_works_in_worker_threads():
    # math-verify's SIGALRM timeout only works in the main thread; elsewhere it is switched off.
    def score(_: int) -> tuple[float, bool]:
        on_main = threading.current_thread() is threading.main_thread()
        return score_boxed("0.5", r"\boxed{\frac{1}{2}}"), on_main

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(score, range(4)))
    assert results == [(1.0, False)] * 4


LATEXISH = st.text(alphabet="\\boxed{}frac0123456789.+-*/()<>answer ABCxy\n", max_size=80)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=200), LATEXISH))
def test_mcq_score_never_raises(text):
    assert score_choice("B", text) in (0.0, 1.0)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=200), LATEXISH, LATEXISH.map(lambda s: "\\boxed{" + s + "}")))
def test_math_score_never_raises(text):
    assert score_boxed("\\frac{1}{2}", text) in (0.0, 1.0)


# --- hostile files ------------------------------------------------------------


@pytest.mark.parametrize("depth", [65, 100_000])
def test_deeply_nested_row_is_one_line_naming_file_and_line(tmp_path, depth):
    nested = "[" * depth + "]" * depth
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(MCQ_ROWS[0]) + "\n" + f'{{"question": {nested}}}\n')
    with pytest.raises(ValueError) as info:
        MultipleChoiceTask.from_file(path)
    assert str(info.value) == f"{path} line 2: nested deeper than 64 levels"
    ok = "[" * 63 + "]" * 63  # 64 levels with the row itself: refused only by the schema
    path.write_text(f'{{"question": {ok}}}\n')
    with pytest.raises(ValueError, match=r"line 1: field 'question' must be a non-empty string"):
        MultipleChoiceTask.from_file(path)


def test_non_utf8_file_names_the_line_and_byte(tmp_path):
    path = tmp_path / "latin1.jsonl"
    first = (json.dumps(MATH_ROWS[0]) + "\n").encode()
    path.write_bytes(first + b'{"problem": "caf\xe9", "answer": "1"}\n')
    with pytest.raises(ValueError) as info:
        BoxedMathTask.from_file(path)
    offset = len(first) + len(b'{"problem": "caf')
    assert str(info.value) == f"{path} line 2: not UTF-8 text at byte {offset}"


def test_field_errors_quote_long_values_briefly(tmp_path):
    path = write_jsonl(tmp_path / "long.jsonl", [{"problem": "p", "answer": ["x" * 100_000]}])
    with pytest.raises(ValueError) as info:
        BoxedMathTask.from_file(path)
    message = str(info.value)
    assert message.startswith(f"{path} line 1: field 'answer' must be a non-empty string, got")
    assert message.endswith("…") and len(message) < 300 + len(str(path))
    path.write_text('{"problem": "p", "answer": ' + "9" * 5_000 + "}\n")
    with pytest.raises(ValueError, match=r"line 1: not valid JSON \('Exceeds the limit"):
        BoxedMathTask.from_file(path)


def test_hostile_choice_completions_score_fast():
    # Many unclosed tags made the old regex scan quadratic (0.8 s at 20,000 characters).
    for text in ["<answer>" * (MAX_CHARS // 8), "<answer>" * 2_000 + "<answer>A</answer>"]:
        t0 = time.perf_counter()
        assert score_choice("A", text) == float(text.endswith("</answer>"))
        assert time.perf_counter() - t0 < 0.05


@pytest.mark.parametrize("column", ["question", "options", "answer"])
def test_a_missing_column_is_named_as_missing(tmp_path, column):
    row = {k: v for k, v in GOOD_MCQ.items() if k != column}
    path = write_jsonl(tmp_path / "sci.jsonl", [GOOD_MCQ, row])
    with pytest.raises(ValueError) as err:
        MultipleChoiceTask.from_file(path)
    present = ", ".join(row)
    assert str(err.value) == f"{path} line 2: missing column {column!r} (its columns: {present})"
