"""Package exports that load on first use, from one list editors read (distillscope.lazy)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import distillscope
from distillscope.lazy import exported_names, lazy_exports

SRC = Path(distillscope.__file__).parent


def _lazy_packages() -> list[str]:
    """Every package of distillscope whose ``__init__`` calls ``lazy_exports``."""
    return sorted(
        ".".join(path.parent.relative_to(SRC.parent).parts)
        for path in SRC.rglob("__init__.py")
        if "lazy_exports(" in path.read_text(encoding="utf-8")
    )


def test_the_lazy_packages_are_found():
    assert {"distillscope.objectives", "distillscope.train", "distillscope.models"} <= set(
        _lazy_packages()
    )


@pytest.mark.parametrize("package", _lazy_packages())
def test_every_public_name_resolves_to_its_modules_object(package):
    module = importlib.import_module(package)
    names = exported_names(package, module.__file__)
    assert names and sorted(names) == module.__all__
    for name, source in names.items():
        assert getattr(module, name) is getattr(importlib.import_module(source), name), name
        assert name in dir(module)


@pytest.mark.parametrize("package", _lazy_packages())
def test_the_type_checking_block_is_the_only_list(package):
    """No literal list of names beside the imports editors read: the block is all there is."""
    tree = ast.parse(Path(importlib.import_module(package).__file__).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            assert not isinstance(node.value, ast.List | ast.Tuple | ast.Dict | ast.Set), (
                f"{package}: line {node.lineno} lists names outside the TYPE_CHECKING block"
            )
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    lazy = [c for c in calls if getattr(c.func, "id", "") == "lazy_exports"]
    assert len(lazy) == 1 and [ast.unparse(a) for a in lazy[0].args] == ["__name__", "__file__"]


def test_help_resolves_a_lazy_name_in_a_fresh_process():
    script = """
import sys
import distillscope.objectives as objectives
assert "torch" not in sys.modules and "distillscope.objectives.divergences" not in sys.modules
help(objectives.divergence_loss)
from distillscope.objectives.divergences import divergence_loss
assert objectives.divergence_loss is divergence_loss
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    assert "the plain path of every full-vocabulary kind" in out.stdout


def test_exports_load_their_module_on_first_use_and_equal_the_originals():
    script = """
import sys
import distillscope.train as train
assert "distillscope.train.loop" not in sys.modules and "torch" not in sys.modules
assert "distill" in dir(train) and "preflight_all" in train.__all__
from distillscope.train import distill
from distillscope.train.loop import distill as original
assert distill is original and "distillscope.train.loop" in sys.modules
try:
    train.no_such_name
except AttributeError as err:
    assert "no_such_name" in str(err)
else:
    raise SystemExit("no AttributeError")
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)


def _package(tmp_path: Path, block: str) -> Path:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "loop.py").write_text("def loop():\n    return 1\n")
    init = root / "__init__.py"
    init.write_text(f"from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n{block}\n")
    return init


def test_a_name_that_is_also_a_submodule_is_refused(tmp_path):
    # importing loop.py sets pkg.loop to the module: an export of that name would then
    # silently be the module instead of the function
    init = _package(tmp_path, "    from .loop import loop")
    with pytest.raises(ValueError, match=r"\['loop'\] are also submodule names"):
        lazy_exports("pkg", init)


def test_relative_and_aliased_imports_name_their_module(tmp_path):
    init = _package(tmp_path, "    from .loop import loop as run\n    from pkg import loop as step")
    assert exported_names("pkg", init) == {"run": "pkg.loop", "step": "pkg"}


@pytest.mark.parametrize(
    "block", ["    import os", "    x = 1", "    from .loop import *", "    pass"]
)
def test_anything_but_from_imports_in_the_block_is_refused(tmp_path, block):
    with pytest.raises(ValueError, match="TYPE_CHECKING block"):
        exported_names("pkg", _package(tmp_path, block))


def test_a_package_without_the_block_is_refused(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text("X = 1\n")
    with pytest.raises(ValueError, match="exactly one `if TYPE_CHECKING:` block"):
        exported_names("pkg", init)
