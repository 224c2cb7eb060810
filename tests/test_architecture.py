"""The arrows between distillscope's packages point one way (docs/architecture.md).

Every ``import`` of every module is read from its source (function-level imports included) and
checked against the allowed arrows: tasks, models, objectives, rollout and the torch-free store
sit below the teacher, the teacher below train and eval; safeyaml (bounded YAML, bounded
quoting) is a leaf under every reader of user files; train and eval never import each other; the
study orchestrates them; results/ reads only the store (below the scorecard, below the report,
which never imports training or the teacher); the CLI sits on top.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import distillscope

SRC = Path(distillscope.__file__).parent

#: unit → the units it may import (a unit is a subpackage or a top-level module).
ALLOWED: dict[str, set[str]] = {
    "metric_keys": set(),
    # reader-facing names: the rollout policies' and objective kinds' labels come from their
    # registries (rollout.policy_registry, objectives.registry: both torch-free)
    "labels": {"rollout", "objectives"},
    # how older run directories are read: imports nothing, read by the store, the config's
    # evaluation key, the teacher's cache key and the study's run ids
    "store_versions": set(),
    "store": {"store_versions"},
    "safeyaml": set(),
    "workers": set(),  # pool workers that die with their parent (study runs, calibration)
    "tasks": {"safeyaml"},  # task files quote row values through safeyaml.quote
    "objectives": set(),
    # objective kinds are validated against the objectives registry; YAML is read by safeyaml
    # (and task.file is checked against the file-task kinds of tasks)
    # (and rollout.policy against the rollout policy registry)
    "config": {"objectives", "rollout", "safeyaml", "store_versions", "tasks"},
    "testbed": {"tasks", "models"},  # the builder saves model directories where models finds them
    "models": set(),  # testbed:teacher / testbed:student are found by path, not by import
    "rollout": {"tasks", "objectives"},  # the sampler's tempered log-softmax is the objectives' one
    # every teacher kind behind one constructor, and its checks: above what it reads, below train
    "teacher": {
        "config",
        "store_versions",  # the teacher cache's key entries added later
        "tasks",
        "models",
        "objectives",
        "rollout",
    },
    "train": {
        "teacher",
        "config",
        "store",
        "store_versions",
        "metric_keys",
        "tasks",
        "models",
        "objectives",
        "rollout",
    },
    "eval": {
        "teacher",
        "config",
        "store",
        "metric_keys",
        "tasks",
        "models",
        "objectives",  # the gradient and estimator analyses (eval/analysis.py)
        "rollout",
    },
    "study": {
        "config",
        "safeyaml",
        "store",
        "store_versions",
        "metric_keys",
        "labels",
        "teacher",
        "train",
        "eval",
        "workers",
    },
    # a study's results, read from the store only: no scorecard, no report, no training
    "results": {"safeyaml", "store", "metric_keys", "labels"},
    # the claims and their verdicts, noise, power and calibration: read the results
    "scorecard": {"results", "store", "metric_keys", "labels", "workers"},
    # renders the results and the scorecard's verdicts (scope reads the model's names: config)
    "report": {"results", "scorecard", "config", "store", "metric_keys", "labels"},
    # the command line, one module per command (cli/), on top of everything
    "cli": {
        "teacher",  # serve-teacher: the server
        "safeyaml",
        "config",
        "store",
        "metric_keys",
        "labels",
        "tasks",
        "models",
        "testbed",
        "train",
        "eval",
        "study",
        "results",
        "scorecard",
        "report",
    },
}


def _unit(module: str) -> str | None:
    """``distillscope.train.loop`` → ``train``; None for the package root itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every distillscope module ``path`` imports, at any depth (lazy imports count)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
    return {m for m in found if m == "distillscope" or m.startswith("distillscope.")}


