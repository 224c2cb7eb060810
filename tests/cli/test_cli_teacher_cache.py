"""``teacher-cache build``'s sources: a run config's overrides, a run config file, a study file
or a preset, each giving the run configs the cache is built for."""

from __future__ import annotations

from distillscope.cli.teacher_cache_cmd import _configs


def test_overrides_alone_give_one_run_config():
    (cfg,), name = _configs("optim.steps=3", ["objective.teacher_topk=4"])
    assert (cfg.optim.steps, cfg.objective.teacher_topk, name) == (3, 4, "the run config")


def test_a_run_config_file_is_one_run(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("optim: {steps: 5}\nrollout: {policy: teacher}\n")
    (cfg,), name = _configs(str(path), ["objective.teacher_topk=2"])
    assert (cfg.optim.steps, cfg.rollout.policy, name) == (5, "teacher", str(path))


def test_a_study_file_gives_every_run_with_the_overrides(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(
        "name: grid\ndescription: d\nbase: {rollout: {policy: teacher}}\n"
        "experiments:\n  - name: g\n    axes: {optim.lr: [1.0e-3, 3.0e-4]}\n"
    )
    configs, name = _configs(str(path), ["objective.teacher_topk=8"])
    assert name == "study grid"
    assert sorted(c.optim.lr for c in configs) == [3e-4, 1e-3]
    assert {c.objective.teacher_topk for c in configs} == {8}


def test_a_preset_gives_its_runs():
    configs, name = _configs("smoke", [])
    assert name == "study smoke"
    assert {c.rollout.policy for c in configs} == {"student", "teacher"}
