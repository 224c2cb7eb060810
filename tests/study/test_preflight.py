"""Every input a run would fail on after training is refused before it starts: one line, exit 2,
nothing written (``train``, ``study`` and ``study plan`` alike).

Each case uses tiny random models (tests/conftest.py); the forgetting suite is a local lm-eval
task whose dataset is a hub id that is not cached, with the hub offline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.conftest import served_teacher
from tests.study.conftest import OFFLINE_DATASET, write_mcq
from typer.testing import CliRunner

from distillscope.cli import app

runner = CliRunner()


def pair_args(teacher: Path, student: Path) -> list[str]:
    return [f"model.teacher={teacher}", f"model.student={student}"]


def small_eval() -> list[str]:
    return ["eval.items=2", "eval.coverage_items=0", "eval.skill_items=0", "eval.harder_task=null"]


def refused(args: list[str], out: Path, *needles: str) -> str:
    """Invoke the CLI, assert exit 2 with one line holding ``needles``, and ``out`` unwritten."""
    res = runner.invoke(app, args)
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    assert "internal error" not in res.output and "Traceback" not in res.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not out.exists()
    return lines[0]


def study_file(tmp_path: Path, overrides: list[str]) -> Path:
    """A one-experiment study (two runs over the objective) whose base holds ``overrides``."""
    base: dict = {}
    for item in overrides:
        key, value = item.split("=", 1)
        *sections, field = key.split(".")
        node = base
        for section in sections:
            node = node.setdefault(section, {})
        node[field] = yaml.safe_load(value)
    spec = {
        "name": "pf",
        "base": base,
        "experiments": [{"name": "main", "axes": {"objective.kind": ["forward_kl", "reverse_kl"]}}],
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def refused_everywhere(tmp_path: Path, overrides: list[str], *needles: str) -> str:
    """``train``, ``study plan`` and ``study`` all refuse ``overrides`` the same way (the line)."""
    out = tmp_path / "out"
    refused(["train", "--out", str(out), *overrides], out, *needles)
    spec = str(study_file(tmp_path, overrides))
    refused(["study", "plan", spec], out, *needles)
    return refused(["study", spec, "--out", str(out), "--executor", "sequential"], out, *needles)


def test_another_tokenizer_is_refused_before_training(tmp_path, padded_qwen_pair, tiny_pair):
    args = [*pair_args(padded_qwen_pair[0], tiny_pair[1]), *small_eval()]
    refused_everywhere(tmp_path, args, "tokenizers of", "differ", "share one tokenizer")


def test_too_few_held_out_rows_are_refused(tmp_path, tiny_pair):
    task = write_mcq(tmp_path / "med.jsonl", 30)  # ~6 held out at eval_fraction 0.2
    args = [
        *pair_args(*tiny_pair),
        "task.name=mcq",
        f"task.file={task}",
        "task.prompt_format=testbed",
        *small_eval(),
    ]
    refused_everywhere(tmp_path, [*args, "eval.items=50"], "held-out rows", "needs 50")


def test_an_unreachable_forgetting_dataset_is_refused(tmp_path, tiny_pair, offline_suite):
    args = [
        *pair_args(*tiny_pair),
        *small_eval(),
        "eval.forgetting.harness=lm-eval",
        "eval.forgetting.tasks=[remote_mc]",
        f"eval.forgetting.include_path={offline_suite}",
    ]
    refused_everywhere(tmp_path, args, OFFLINE_DATASET, "not cached", "HF_HUB_OFFLINE=1")
    # once it is cached (the hub cache's layout), the same run passes the preflight
    hub = tmp_path / "hf-home" / "hub" / f"datasets--{OFFLINE_DATASET.replace('/', '--')}"
    hub.mkdir(parents=True)
    res = runner.invoke(app, ["study", "plan", str(study_file(tmp_path, args))])
    assert res.exit_code == 0, res.output


@pytest.fixture
def small_topk_server(tiny_pair):
    """The tiny teacher served with ``--topk-max 2``."""
    with served_teacher(tiny_pair[0], topk_max=2) as url:
        yield url


def test_a_served_teacher_below_teacher_topk_is_refused(tmp_path, tiny_pair, small_topk_server):
    args = [
        f"model.teacher={small_topk_server}",
        f"model.student={tiny_pair[1]}",
        "objective.teacher_topk=4",
        "objective.teacher_temperature=1.0",
        *small_eval(),
    ]
    refused_everywhere(tmp_path, args, "exceeds --topk-max 2", "--topk-max 4")


@pytest.fixture(params=["fingerprint", "probe"])
def tokenizer_check(request, monkeypatch):
    """How the served tokenizer is compared: the fingerprint ``serve-teacher`` shows, or (a
    server that shows none, as vLLM) a probe text through ``/tokenize``."""
    if request.param == "probe":
        from distillscope.teacher.client import TeacherClient

        monkeypatch.setattr(TeacherClient, "tokenizer_fingerprint", lambda self: None)
    return request.param


def served_args(url: str, student: Path) -> list[str]:
    return [
        f"model.teacher={url}",
        f"model.student={student}",
        "objective.teacher_topk=2",
        "objective.teacher_temperature=1.0",
        *small_eval(),
    ]


def test_a_served_teacher_with_another_tokenizer_is_refused(
    tmp_path, padded_qwen_pair, tiny_pair, tokenizer_check
):
    """The ChatML teacher served, the testbed student: refused by the plain preflight, before
    any model loads, not at the first step."""
    with served_teacher(padded_qwen_pair[0], topk_max=4) as url:
        needles = ["tokenizers of model.teacher", "the server's tokenizer differs"]
        args = served_args(url, tiny_pair[1])
        line = refused_everywhere(tmp_path, args, *needles, str(tiny_pair[1]))
    assert "opt in" not in line  # the cross-tokenizer objectives need a local teacher


@pytest.mark.parametrize("pair", ["tiny_pair", "padded_qwen_pair"])
def test_a_served_teacher_with_the_students_tokenizer_passes(
    tmp_path, request, pair, tokenizer_check
):
    """Passes for the testbed tokenizer and for a Qwen2 one, whose loaded pre-tokenizer is not
    its ``tokenizer.json``'s (the probe is confirmed as transformers loads it)."""
    teacher, student = request.getfixturevalue(pair)
    with served_teacher(teacher, topk_max=4) as url:
        spec = study_file(tmp_path, served_args(url, student))
        res = runner.invoke(app, ["study", "plan", str(spec)])
    assert res.exit_code == 0, res.output