def _graph() -> dict[str, set[str]]:
    """unit → units it imports (self-imports dropped)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        unit = _unit(_module_name(path))
        if unit is None or unit == "__main__":
            continue
        targets = {_unit(m) for m in _imports(path)} - {None, unit}
        graph.setdefault(unit, set()).update(t for t in targets if t is not None)
    return graph


def test_every_unit_is_known():
    assert set(_graph()) <= set(ALLOWED), sorted(set(_graph()) - set(ALLOWED))


def test_imports_follow_the_allowed_arrows():
    wrong = {
        f"{unit} → {target}"
        for unit, targets in _graph().items()
        for target in targets
        if target not in ALLOWED.get(unit, set())
    }
    assert not wrong, sorted(wrong)


def test_train_and_eval_never_import_each_other():
    graph = _graph()
    assert "eval" not in graph.get("train", set())
    assert "train" not in graph.get("eval", set())


def _assert_acyclic(graph: dict[str, set[str]]) -> None:
    """Depth-first search; raises with the cycle's path when one exists."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " → ".join([*path, node, nxt]))
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def test_no_import_cycles_between_units():
    _assert_acyclic(_graph())


def test_no_import_cycles_between_modules():
    """Modules may import each other one way only (a lazy import does not hide a cycle).

    Package ``__init__`` files are left out: they re-export their own modules.
    """
    modules = {_module_name(p): p for p in SRC.rglob("*.py") if p.name != "__init__.py"}
    graph = {m: {t for t in _imports(p) if t in modules and t != m} for m, p in modules.items()}
    assert graph["distillscope.testbed.sharpen"]  # the graph is not vacuous
    _assert_acyclic(graph)


def _documented_modules() -> set[str]:
    """``pkg/module.py`` for every module the file list of docs/architecture.md names: a
    ``**pkg/**`` (or ``**pkg/sub/**``) line opens a package, ``**The top level**`` the package
    root; the claims package lists its claim modules by their ``cNN_….py`` pattern."""
    doc = (SRC.parent.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## The files", 1)[1].split("\n## ", 1)[0]
    listed, package = set(), None
    for line in section.splitlines():
        heading = re.match(r"\*\*(?:([a-z_/]+?)/|(The top level))\*\*", line)
        if heading:
            package = f"{heading.group(1)}/" if heading.group(1) else ""
        if package is not None:
            listed |= {package + name for name in re.findall(r"`([a-z_0-9]+\.py)`", line)}
    return listed


def test_the_architecture_doc_lists_every_module_and_no_other():
    modules = {p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if p.name != "__init__.py"}
    # one claim per module, found by file name (scorecard/claims/__init__.py): named by pattern
    modules = {m for m in modules if not re.fullmatch(r"scorecard/claims/c\d\d_[a-z0-9_]+\.py", m)}
    listed = _documented_modules()
    assert "rollout/policy_registry.py" in listed and "store.py" in listed
    assert sorted(modules - listed) == [], "modules docs/architecture.md does not list"
    assert sorted(listed - modules) == [], "docs/architecture.md lists modules that do not exist"


#: Command modules that may import another command module: a study writes its report at its end.
CLI_CROSSINGS = {("study_cmd", "report_cmd")}


def test_each_command_is_its_own_module_and_app_registers_it():
    """cli/: one ``*_cmd.py`` per command (or sub-app), none importing another's (but
    :data:`CLI_CROSSINGS`), each registered by ``cli/app.py`` (docs/architecture.md)."""
    cli = SRC / "cli"
    commands = {p.stem for p in cli.glob("*_cmd.py")}
    assert {"train_cmd", "eval_cmd", "study_cmd", "report_cmd"} <= commands
    crossings = {
        (name, target.rsplit(".", 1)[1])
        for name in commands
        for target in _imports(cli / f"{name}.py")
        if target.startswith("distillscope.cli.") and target.rsplit(".", 1)[1] in commands
    }
    assert crossings <= CLI_CROSSINGS, sorted(crossings - CLI_CROSSINGS)
    app = _imports(cli / "app.py")
    registered = {t.rsplit(".", 1)[1] for t in app if t.startswith("distillscope.cli.")} | {
        a.name for n in ast.walk(ast.parse((cli / "app.py").read_text()))
        if isinstance(n, ast.ImportFrom) and n.module == "distillscope.cli" for a in n.names
    }  # fmt: skip
    assert commands <= registered, sorted(commands - registered)
