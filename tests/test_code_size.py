"""Size limits that keep the code readable (STYLE rule 12): no function in ``src/`` longer than
80 lines (its signature counted, its docstring not) and none with more than 10 parameters
(``self``/``cls`` not counted). A function that needs more takes a small frozen spec instead."""

from __future__ import annotations

import ast
from pathlib import Path

import distillscope

SRC = Path(distillscope.__file__).parent
MAX_LINES = 80
MAX_PARAMS = 10


def _functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append((f"{path.relative_to(SRC.parent)}:{node.lineno} {node.name}", node))
    return out


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the ``def`` to the function's last line, its signature included and its
    docstring not."""
    first = node.body[0]
    is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    doc_lines = (
        first.end_lineno - first.lineno + 1 if is_doc and isinstance(first.value.value, str) else 0
    )
    return node.end_lineno - node.lineno + 1 - doc_lines


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    count = len(names) + (a.vararg is not None) + (a.kwarg is not None)
    return count - (1 if names and names[0].arg in ("self", "cls") else 0)


def test_the_checks_see_the_code():
    found = dict(_functions())
    assert len(found) > 300  # the walk reads the package, not an empty directory
    tree = ast.parse("def f(self, a, b=1, *c, d, **e):\n    '''doc'''\n    x = 1\n    return x\n")
    f = tree.body[0]
    assert parameters(f) == 5 and body_lines(f) == 3


def test_no_function_is_longer_than_80_lines():
    long = [
        f"{where} ({body_lines(n)} lines)" for where, n in _functions() if body_lines(n) > MAX_LINES
    ]
    assert not long, long


def test_no_function_takes_more_than_10_parameters():
    wide = [f"{where} ({parameters(n)})" for where, n in _functions() if parameters(n) > MAX_PARAMS]
    assert not wide, wide