def test_a_missing_extra_is_one_line_with_its_install_command(tmp_path, tiny_pair):
    if __import__("importlib").util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    args = [*pair_args(*tiny_pair), *small_eval(), "rollout.engine=vllm"]
    refused_everywhere(tmp_path, args, "pip install 'distillscope[vllm]'")


def test_an_import_error_naming_its_install_is_a_user_error(tmp_path, monkeypatch):
    """A missing extra raised past the preflight (an import inside a run) still exits 2."""
    import distillscope.study.preflight as preflight

    def missing(configs, trained=False):
        raise ImportError("x needs y: pip install 'distillscope[y]'")

    monkeypatch.setattr(preflight, "preflight_runs", missing)
    refused(["train", "--out", str(tmp_path / "r")], tmp_path / "r", "distillscope[y]")


def test_a_long_message_is_shown_whole_to_its_advice(tmp_path, monkeypatch):
    """A 300-character error (a path, a reason, the advice last) is one line, never cut."""
    import distillscope.study.preflight as preflight

    advice = "run it with --overwrite to start again"
    message = f"{'/a/long/path' * 24}: the reason; {advice}"
    assert len(message) > 300

    def long_error(configs, trained=False):
        raise ValueError(message)

    monkeypatch.setattr(preflight, "preflight_runs", long_error)
    line = refused(["train", "--out", str(tmp_path / "r")], tmp_path / "r")
    assert line == f"error: {message}"


PLAN_SCRIPT = """
import json, sys
from distillscope.study.preflight import preflight_runs
from distillscope.study.spec import expand, load_spec
preflight_runs([r.config for r in expand(load_spec("paper"))])
print(json.dumps(sorted(m for m in sys.modules if m in ("torch", "transformers"))))
"""


def test_the_preflight_of_a_whole_study_imports_no_torch():
    """Tokenizers are compared from their files, the held-out rows counted from the task files:
    the planning process stays light while a pool's workers import torch."""
    out = subprocess.run(
        [sys.executable, "-c", PLAN_SCRIPT], capture_output=True, text=True, timeout=300, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize(
    "other,needle",
    [
        ([], "tokenizers of"),
        (["objective.kind=uld", "eval.profile_steps=[1]"], "takes no eval.profile_steps"),
    ],
)
def test_a_cross_tokenizer_run_does_not_vouch_for_its_pairs_other_runs(
    padded_qwen_pair, tiny_pair, other, needle
):
    """The pair check runs once per distinct answer: a ULD run of a BPE teacher and a character
    student passes, and a study's later run of the same pair that does not opt in (or breaks the
    opt-in's rules) is still refused before anything runs."""
    from distillscope.config import load_run_config
    from distillscope.study.preflight import preflight_runs

    pair = [f"model.teacher={padded_qwen_pair[0]}", f"model.student={tiny_pair[1]}"]
    uld = load_run_config(None, [*pair, "objective.kind=uld"])
    preflight_runs([uld])
    with pytest.raises(ValueError, match=needle):
        preflight_runs([uld, load_run_config(None, [*pair, *other])])
