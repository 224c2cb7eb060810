"""``task.dataset``: every results row, baselines included, names the dataset it was evaluated
on, so that two files of one task kind are two datasets, never one cell of twice the seeds."""

import json
import math

from distillscope.config import load_run_config
from distillscope.study.baseline import baseline_row, plan_baselines
from distillscope.study.spec import StudySpec, expand
from distillscope.study.table import plan_row


def _mcq_file(path, n=12):
    rows = [{"question": f"q{i}", "options": ["a", "b"], "answer": "A"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_two_files_of_one_task_are_two_datasets_and_baselines_carry_theirs(tmp_path):
    med, sci = _mcq_file(tmp_path / "med.jsonl"), _mcq_file(tmp_path / "sci.jsonl")
    spec = StudySpec.model_validate(
        {
            "name": "two-files",
            "base": {"task": {"name": "mcq"}, "optim": {"steps": 2}},
            "experiments": [
                {
                    "name": "main",
                    "axes": {
                        "task": {"med": {"task.file": med}, "sci": {"task.file": sci}},
                        "seed": [42, 43],
                    },
                }
            ],
        }
    )
    runs = expand(spec)
    identity = {r.run_id: plan_row(r)["task.dataset"] for r in runs}
    assert sorted(set(identity.values())) == [f"mcq:{med}", f"mcq:{sci}"]
    assert sum(v == f"mcq:{med}" for v in identity.values()) == 2  # two seeds per dataset
    baselines = plan_baselines(runs)  # one per file and seed: the evaluation differs
    rows = [baseline_row(b, tmp_path / "runs" / b.run_id) for b in baselines]
    assert len(rows) == 4 and {r["task.dataset"] for r in rows} == set(identity.values())
    assert all(r["status"] == "pending" and r["task.name"] == "mcq" for r in rows)
    # a real-task run measures neither the testbed's harder variant nor its skills
    assert {(r["measures.forgetting"], r["measures.transfer"]) for r in rows} == {("none", "none")}


def test_identity_names_the_hub_dataset_split_and_revision():
    cfg = load_run_config(
        None,
        [
            "task.name=medreason",
            "task.prompt_format=chat",
            "task.dataset={path: org/med, name: en, split: test, revision: v1}",
        ],
    )
    assert cfg.task.identity() == "medreason:org/med/en:test@v1"
    default = load_run_config(None, ["task.name=sciknoweval", "task.prompt_format=chat"])
    assert default.task.identity() == "sciknoweval:hicai-zju/SciKnowEval"
    testbed = load_run_config(None, [])
    assert testbed.task.identity() == "tb-countdown3"
    row = plan_row(expand(StudySpec.model_validate(
        {"name": "t", "base": {}, "experiments": [{"name": "e", "axes": {"seed": [1]}}]}
    ))[0])  # fmt: skip
    assert row["measures.forgetting"] == "testbed-skills"
    assert row["measures.transfer"] == "tb-countdown3-hard" and not math.isnan(row["seed"])
