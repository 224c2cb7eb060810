"""A study directory's study.yaml is read within safeyaml's limits."""

from __future__ import annotations

import time

import pytest

from distillscope.config import ConfigError
from distillscope.study.run_study import prepare, study_status
from distillscope.study.spec import load_spec

BOMB = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + "".join(
    f"{c}: &{c} [" + ", ".join([f"*{p}"] * 9) + "]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"name: x\nexperiments: [{name: [1,2}\n", "not valid YAML at line 2, column 26"),
        (b"name: caf\xe9\n", "not UTF-8 text at byte 9"),
        (BOMB.encode(), "YAML over the limit: more than 10,000 nodes after alias expansion"),
        (b"name: x\nexperiments: []\n", "experiments: List should have at least 1 item"),
    ],
)
def test_corrupt_study_yaml_is_one_line(tmp_path, content, expected):
    (tmp_path / "study.yaml").write_bytes(content)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        study_status(tmp_path)
    assert time.perf_counter() - t0 < 1.0
    assert str(info.value).startswith(f"{tmp_path / 'study.yaml'}: {expected}")
    assert "\n" not in str(info.value)
    if b"experiments: []" not in content:  # prepare only reads it to compare with the new spec
        with pytest.raises(ConfigError, match=f"{expected[:20]}.*choose another --out"):
            prepare(load_spec("smoke"), tmp_path)
