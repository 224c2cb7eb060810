"""``model.teachers`` + ``model.route``: validated in one line naming the field, before any model
loads; every prompt routed to a teacher (teacher/routing.py, torch-free)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from distillscope.config import ConfigError, load_run_config
from distillscope.config.model import mixture_teacher
from distillscope.safeyaml import load_yaml
from distillscope.store_versions import ADDED_FIELDS, skipped_fields
from distillscope.study.preflight import preflight_runs
from distillscope.study.spec import StudySpec, expand
from distillscope.tasks import resolve_task
from distillscope.tasks.base import Problem
from distillscope.teacher.routing import (
    check_routes,
    primary_config,
    routes,
    teacher_config,
)
from distillscope.train import preflight

TWO = "model.teachers={a: testbed:teacher, b: testbed:student}"
MIXTURE = "model.route={by: mixture, weights: {a: 3, b: 1}}"


def _cfg(*items: str):
    return load_run_config(None, list(items))


def _mcq(path, teachers: list[str]) -> str:
    rows = [
        {"question": f"q{i}", "options": ["x", "y"], "answer": "A", "teacher": t}
        for i, t in enumerate(teachers)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize(
    "items,needle",
    [
        ([TWO], "model.teachers and model.route are set together"),
        (["model.route={by: task}"], "model.teachers and model.route are set together"),
        ([TWO, "model.route={by: mixture}"], "model.route.weights is set with"),
        ([TWO, "model.route={by: column, weights: {a: 1}}"], "model.route.weights is set with"),
        ([TWO, "model.route={by: mixture, weights: {a: 1, c: 2}}"], "names 'c', not one of"),
        ([TWO, "model.route={by: mixture, weights: {a: 0}}"], "a weight > 0"),
        ([TWO, "model.route={by: task, column: t}"], "model.route.column='t' is ignored"),
        ([TWO, MIXTURE, "model.teacher=/x"], "model.teacher='/x' is ignored under model.teachers"),
        (["model.teachers={'a b': x}", MIXTURE], "model.teachers: name 'a b' must be"),
        (["model.teachers={a: 'http://u:p@h:1/v1'}", MIXTURE], "model.teachers.a: a server URL"),
        (["model.teachers={}", "model.route={by: task}"], "name at least one teacher"),
    ],
)
def test_a_bad_route_is_one_line_naming_the_field(items, needle):
    with pytest.raises(ConfigError) as err:
        _cfg(*items)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_one_teacher_is_todays_config_and_its_fingerprint():
    cfg = _cfg()
    assert cfg.model.teachers is None and cfg.model.route is None
    assert primary_config(cfg) is cfg and routes(cfg, [Problem("p", 1)]) == []
    # a version-1 directory's fingerprint leaves both out at their default
    assert {"model.teachers", "model.route"} <= skipped_fields(cfg.model_dump(mode="json"), 1)
    assert ADDED_FIELDS["model.teachers"].default is None
    assert ADDED_FIELDS["model.route"].version == 3  # added after version 2 existed


def test_each_teacher_is_a_one_teacher_config():
    cfg = _cfg(TWO, MIXTURE, "optim.lr=3e-4", "model.teacher_dtype=bfloat16")
    b = teacher_config(cfg, "b")
    assert b.model.teacher == "testbed:student" and b.model.teachers is None
    assert b.model.teacher_dtype == "bfloat16" and b.optim.lr == 3e-4
    assert primary_config(cfg).model.teacher == "testbed:teacher"


def test_a_served_teacher_in_a_mixture_keeps_a_served_teachers_rules():
    served = "model.teachers={a: testbed:teacher, s: 'http://127.0.0.1:9/v1'}"
    cfg = _cfg(served, "model.route={by: mixture, weights: {a: 1, s: 1}}")
    with pytest.raises(ConfigError, match=r"^model.teachers.s: .*objective.teacher_topk"):
        teacher_config(cfg, "s")
    ok = _cfg(
        served,
        "model.route={by: mixture, weights: {a: 1, s: 1}}",
        "objective.teacher_topk=4",
        "objective.teacher_temperature=1.0",
        "model.teacher_server={timeout_s: 5}",
    )
    assert teacher_config(ok, "s").model.teacher_server.timeout_s == 5
    assert teacher_config(ok, "a").model.teacher_server is None  # a local teacher's config


def test_a_mixture_is_fixed_per_prompt_by_the_seed():
    weights = {"a": 3.0, "b": 1.0}
    prompts = [f"cd {i},{i + 1},7 to 56:" for i in range(2000)]
    picks = [mixture_teacher(42, p, weights) for p in prompts]
    assert picks == [mixture_teacher(42, p, weights) for p in prompts]  # deterministic
    share = Counter(picks)["a"] / len(picks)
    # binomial: the share of a is 3/4 within 4 standard deviations sqrt(p(1 − p)/n) ≈ 0.0097
    assert abs(share - 0.75) < 4 * (0.75 * 0.25 / len(picks)) ** 0.5
    assert picks != [mixture_teacher(43, p, weights) for p in prompts]  # another seed
    assert {mixture_teacher(1, p, {"b": 1.0}) for p in prompts[:50]} == {"b"}


def test_a_task_route_reads_the_teacher_named_like_the_task():
    cfg = _cfg("model.teachers={tb-countdown3: testbed:teacher}", "model.route={by: task}")
    check_routes(cfg, resolve_task(cfg.task))
    assert routes(cfg, [Problem("p", 1)] * 2) == ["tb-countdown3"] * 2
    other = _cfg("model.teachers={x: testbed:teacher}", "model.route={by: task}")
    with pytest.raises(ConfigError, match="no teacher named task.name=tb-countdown3"):
        check_routes(other, resolve_task(other.task))


def test_a_column_route_checks_every_row_of_the_file(tmp_path):
    good = _mcq(tmp_path / "good.jsonl", ["a", "b", "a"])
    items = [TWO, "model.route={by: column}", "task.name=mcq", "task.prompt_format=testbed"]
    cfg = _cfg(*items, f"task.file={good}")
    task = resolve_task(cfg.task)
    check_routes(cfg, task)
    assert routes(cfg, list(task.problems())) == ["a", "b", "a"]
    bad = _mcq(tmp_path / "bad.jsonl", ["a", "b", "zed"])
    cfg = _cfg(*items, f"task.file={bad}")
    with pytest.raises(ConfigError) as err:
        check_routes(cfg, resolve_task(cfg.task))
    assert str(err.value) == (
        f"{bad} line 3: column 'teacher' names teacher 'zed', not one of model.teachers (a, b)"
    )
    cfg = _cfg(
        *items[:2], "model.route={by: column, column: judge}", *items[2:], f"task.file={good}"
    )
    with pytest.raises(ConfigError, match=r"line 1: no column 'judge' \(model.route.column\)"):
        check_routes(cfg, resolve_task(cfg.task))


def test_a_column_route_needs_a_task_with_rows_and_the_builtin_sampler():
    cfg = _cfg(TWO, "model.route={by: column}")
    with pytest.raises(ConfigError, match="tb-countdown3 has no rows"):
        check_routes(cfg, resolve_task(cfg.task))
    cfg = _cfg(TWO, MIXTURE, "rollout.policy=teacher", "rollout.engine=vllm")
    with pytest.raises(ConfigError, match="set rollout.engine=builtin"):
        check_routes(cfg, resolve_task(cfg.task))


DOC = Path(__file__).resolve().parents[2] / "docs" / "teachers.md"


def _yaml_block(first_line: str) -> str:
    """The docs' fenced YAML block that starts with ``first_line``."""
    found = re.search(rf"```yaml\n({re.escape(first_line)}\n.*?)```", DOC.read_text(), re.S)
    return found.group(1)


