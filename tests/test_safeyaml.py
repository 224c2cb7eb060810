"""Bounded YAML and bounded quoting: one test per reported error."""

from __future__ import annotations

import time

import pytest

from distillscope.config import ConfigError, load_run_config
from distillscope.safeyaml import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_NODES,
    YamlError,
    clip,
    load_yaml,
    quote,
)
from distillscope.study.spec import load_spec


def billion_laughs(levels: int, key: str = "name") -> str:
    """Each level a list of nine aliases of the previous one: 9**levels leaves once expanded."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines.append(f"{key}: *a{levels - 1}")
    return "\n".join(lines) + "\n"


def one_line_error(call, exc=ConfigError) -> str:
    t0 = time.perf_counter()
    with pytest.raises(exc) as info:
        call()
    assert time.perf_counter() - t0 < 1.0
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("levels", [6, 9, 30])
def test_alias_bomb_config_fails_in_under_a_second(tmp_path, levels):
    # Issue 10 item 2: 9 levels grew to 18 GB RSS; 6 levels printed a 3.85 MB error line.
    path = tmp_path / "bomb.yaml"
    path.write_text(billion_laughs(levels))
    message = one_line_error(lambda: load_run_config(path))
    assert message == f"{path}: YAML over the limit: more than 10,000 nodes after alias expansion"


def test_alias_bomb_study_spec_and_override_fail_fast(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(billion_laughs(9, key="description"))
    assert "over the limit" in one_line_error(lambda: load_spec(path))
    bomb = "[&a [1, 1, 1, 1, 1, 1, 1, 1, 1], &b [*a, *a, *a, *a, *a, *a, *a, *a, *a],"
    bomb += " &c [*b, *b, *b, *b, *b, *b, *b, *b, *b], &d [*c, *c, *c, *c, *c, *c, *c, *c, *c],"
    bomb += " [*d, *d, *d, *d, *d, *d, *d, *d, *d]]"
    message = one_line_error(lambda: load_run_config(None, [f"optim.lr={bomb}"]))
    assert message.startswith("override 'optim.lr=[&a [1,") and "over the limit" in message


def test_merge_key_bomb_and_self_reference_are_refused():
    merges = ["m0: &m0 {a: 1, b: 2}"]
    merges += [f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], k{i}: 1}}" for i in range(1, 30)]
    with pytest.raises(YamlError, match="over the limit"):
        load_yaml("\n".join(merges), "merges.yaml")
    with pytest.raises(YamlError, match="alias \\*a refers to a collection it is inside"):
        load_yaml("x: &a [1, *a]", "self.yaml")
    with pytest.raises(YamlError, match="more than 100 alias uses"):
        load_yaml("a: &a 1\nb: [" + ", ".join(["*a"] * 101) + "]", "many.yaml")


def test_node_depth_and_size_limits():
    assert load_yaml("[" + ", ".join(["1"] * (MAX_NODES - 1)) + "]", "ok") == [1] * (MAX_NODES - 1)
    with pytest.raises(YamlError, match="more than 10,000 nodes"):
        load_yaml("[" + ", ".join(["1"] * MAX_NODES) + "]", "wide.yaml")
    nested: list = []
    for _ in range(MAX_DEPTH - 2):
        nested = [nested]
    assert load_yaml("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1), "ok") == nested  # 99 deep
    with pytest.raises(YamlError, match="nested deeper than 100 levels"):
        load_yaml("[" * 5_000 + "]" * 5_000, "deep.yaml")
    with pytest.raises(YamlError, match="more than 1,000,000 characters"):
        load_yaml("#" * (MAX_BYTES + 1), "big.yaml")
    with pytest.raises(YamlError, match="big.yaml: not valid YAML: Exceeds the limit"):
        load_yaml("x: " + "9" * 5_000, "big.yaml")  # Python's int conversion limit


def test_config_errors_quote_at_most_about_200_characters(tmp_path):
    # Issue 10 item 2: the error message printed the whole input.
    path = tmp_path / "long.yaml"
    path.write_text(billion_laughs(3))  # 729 leaves: under the limit, so validation sees it
    message = one_line_error(lambda: load_run_config(path))
    assert message.startswith(f"{path}: ") and message.endswith("…)")
    assert len(message) <= 320 + len(str(path))
    path.write_text(f"optim: {{lr: '{'x' * 100_000}'}}\n")
    message = one_line_error(lambda: load_run_config(path))
    assert "optim.lr" in message and "xxx…" in message and len(message) <= 320 + len(str(path))
    path.write_text(f"{'k' * 1_000}: 1\n")  # YAML caps plain keys at 1,024 characters
    message = one_line_error(lambda: load_run_config(path))
    assert "unknown field 'kkk" in message and len(message) <= 320 + len(str(path))


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("optim.lr=[1,2", "override 'optim.lr=[1,2': not valid YAML at line 1, column 5: expected"),
        ("name=*foo", "override 'name=*foo': not valid YAML at line 1, column 1: found undefined"),
        ("name=\x1f", "override 'name=\\x1f': not valid YAML: unprintable character at character"),
        ("optim.lr=" + "9" * 5_000, "override 'optim.lr=99999"),
    ],
)
def test_bad_override_yaml_is_one_line_naming_the_override(override, expected):
    message = one_line_error(lambda: load_run_config(None, [override]))
    assert message.startswith(expected) and len(message) <= 320


def test_non_utf8_and_unreadable_config_files(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    assert one_line_error(lambda: load_run_config(path)) == f"{path}: not UTF-8 text at byte 9"
    message = one_line_error(lambda: load_run_config(tmp_path))  # a directory
    assert message == f"{tmp_path}: no such config file"


def test_quote_is_bounded_for_any_value():
    assert quote("short") == "'short'"
    assert quote(None) == "None" and quote(1.5) == "1.5"
    long = quote("x" * 1_000_000)
    assert len(long) == 200 and long.endswith("…") and long.startswith("'xxx")
    assert quote("a\nb") == "'a\\nb'"
    nested: list = ["lol"] * 9
    for _ in range(9):  # shared references: 9**10 leaves if printed in full
        nested = [nested] * 9
    t0 = time.perf_counter()
    assert len(quote(nested)) <= 200
    assert time.perf_counter() - t0 < 0.1
    assert quote(10**5_000) == "<an integer of about 5,000 digits>"
    assert len(quote([10**5_000])) <= 200

    class Hostile:
        def __repr__(self):
            raise RuntimeError("no")

    assert quote(Hostile()).startswith("<Hostile")
    assert clip("a\nb\r\nc") == "a b c" and clip("y" * 300, 10) == "y" * 9 + "…"
