"""The objectives registry is the one list of kinds; configs are checked against it on load."""

from __future__ import annotations

import inspect

import pytest

from distillscope.config import ConfigError, ObjectiveConfig, run_config_from_dict
from distillscope.objectives import (
    DEFAULT_MEMORY_BUDGET_MB,
    DIVERGENCES,
    OBJECTIVES,
    fused_divergence,
)


def test_every_kind_validates_and_unknown_kinds_name_the_field():
    for name in OBJECTIVES:
        assert ObjectiveConfig(kind=name).kind == name
    with pytest.raises(ConfigError, match=r"objective\.kind: must be one of forward_kl"):
        run_config_from_dict({"objective": {"kind": "kl"}})


def test_options_are_config_fields_and_keywords_of_the_function():
    for kind in OBJECTIVES.values():
        params = inspect.signature(kind.loss).parameters
        for option in kind.options:
            assert option in ObjectiveConfig.model_fields, (kind.name, option)
            assert option in params, (kind.name, option)
        assert ("generator" in params) == kind.needs_generator, kind.name


def test_every_kind_has_a_hidden_state_form():
    divergence = inspect.signature(fused_divergence).parameters["divergence"]
    assert divergence.default in OBJECTIVES
    for kind in OBJECTIVES.values():
        want = "divergence" if kind.name in DIVERGENCES else "token_logprobs"
        assert kind.hidden_form == want, kind.name
        assert kind.full_vocabulary == (kind.name in DIVERGENCES)


def test_memory_budget_default_is_the_fused_default():
    assert ObjectiveConfig().memory_budget_mb == DEFAULT_MEMORY_BUDGET_MB


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
