"""The objectives registry is the one list of kinds; configs are checked against it on load."""

from __future__ import annotations

import inspect

import pytest

from distillscope.config import ConfigError, ObjectiveConfig, run_config_from_dict
from distillscope.objectives import DIVERGENCES, OBJECTIVES, chunked_divergence


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


def test_chunkable_kinds_are_the_chunked_divergences():
    divergence = inspect.signature(chunked_divergence).parameters["divergence"]
    assert divergence.default in OBJECTIVES
    assert {k.name for k in OBJECTIVES.values() if k.chunkable} == set(DIVERGENCES)
    for kind in OBJECTIVES.values():
        assert kind.chunkable == kind.full_vocabulary


@pytest.mark.parametrize("kind", [k for k, v in OBJECTIVES.items() if not v.chunkable])
def test_chunk_size_with_a_non_chunkable_kind_fails_at_load(kind: str):
    data = {"objective": {"kind": kind, "chunk_size": 16}}
    with pytest.raises(ConfigError, match=r"objective\.chunk_size=16 needs a chunkable"):
        run_config_from_dict(data)


def test_opd_needs_student_rollouts_at_load():
    with pytest.raises(ConfigError, match="needs rollout.policy=student"):
        run_config_from_dict({"objective": {"kind": "opd"}, "rollout": {"policy": "teacher"}})
