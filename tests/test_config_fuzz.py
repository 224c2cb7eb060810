"""Fuzz the config loader: random YAML-ish files and override strings.

``load_run_config`` must either return a ``RunConfig`` or raise ``ConfigError`` with one line of
at most ~300 characters beyond the file's own name — never another exception, never a message
that echoes a whole input.
"""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distillscope.config import ConfigError, RunConfig, load_run_config

MAX_MESSAGE = 320  # beyond the source file's path

SECTIONS = {k: f.annotation for k, f in RunConfig.model_fields.items()}
FIELDS = [
    f"{section}.{name}" if hasattr(model, "model_fields") else section
    for section, model in SECTIONS.items()
    for name in getattr(model, "model_fields", [""])
]

YAML_GLYPHS = list(":-[]{},&*!|>'\"#%@`?\n \t.=0123456789eE+") + ["<<", "---", "...", "~", "null"]
YAML_GLYPHS += ["true", "nan", ".inf", "!!binary", "!!python/object", "&a", "*a", "9" * 5000]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=300),
    st.sampled_from(["student", "forward_kl", "cpu", "1e-5", "testbed:teacher", "x" * 5_000]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def config_docs(draw) -> str:
    """A YAML text: either glyph soup or a dump of sections/fields with hostile values, mutated."""
    if draw(st.booleans()):
        return "".join(draw(st.lists(st.sampled_from(YAML_GLYPHS), max_size=60)))
    doc: dict = {}
    for dotted, value in draw(st.lists(st.tuples(st.sampled_from(FIELDS), values), max_size=6)):
        node = doc
        *path, leaf = dotted.split(".")
        for part in path:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[leaf] = value
    text = yaml.safe_dump(doc, allow_unicode=True)
    if draw(st.booleans()) and text:  # corrupt it at one place
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(YAML_GLYPHS)) + text[at:]
    return text


overrides = st.one_of(
    st.text(max_size=60),
    st.builds(
        lambda key, value: f"{key}={value}",
        st.sampled_from(FIELDS) | st.text(max_size=20),
        st.lists(st.sampled_from(YAML_GLYPHS + list("abcxyz")), max_size=12).map("".join),
    ),
    st.builds(lambda key, value: f"{key}={yaml.safe_dump(value)}", st.sampled_from(FIELDS), values),
)


def assert_one_line_error(call, source: str = "") -> RunConfig | None:
    try:
        return call()
    except ConfigError as err:
        message = str(err)
        assert "\n" not in message and "\r" not in message, message
        assert len(message) <= MAX_MESSAGE + len(source), (len(message), message[:400])
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config_docs(), st.lists(overrides, max_size=3))
def test_load_run_config_only_raises_one_line_config_errors(tmp_path_factory, text, items):
    path = tmp_path_factory.getbasetemp() / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    cfg = assert_one_line_error(lambda: load_run_config(path, items), str(path))
    assert cfg is None or isinstance(cfg, RunConfig)


@settings(max_examples=200, deadline=None)
@given(st.lists(overrides, min_size=1, max_size=4))
def test_overrides_alone_only_raise_one_line_config_errors(items):
    assert_one_line_error(lambda: load_run_config(None, items))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_one_line_config_errors(tmp_path_factory, data):
    path = tmp_path_factory.getbasetemp() / "bytes.yaml"
    path.write_bytes(data)
    assert_one_line_error(lambda: load_run_config(path), str(path))
