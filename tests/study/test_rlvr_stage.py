"""The study's RLVR stage: planning (one RLVR run per run of its source experiment), bad specs,
and a study end to end whose RLVR runs start from its distilled students."""

import pandas as pd
import pytest
import yaml

from distillscope.config import ConfigError
from distillscope.report.render import write_report
from distillscope.scorecard.runner import score_claims
from distillscope.store import read_eval_items, run_dir, write_status
from distillscope.study.run_study import _ready, run_study
from distillscope.study.spec import StudySpec, _read_spec, expand


def spec(**rlvr) -> StudySpec:
    return StudySpec.model_validate(
        {
            "name": "t",
            "base": {
                "optim": {"steps": 2, "warmup_steps": 1, "lr": 1e-3},
                "rollout": {"prompts_per_step": 4},
                "task": {"max_new_tokens": 12},
                "checkpoint_every": 0,
                "eval": {"items": 4, "coverage_items": 0, "skill_items": 2},
            },
            "experiments": [
                {
                    "name": "main",
                    "axes": {"rollout.policy": ["student", "teacher"], "optim.lr": {"low": 1e-4}},
                },
                {"name": "other", "axes": {"seed": [1]}},
            ],
            "rlvr": {"from": "main", **rlvr},
        }
    )


def test_one_rlvr_run_per_run_of_the_source_experiment():
    runs = expand(spec(overrides={"steps": 3}))
    parents = [r for r in runs if r.experiment == "main"]
    children = [r for r in runs if r.experiment == "rlvr"]
    assert len(children) == len(parents) == 2
    for parent, child in zip(parents, children, strict=True):
        assert child.parent == parent.run_id
        assert child.config.rlvr.parent == parent.run_id and child.config.rlvr.steps == 3
        assert child.axes == parent.axes and child.labels == parent.labels == {"lr_label": "low"}
        assert child.config.rollout == parent.config.rollout  # the cell it came from
        assert child.run_id.startswith("rlvr_policy-")
    assert all(r.parent is None for r in runs if r.experiment != "rlvr")
    assert [r.run_id for r in expand(spec(overrides={"steps": 3}))] == [r.run_id for r in runs]


@pytest.mark.parametrize(
    "rlvr,message",
    [
        ({"from": "nowhere"}, "rlvr.from names experiment 'nowhere'"),
        ({"name": "main"}, "rlvr.name 'main' is also an experiment"),
        ({"overrides": {"parent": "x"}}, "remove 'parent'"),
    ],
)
def test_bad_stage_is_one_line_naming_the_field(tmp_path, rlvr, message):
    study = {"experiments": [{"name": "main", "axes": {"seed": [1]}}], "rlvr": {"from": "main"}}
    study["rlvr"].update(rlvr)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(study))
    with pytest.raises(ConfigError, match=message) as err:
        _read_spec(path)
    assert "\n" not in str(err.value)


def test_two_stages_follow_their_own_experiments():
    base = spec().model_dump(by_alias=True)
    base["rlvr"] = [
        {"from": "main", "overrides": {"steps": 3}},
        {"name": "grpo", "from": "other", "overrides": {"task": "tb-countdown3", "steps": 5}},
    ]
    runs = expand(StudySpec.model_validate(base))
    by = {e: [r for r in runs if r.experiment == e] for e in ("main", "other", "rlvr", "grpo")}
    assert [r.parent for r in by["rlvr"]] == [r.run_id for r in by["main"]]
    assert [r.parent for r in by["grpo"]] == [r.run_id for r in by["other"]]
    assert [r.config.rlvr.steps for r in by["rlvr"] + by["grpo"]] == [3, 3, 5]
    base["rlvr"][1]["name"] = "rlvr"
    with pytest.raises(ValueError, match="rlvr.name 'rlvr' names two RLVR stages"):
        StudySpec.model_validate(base)


def test_a_bad_rlvr_setting_names_the_field():
    with pytest.raises(ConfigError, match="rlvr.group_size"):
        expand(spec(overrides={"group_size": 1}))


def test_an_rlvr_run_waits_for_a_done_parent(tmp_path):
    child = next(r for r in expand(spec()) if r.experiment == "rlvr")
    assert not _ready(child, tmp_path)  # no parent directory yet
    for status, ready in (("failed", False), ("diverged", False), ("done", True)):
        write_status(tmp_path / "runs" / child.parent, status)
        assert _ready(child, tmp_path) is ready


def test_a_study_runs_its_rlvr_stage_after_the_distillation(tmp_path):
    s = spec(overrides={"steps": 2, "prompts_per_step": 2, "group_size": 2})
    table = pd.read_parquet(run_study(s, tmp_path))
    rlvr = table[table["experiment"] == "rlvr"]
    assert len(rlvr) == 2 and set(rlvr["status"]) == {"done"}
    main = table[table["experiment"] == "main"].set_index("run_id")
    assert set(rlvr["parent_run"]) == set(main.index)
    for _, row in rlvr.iterrows():
        assert row["rollout.policy"] == main.loc[row["parent_run"], "rollout.policy"]
        assert 0.0 <= row["rlvr/eval_accuracy"] <= 1.0
        outcomes = read_eval_items(run_dir(tmp_path, row["run_id"]))  # both students' samples
        means = outcomes.groupby("block")["score"].mean()
        for block in ("rlvr/eval_accuracy", "rlvr/eval_accuracy_before"):
            assert means[block] == pytest.approx(row[block], abs=1e-12)
    assert table["parent_run"].isna().sum() == len(table) - 2
    verdicts = {c.id: c.verdict for c in score_claims(table, tmp_path)}
    assert verdicts[11] not in ("not implemented", "error")
    assert verdicts[20] not in ("not implemented", "error")
    paths = write_report(tmp_path)
    assert paths["figure:rlvr"].stat().st_size > 0
    assert "RLVR follow-up" in paths["html"].read_text()
