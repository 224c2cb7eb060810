"""Fuzz the file-task loaders: random JSONL rows, random bytes, bad Parquet.

Loading must either succeed or raise the loader's own ``ValueError`` (not a subclass such as
``UnicodeDecodeError``, never ``RecursionError``) with one line that starts with the file's path.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distillscope.tasks.files import load_file_task

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.sampled_from(["A", "b", "(c)", "", " ", "Z", "x" * 1_000]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=15,
)
FIELDS = ["question", "options", "answer", "problem", "id", "extra"]
rows = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=5), json_values, max_size=5)
mcq_like = st.fixed_dictionaries(
    {
        "question": st.sampled_from(["Which?", "", " "]) | st.text(max_size=20),
        "options": st.lists(st.sampled_from(["a", "b", ""]) | st.text(max_size=5), max_size=4)
        | st.dictionaries(st.sampled_from("ABCDE"), st.text(max_size=5) | st.none(), max_size=4),
        "answer": st.integers(-2, 5) | st.sampled_from(["A", "b", "E", ""]),
    }
)
good_mcq = st.fixed_dictionaries(
    {
        "question": st.sampled_from(["Which gas?", "Largest planet?", "Q"]),
        "options": st.lists(st.sampled_from(["O2", "CO2", "Mars"]), min_size=2, max_size=4),
        "answer": st.sampled_from([0, 1, "A", "b", "(a)"]),
    },
    optional={"id": st.integers() | st.text(max_size=5) | st.none(), "extra": json_values},
)
HOSTILE_LINES = [
    "[" * 5_000 + "]" * 5_000,
    '{"a": ' * 70 + "1" + "}" * 70,
    "9" * 5_000,
    '{"question": "q", "options": ["a", "b"], "answer": 1e999}',
    "\ufeff{}",
    "NaN",
    "{",
    "",
]


@st.composite
def jsonl_files(draw) -> bytes:
    lines = []
    kinds = draw(st.sampled_from([["good"], ["good", "mcq"], ["row", "mcq", "hostile", "value"]]))
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(kinds))
        if kind == "row":
            lines.append(json.dumps(draw(rows)))
        elif kind == "good":
            lines.append(json.dumps(draw(good_mcq)))
        elif kind == "mcq":
            lines.append(json.dumps(draw(mcq_like)))
        elif kind == "hostile":
            lines.append(draw(st.sampled_from(HOSTILE_LINES)))
        else:
            lines.append(json.dumps(draw(json_values)))
    data = "\n".join(lines).encode()
    if data and draw(st.booleans()):  # splice in random bytes (often not UTF-8)
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    return data


def assert_loads_or_one_line_error(path, kind: str) -> None:
    try:
        load_file_task(kind, path)
    except ValueError as err:
        assert type(err) is ValueError, repr(err)
        message = str(err)
        assert message.startswith(str(path)) and "\n" not in message, message[:400]
        assert len(message) <= 400 + len(str(path)), message[:400]


SLOW_OK = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(SLOW_OK, max_examples=250)
@given(jsonl_files(), st.sampled_from(["mcq", "math"]))
def test_random_jsonl_loads_or_raises_one_line(tmp_path_factory, data, kind):
    path = tmp_path_factory.getbasetemp() / "fuzz.jsonl"
    path.write_bytes(data)
    assert_loads_or_one_line_error(path, kind)


@settings(SLOW_OK, max_examples=100)
@given(st.binary(max_size=300), st.sampled_from(["mcq", "math"]))
def test_random_bytes_load_or_raise_one_line(tmp_path_factory, data, kind):
    for name in ("bytes.jsonl", "bytes.parquet"):
        path = tmp_path_factory.getbasetemp() / name
        path.write_bytes(data)
        assert_loads_or_one_line_error(path, kind)
