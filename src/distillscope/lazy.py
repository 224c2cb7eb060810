"""Package exports that load on first use, from the one list that editors read.

A package ``__init__`` lists its public names once, as plain imports in an ``if TYPE_CHECKING:``
block — editors, type checkers and go-to-definition read them there — and ends with one line::

    from typing import TYPE_CHECKING

    from distillscope.lazy import lazy_exports

    if TYPE_CHECKING:
        from distillscope.objectives.divergences import forward_kl, reverse_kl
        from distillscope.objectives.registry import OBJECTIVES

    __getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)

:func:`lazy_exports` reads that block from the package's own source (there is no second list)
and gives the package a module-level ``__getattr__`` (PEP 562): ``from distillscope.objectives
import forward_kl`` imports ``divergences`` (and torch) only then, so importing a light
submodule — the objectives registry, which every config validation reads — stays light.
``help(distillscope.objectives.forward_kl)`` and ``dir()`` resolve every name at runtime.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from collections.abc import Callable
from pathlib import Path


def exported_names(package: str, init_file: str | Path) -> dict[str, str]:
    """``{public name: absolute module}`` from the ``if TYPE_CHECKING:`` block of ``init_file``.

    The block may hold only ``from <module> import <name>[ as <alias>]`` lines (absolute, or
    relative to ``package``); anything else there raises ValueError, as does a missing block.
    """
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    blocks = [n for n in tree.body if isinstance(n, ast.If) and _is_type_checking(n.test)]
    if len(blocks) != 1:
        raise ValueError(f"{package}: need exactly one `if TYPE_CHECKING:` block of exports")
    module_of: dict[str, str] = {}
    for node in blocks[0].body:
        if not isinstance(node, ast.ImportFrom) or any(a.name == "*" for a in node.names):
            raise ValueError(
                f"{package}: line {node.lineno} of the TYPE_CHECKING block is not "
                "`from <module> import <names>`"
            )
        module = _absolute(package, node.module or "", node.level)
        for alias in node.names:
            module_of[alias.asname or alias.name] = module
    return module_of


def lazy_exports(
    package: str, init_file: str | Path
) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package`` from its ``if TYPE_CHECKING:`` block
    (:func:`exported_names`); a name is imported from its module on first use."""
    module_of = exported_names(package, init_file)
    submodules = {m.name for m in pkgutil.iter_modules([str(Path(init_file).parent)])}
    clash = sorted(set(module_of) & submodules)
    if clash:  # importing the submodule would set the package attribute to the module itself
        raise ValueError(f"{package}: exported names {clash} are also submodule names")

    def __getattr__(name: str) -> object:
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_of[name]), name)
        vars(sys.modules[package])[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *module_of})

    return __getattr__, __dir__, sorted(module_of)


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _absolute(package: str, module: str, level: int) -> str:
    """The absolute name of ``from <.. module> import`` written in ``package``'s ``__init__``."""
    if not level:
        return module
    parts = package.split(".")
    anchor = parts[: len(parts) - level + 1]
    return ".".join([*anchor, module] if module else anchor)
