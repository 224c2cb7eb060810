"""Package exports that load on first use, so that importing a light submodule stays light.

    __getattr__, __dir__, __all__ = lazy_exports(__name__, {"load": ("load_model",), ...})

A package ``__init__`` that re-exports its submodules' names would import all of them (and
torch with them) whenever any one submodule is imported — e.g. the objectives registry, which
every config validation reads. With these module-level ``__getattr__``/``__dir__`` (PEP 562)
``from distillscope.objectives import forward_kl`` still works, and imports ``divergences``
only then.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence


def lazy_exports(
    package: str, exports: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package`` whose ``exports`` map each submodule
    to the public names it provides."""
    module_of = {name: module for module, names in exports.items() for name in names}
    clash = sorted(set(module_of) & set(exports))
    if clash:  # importing the submodule would set the package attribute to the module itself
        raise ValueError(f"{package}: exported names {clash} are also submodule names")

    def __getattr__(name: str) -> object:
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module_of[name]}"), name)
        vars(sys.modules[package])[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *module_of})

    return __getattr__, __dir__, sorted(module_of)
