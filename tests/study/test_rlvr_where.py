"""``rlvr.where``: the RLVR stage follows only the parents with the given settings."""

import pytest

from distillscope.config import ConfigError
from distillscope.study.spec import StudySpec, expand, load_spec


def with_where(where: dict) -> StudySpec:
    data = load_spec("paper").model_dump(mode="json", by_alias=True)
    data["rlvr"][0]["where"] = where  # the stage that follows `main`
    return StudySpec.model_validate(data)


def test_where_keeps_the_parents_with_those_settings():
    runs = expand(with_where({"optim.lr": 1.0e-4}))
    rlvr = [r for r in runs if r.experiment == "rlvr"]
    parents = {r.run_id: r for r in runs if r.experiment == "main"}
    assert len(rlvr) == len(parents) // 2  # the low-LR half of main
    assert all(parents[r.parent].config.optim.lr == 1.0e-4 for r in rlvr)
    assert all(r.config.optim.lr == 1.0e-4 for r in rlvr)
    # no where: every run of the source experiment
    assert len([r for r in expand(load_spec("paper")) if r.experiment == "rlvr"]) == len(parents)


def test_where_errors_name_the_field():
    with pytest.raises(ConfigError, match=r"rlvr.where: optim.lrr is not a run-config field"):
        expand(with_where({"optim.lrr": 1.0e-4}))
    with pytest.raises(ConfigError, match=r"matches none of the 24 runs of experiment main"):
        expand(with_where({"task.name": "countdown3"}))
