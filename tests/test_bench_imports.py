"""Every name a bench/ script imports from distillscope exists (benches are not run in CI)."""

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _distillscope_imports(path: Path) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("distillscope"):
            found += [(node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("script", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_bench_script_imports_resolve(script):
    for module, name in _distillscope_imports(script):
        mod = importlib.import_module(module)
        if not hasattr(mod, name):  # a submodule imported by name
            importlib.import_module(f"{module}.{name}")


def test_step_benchmark_configs_load_for_both_shapes_and_divergences(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_step_trl", BENCH / "bench_step_trl.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for name in bench.TARGETS:
        for kind in bench.BETA:
            cfg = bench.ours_config(bench.shape_of(name, tmp_path, 4), kind, 2)
            assert cfg.rollout.policy == "student" and cfg.objective.kind == kind
            assert cfg.objective.reduction == "token_mean"
