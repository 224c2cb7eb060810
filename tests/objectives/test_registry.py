"""The objectives registry is the one list of kinds; configs are checked against it on load."""

from __future__ import annotations

import inspect

import pytest

from distillscope.config import ConfigError, ObjectiveConfig, run_config_from_dict
from distillscope.labels import OBJECTIVE_NAMES
from distillscope.objectives import DEFAULT_MEMORY_BUDGET_MB, OBJECTIVES, OPDOptions
from distillscope.objectives.divergences import DIVERGENCES
from distillscope.objectives.estimators import ESTIMATORS

#: the keywords each token kind's loss takes, by what the step passes it (registry docstring)
KEYWORDS = {
    "rollout_tokens": {"options", "reduction"},
    "drawn_tokens": {"reduction"},
    "cross_tokenizer": {"options", "form"},
}


def test_every_kind_validates_and_unknown_kinds_name_the_field():
    for name in OBJECTIVES:
        assert ObjectiveConfig(kind=name).kind == name
    with pytest.raises(ConfigError, match=r"objective\.kind: must be one of forward_kl"):
        run_config_from_dict({"objective": {"kind": "kl"}})


@pytest.mark.parametrize("name", list(OBJECTIVES))
def test_each_kind_loads_what_its_inputs_need(name):
    kind = OBJECTIVES[name]
    assert kind.name == name and OBJECTIVE_NAMES[name] == kind.label
    if kind.full_vocabulary:  # the declaration of the same name; its weights are its options
        assert kind.load() is DIVERGENCES[name]
        assert kind.weights == DIVERGENCES[name].weights
        assert kind.options == tuple(w.name for w in kind.weights)
    else:
        params = inspect.signature(kind.load()).parameters
        assert KEYWORDS[kind.inputs] <= set(params), name
    if kind.inputs == "drawn_tokens":  # the estimator of the same name, drawing where it says
        assert kind.load().keywords["estimator"] is ESTIMATORS[name]
        assert kind.draws_from == ESTIMATORS[name].draws_from
    for option in kind.options:
        assert option in ObjectiveConfig.model_fields, (name, option)
    assert kind.needs_generator == (kind.inputs == "drawn_tokens")


def test_every_declaration_is_a_kind():
    full = [name for name, kind in OBJECTIVES.items() if kind.full_vocabulary]
    assert full == list(DIVERGENCES)
    drawn = [name for name, kind in OBJECTIVES.items() if kind.inputs == "drawn_tokens"]
    assert drawn == list(ESTIMATORS)


def test_what_each_kind_reads_is_what_the_config_refuses_under_the_others():
    kind_only = {option for kind in OBJECTIVES.values() for option in kind.options}
    assert kind_only == {
        "beta",
        "alpha",
        "regulation",
        "clip_min",
        "clip_max",
        "eps_low",
        "eps_high",
        "updates_per_batch",
        "tempered_teacher",
    }
    values = {"regulation": "hard_clip", "updates_per_batch": 2, "tempered_teacher": True}
    for name, kind in OBJECTIVES.items():
        rollout = {"rollout": {"policy": "student"}}
        for option in kind_only - set(kind.options):
            data = {"objective": {"kind": name, option: values.get(option, 0.25)}}
            with pytest.raises(ConfigError, match=f"objective.{option}=.* is ignored under"):
                run_config_from_dict({**data, **rollout})


def test_memory_budget_and_opd_defaults_are_the_objectives_defaults():
    cfg = ObjectiveConfig()
    assert cfg.memory_budget_mb == DEFAULT_MEMORY_BUDGET_MB
    assert cfg.opd_options() == OPDOptions()
    assert cfg.chunks().chunk_size is None and cfg.chunks().memory_budget_mb == 256.0


def test_the_path_description_names_the_fused_threshold():
    from distillscope.objectives import FUSED_MIN_VOCAB

    description = ObjectiveConfig.model_fields["path"].description
    assert f"{FUSED_MIN_VOCAB:,} tokens" in description


@pytest.mark.parametrize("kind", list(OBJECTIVES))
def test_chunk_size_on_the_plain_path_fails_at_load(kind: str):
    data = {"objective": {"kind": kind, "chunk_size": 16, "path": "plain"}}
    if kind == "opd":
        data["rollout"] = {"policy": "student"}
    with pytest.raises(ConfigError, match=r"chunk_size=16 is ignored under objective\.path=plain"):
        run_config_from_dict(data)
    data["objective"]["path"] = "auto"
    assert run_config_from_dict(data).objective.chunk_size == 16


def test_opd_needs_student_rollouts_at_load():
    with pytest.raises(ConfigError, match="needs rollout.policy=student"):
        run_config_from_dict({"objective": {"kind": "opd"}, "rollout": {"policy": "teacher"}})
