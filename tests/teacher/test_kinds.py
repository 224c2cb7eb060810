"""The teacher's kind is read in one place (docs/architecture.md "Adding a teacher kind").

`distillscope.teacher.kinds` chooses the kind (`open_pair`, `open_teacher`); the training loop,
its setup and the GRPO stage call that one constructor and the one interface, so adding a kind
touches teacher/ (and its config field) and nothing in train/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import distillscope

SRC = Path(distillscope.__file__).parent

#: what names a teacher's kind: the config fields and predicates that tell kinds apart, and the
#: kinds' classes and loaders
KIND_NAMES = (
    "served_url",
    "CROSS_TOKENIZER_KINDS",
    "teacher_cache",
    "teachers",
    "ServedTeacher",
    "served_pair",
    "TeacherScorer",
    "RoutedTeachers",
    "CrossTokenizerTeacher",
    "CrossTokenizerPrompts",
    "load_cross_tokenizer_pair",
    "primary_config",
)

#: train/ modules that run whatever the teacher is (cache_build builds one local teacher's cache
#: and run_checks.py calls the teacher's checks: both name the kind on purpose)
KIND_FREE = ("loop.py", "setup.py", "grpo.py", "step.py", "machinery.py", "distributed.py")


def _names(path: Path) -> set[str]:
    """Every identifier and attribute name in ``path``'s code (not its comments or docstrings)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.asname or node.name.rsplit(".", 1)[-1])
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("module", KIND_FREE)
def test_the_loop_and_its_setup_never_name_a_teacher_kind(module):
    names = _names(SRC / "train" / module)
    assert not names & set(KIND_NAMES), sorted(names & set(KIND_NAMES))
    teacher_modules = {n for n in names if n.startswith("distillscope.teacher")}
    assert teacher_modules <= {"distillscope.teacher.kinds", "distillscope.teacher.signal"}


def test_the_check_finds_a_kind_where_one_is_named():
    """Not vacuous: the constructor itself names every kind it chooses among."""
    names = _names(SRC / "teacher" / "kinds.py")
    assert {"served_url", "CROSS_TOKENIZER_KINDS", "teachers", "RoutedTeachers"} <= names