def test_the_docs_worked_example_and_its_study_axis_validate(tmp_path):
    path = tmp_path / "two-teachers.yaml"
    path.write_text(_yaml_block("# two-teachers.yaml"))
    cfg = load_run_config(path)
    check_routes(cfg, resolve_task(cfg.task))  # the testbed teachers exist, the names route
    assert cfg.model.teachers == {"large": "testbed:teacher", "small": "testbed:teacher-small"}
    assert teacher_config(cfg, "small").model.teacher == "testbed:teacher-small"
    axes = load_yaml(_yaml_block("axes:"), "docs/teachers.md")
    spec = StudySpec.model_validate(
        {"name": "teachers", "base": {}, "experiments": [{"name": "axis", **axes}]}
    )
    runs = expand(spec)
    teachers = sorted(str(r.config.model.teachers or r.config.model.teacher) for r in runs)
    # four distinct cells: two plain teachers, the routed pair, a teacher of another family
    assert len(runs) == 4 and len(set(teachers)) == 4


def test_each_teachers_inputs_are_checked_before_anything_runs(
    tmp_path, tiny_pair, padded_qwen_pair
):
    teacher, student = tiny_pair
    ours = [f"model.student={student}", MIXTURE]
    missing = _cfg(*ours, f"model.teachers={{a: '{teacher}', b: '{tmp_path / 'nope'}'}}")
    with pytest.raises(ValueError, match="nope") as err:
        preflight(missing)
    assert "\n" not in str(err.value)
    other = _cfg(*ours, f"model.teachers={{a: '{teacher}', b: '{padded_qwen_pair[0]}'}}")
    with pytest.raises(ValueError, match="tokenizers of"):
        preflight_runs([other])
    preflight_runs([_cfg(*ours, f"model.teachers={{a: '{teacher}', b: '{student}'}}")])


def test_one_run_and_a_study_refuse_a_run_with_several_problems_by_the_same_line(tmp_path):
    """The loop's ``preflight`` and a study's ``preflight_all`` check in one order (extras, the
    tasks, then the teacher side: routes, each teacher's inputs, its cache), so a run with a
    bad route and a missing teacher directory is refused by the same line, the route's; with
    the route mended, both name the directory."""
    from distillscope.train import preflight_all

    bad = _mcq(tmp_path / "bad.jsonl", ["a", "zed"])
    nope = tmp_path / "nope"
    items = [
        f"model.teachers={{a: testbed:teacher, b: '{nope}'}}",
        "model.route={by: column}",
        "task.name=mcq",
        "task.prompt_format=testbed",
    ]
    lines = set()
    for check in (preflight, lambda c: preflight_all([c])):
        with pytest.raises(ValueError) as err:
            check(_cfg(*items, f"task.file={bad}"))
        lines.add(str(err.value))
    assert lines == {
        f"{bad} line 2: column 'teacher' names teacher 'zed', not one of model.teachers (a, b)"
    }
    good = _mcq(tmp_path / "good.jsonl", ["a", "b"])
    for check in (preflight, lambda c: preflight_all([c])):
        with pytest.raises(ValueError, match=re.escape(str(nope))):
            check(_cfg(*items, f"task.file={good}"))
