from pathlib import Path

import pytest

from distillscope.config import ConfigError, load_run_config

CONFIGS = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_configs_validate(path):
    cfg = load_run_config(path)
    assert cfg.model.teacher == "testbed:teacher"


def test_four_cells_are_shipped():
    cells = {
        (load_run_config(p).rollout.policy, load_run_config(p).objective.kind) for p in CONFIGS
    }
    assert cells == {(r, k) for r in ("student", "teacher") for k in ("forward_kl", "reverse_kl")}


def test_bad_configs_name_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("optim: {lr: fast}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: optim.lr"):
        load_run_config(bad)
    bad.write_text("optimizer: {}\n")
    with pytest.raises(ConfigError, match="unknown field 'optimizer'"):
        load_run_config(bad)
    bad.write_text("[1, 2")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_run_config(bad)
    with pytest.raises(ConfigError, match="no such config file"):
        load_run_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="section.field=value"):
        load_run_config(None, ["lr"])


STUDIES = sorted((Path(__file__).parent.parent / "configs" / "studies").glob("*.yaml"))


@pytest.mark.parametrize("path", STUDIES, ids=[p.name for p in STUDIES])
def test_shipped_study_specs_expand(path):
    from distillscope.study.spec import expand, load_spec

    assert expand(load_spec(path))
