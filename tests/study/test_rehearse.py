"""``study plan --rehearse``: each distinct configuration, end to end on tiny model copies, so
that every error a real run meets after training is met in seconds, one line per configuration.

One study over the tiny Qwen2-shaped pair (padded vocabularies, ChatML, two stop ids): an
experiment that trains and evaluates (two seeds, one configuration), and one configuration per
failure — another tokenizer, too few held-out rows, an offline forgetting dataset, a served
teacher below ``objective.teacher_topk``, a missing vLLM, and a chat format on a tokenizer
without a chat template (an error only a run meets: no static check reads templates).
"""

from __future__ import annotations

import importlib.util

import pytest
from tests.conftest import served_teacher
from tests.eval.test_forgetting import local_tasks  # noqa: F401 (a fixture)
from tests.study.conftest import OFFLINE_DATASET, write_mcq
from typer.testing import CliRunner

from distillscope.cli import app
from distillscope.store import read_eval, read_status
from distillscope.study.rehearse import distinct, rehearse, shrink
from distillscope.study.spec import StudySpec, expand
from distillscope.testbed.like import tiny_copies

runner = CliRunner()
HAS_VLLM = importlib.util.find_spec("vllm") is not None


def _spec(base: dict, failures: dict[str, dict]) -> StudySpec:
    experiments = [{"name": "main", "axes": {"seed": [0, 1]}}]
    experiments += [{"name": n, "axes": {"case": {n: over}}} for n, over in failures.items()]
    return StudySpec.model_validate({"name": "rh", "base": base, "experiments": experiments})


@pytest.fixture
def study(tmp_path, padded_qwen_pair, tiny_pair, offline_suite):
    teacher, student = padded_qwen_pair
    base = {
        "model": {"teacher": str(teacher), "student": str(student)},
        "task": {
            "name": "mcq",
            "file": str(write_mcq(tmp_path / "med.jsonl", 30)),
            "prompt_format": "chat",
            "max_new_tokens": 64,
        },
        "optim": {"steps": 100, "lr": 1e-4},
        "eval": {"items": 4, "coverage_items": 0, "skill_items": 0, "harder_task": None},
    }
    with served_teacher(tiny_pair[0], topk_max=2) as url:
        failures = {
            "tok": {"model.teacher": str(tiny_pair[0])},
            "rows": {"eval.items": 50},
            "harness": {
                "eval.forgetting.harness": "lm-eval",
                "eval.forgetting.tasks": ["remote_mc"],
                "eval.forgetting.include_path": str(offline_suite),
            },
            "served": {
                "model.teacher": url,
                "objective.teacher_topk": 4,
                "objective.teacher_temperature": 1.0,
            },
            "template": {"model.teacher": str(tiny_pair[0]), "model.student": str(tiny_pair[1])},
        }
        if not HAS_VLLM:
            failures["vllm"] = {"rollout.engine": "vllm"}
        yield _spec(base, failures)


EXPECTED = {
    "tok": "share one tokenizer",
    "rows": "held-out rows, evaluation needs 50",
    "harness": OFFLINE_DATASET,
    "served": "exceeds --topk-max 2",
    "template": "chat_template is not set",
    "vllm": "pip install 'distillscope[vllm]'",
}


def test_the_rehearsal_meets_every_error_and_trains_the_rest(study, tmp_path):
    runs = expand(study)
    assert [(r.run_id.split("_")[0], n) for r, n in distinct(runs)][0] == ("main", 2)  # 2 seeds
    results = rehearse(runs, tiny_copies(tmp_path / "models"), tmp_path / "rehearsal")
    by = {r.run.experiment: r for r in results}
    assert by["main"].error is None and by["main"].runs == 2
    ran = tmp_path / "rehearsal" / "runs" / by["main"].run.run_id
    assert read_status(ran)["status"] == "done"  # trained 2 steps, evaluated
    assert (ran / "eval.json").is_file()
    for name, needle in EXPECTED.items():
        if name in by:
            assert needle in str(by[name].error), (name, by[name].error)
    # nothing was written beside the rehearsal: no study directory, no run directories
    assert not (tmp_path / "out").exists()


def test_shrink_cuts_every_size_and_keeps_the_code_path(study, tmp_path):
    run = expand(study)[0]
    cfg = shrink(run.config, lambda path: f"{path}-tiny")
    assert cfg.model.teacher == f"{run.config.model.teacher}-tiny"
    assert (cfg.optim.steps, cfg.rollout.prompts_per_step, cfg.task.max_new_tokens) == (2, 2, 8)
    assert (cfg.eval.items, cfg.objective, cfg.task.prompt_format) == (
        2,
        run.config.objective,
        "chat",
    )


def test_plan_rehearse_exits_2_with_a_line_per_configuration(study, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "rh.yaml"
    import yaml

    spec.write_text(yaml.safe_dump(study.model_dump(mode="json")))
    res = runner.invoke(app, ["study", "plan", str(spec), "--rehearse", "--only", "main,rows"])
    assert res.exit_code == 2, res.output
    assert "main_seed-0" in res.output and ": ok" in res.output
    assert "1 of 2 configurations failed" in res.output
    res = runner.invoke(app, ["study", str(spec), "--rehearse"])
    assert res.exit_code == 2 and "--rehearse goes with plan" in res.output


def test_the_rehearsal_runs_the_forgetting_harness_once_per_suite(
    tmp_path,
    tiny_pair,
    local_tasks,  # noqa: F811
):
    """Two configurations share a local lm-eval suite: the first scores 1 item per task
    before and after its 2 steps, the second leaves the harness out."""
    pytest.importorskip("lm_eval")
    suite = {"tasks": ["tiny_sum"], "include_path": str(local_tasks), "batch_size": 1}
    base = {
        "model": {"teacher": str(tiny_pair[0]), "student": str(tiny_pair[1])},
        "eval": {"items": 4, "coverage_items": 0, "harder_task": None, "forgetting": suite},
    }
    spec = StudySpec.model_validate(
        {
            "name": "rh",
            "base": base,
            "experiments": [
                {"name": "m", "axes": {"objective.kind": ["forward_kl", "reverse_kl"]}}
            ],
        }
    )
    results = rehearse(expand(spec), tiny_copies(tmp_path / "models"), tmp_path / "r")
    assert [r.error for r in results] == [None, None]
    evals = [read_eval(tmp_path / "r" / "runs" / r.run.run_id) for r in results]
    assert "eval/forgetting_pp" in evals[0] and "eval/forgetting_pp" not in evals[1]
    assert evals[0]["eval/lmeval/tiny_sum"] in (0.0, 1.0)  # one item


def test_train_rehearse_prints_the_configuration_and_its_error(
    tmp_path, padded_qwen_pair, tiny_pair
):
    out = tmp_path / "run"
    pair = [f"model.teacher={padded_qwen_pair[0]}", f"model.student={tiny_pair[1]}"]
    res = runner.invoke(app, ["train", "--rehearse", "--out", str(out), *pair])
    assert res.exit_code == 2, res.output
    assert "run: failed" in res.output and "1 of 1 configurations failed" in res.output
    assert not out.exists()  # a rehearsal writes nothing of the run
