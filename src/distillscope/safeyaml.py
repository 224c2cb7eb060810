"""Bounded YAML loading and bounded quoting of user input in error messages.

Every YAML file distillscope reads from a user (run configs, overrides, study specs, presets, a
study directory's ``study.yaml``) goes through :func:`load_yaml`. It is ``yaml.safe_load`` with
limits, so a hostile or careless file fails in milliseconds with one line naming its source:

- at most :data:`MAX_BYTES` of text;
- at most :data:`MAX_NODES` nodes *after alias expansion* — an alias counts as many nodes as the
  tree it points to, so a "billion laughs" file (each level aliasing the previous one nine times)
  is refused while it is being composed, before anything downstream walks the expanded tree;
- at most :data:`MAX_ALIASES` alias uses and :data:`MAX_DEPTH` levels of nesting; an alias to
  a collection that is still open (a self-referencing structure) is refused.

:func:`quote` renders any value — a 1 MB string, a 10,000-element list, a 5,000-digit integer —
as at most ``limit`` characters on one line, for ``got ...`` in error messages.
"""

from __future__ import annotations

import reprlib
from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 1_000_000
MAX_NODES = 10_000
MAX_ALIASES = 100
MAX_DEPTH = 100
ELLIPSIS = "…"


class YamlError(ValueError):
    """A YAML text is malformed or over a limit; the message is one line naming its source."""


class _LimitExceeded(yaml.YAMLError):
    """Raised inside the loader when a limit is crossed (turned into :class:`YamlError`)."""


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that counts nodes after alias expansion while composing.

    ``_expanded`` holds the expanded size of every finished node (by ``id``; the nodes stay
    alive in the tree being built, so ids are not reused). A node's expanded size is the growth
    of the running total while it was composed: 1 for itself plus its children's sizes, where an
    alias adds the whole size of its target.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._total = 0
        self._aliases = 0
        self._depth = 0
        self._expanded: dict[int, int] = {}

    def _add(self, n: int) -> None:
        self._total += n
        if self._total > MAX_NODES:
            raise _LimitExceeded(f"more than {MAX_NODES:,} nodes after alias expansion")

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            anchor = self.peek_event().anchor
            target = self.anchors.get(anchor)
            if target is not None:  # an undefined alias is left to PyYAML's own error
                self._aliases += 1
                if self._aliases > MAX_ALIASES:
                    raise _LimitExceeded(f"more than {MAX_ALIASES} alias uses")
                size = self._expanded.get(id(target))
                if size is None:
                    raise _LimitExceeded(f"alias *{anchor} refers to a collection it is inside")
                self._add(size)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _LimitExceeded(f"nested deeper than {MAX_DEPTH} levels")
        start = self._total
        self._add(1)
        node = super().compose_node(parent, index)
        self._expanded[id(node)] = self._total - start
        self._depth -= 1
        return node


def _mark(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def load_yaml(text: str, source: str) -> Any:
    """Parse one YAML document with ``yaml.SafeLoader`` semantics, within the module's limits.

    Returns the document (``None`` for an empty text). Raises :class:`YamlError` with one line,
    ``"<source>: not valid YAML at line L, column C: <problem>"`` or
    ``"<source>: YAML over the limit: <which limit>"``, for malformed text, any limit crossed,
    or a value the constructor cannot build (e.g. an integer of more than 4,300 digits).
    """
    if len(text) > MAX_BYTES:
        raise YamlError(f"{source}: YAML over the limit: more than {MAX_BYTES:,} characters")
    loader = None
    try:
        loader = _BoundedLoader(text)  # the reader already checks for unprintable characters
        return loader.get_single_data()
    except _LimitExceeded as err:
        raise YamlError(f"{source}: YAML over the limit: {err}") from None
    except yaml.reader.ReaderError as err:
        where = f"character {err.position + 1}"
        raise YamlError(f"{source}: not valid YAML: unprintable character at {where}") from None
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or err.__class__.__name__
        raise YamlError(f"{source}: not valid YAML{_mark(err)}: {clip(problem, 100)}") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as err:  # from constructors
        raise YamlError(f"{source}: not valid YAML: {clip(str(err), 100)}") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_text_file(path: str | Path, what: str = "file", limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of ``path``; :class:`YamlError` in one line when it is missing, unreadable,
    over ``limit`` bytes or not UTF-8 (``"not UTF-8 text at byte N"``)."""
    p = Path(path)
    if not p.is_file():
        raise YamlError(f"{p}: no such {what}")
    try:
        if p.stat().st_size > limit:
            raise YamlError(f"{p}: {what} over the limit of {limit:,} bytes")
        data = p.read_bytes()
    except OSError as err:
        raise YamlError(f"{p}: cannot read the {what} ({err.strerror or err})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YamlError(f"{p}: not UTF-8 text at byte {err.start}") from None


def load_yaml_file(path: str | Path, what: str = "YAML file") -> Any:
    """:func:`read_text_file` then :func:`load_yaml`, naming ``path`` in every error."""
    return load_yaml(read_text_file(path, what), str(path))


def clip(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to at most ``limit`` characters with a trailing ellipsis."""
    one_line = " ".join(str(text)[: limit + 1].splitlines())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + ELLIPSIS


def quote(value: Any, limit: int = 200) -> str:
    """``repr(value)`` for an error message, on one line and at most ``limit`` characters.

    Never builds the full repr of a large value: strings are cut before quoting, containers show
    their first elements and a few levels, integers too long to print show their size.
    """
    if isinstance(value, str):
        return clip(repr(value[: limit + 1]), limit)
    if isinstance(value, int) and value.bit_length() > 3 * limit:
        return f"<an integer of about {int(value.bit_length() * 0.30103):,} digits>"
    short = reprlib.Repr()
    short.maxlevel = 4
    short.maxlist = short.maxtuple = short.maxdict = short.maxset = short.maxfrozenset = 10
    short.maxstring = short.maxother = short.maxlong = limit
    try:
        text = short.repr(value)
    except Exception:  # a hostile __repr__ or an integer over Python's print limit
        text = f"<{type(value).__name__}>"
    return clip(text, limit)
