import json

from transformers import AutoModelForCausalLM, AutoTokenizer

from distillscope.testbed.build import build
from distillscope.testbed.recipe import DEFAULT_RECIPE


def test_tiny_build_writes_loadable_models_and_record(tmp_path):
    info = build(
        tmp_path, DEFAULT_RECIPE, steps_scale=0.002, log=lambda m: None, eval_items=4, skill_items=2
    )
    assert info["parameters"]["teacher"] > 2 * info["parameters"]["student"]
    saved = json.loads((tmp_path / "testbed.json").read_text())
    assert saved["measured"] == info["measured"]
    assert saved["recipe"]["teacher_train"]["steps"] == DEFAULT_RECIPE.teacher_train.steps
    for role in ("teacher", "student"):
        assert (tmp_path / role / "model.safetensors").is_file()
        model = AutoModelForCausalLM.from_pretrained(tmp_path / role, use_safetensors=True)
        tok = AutoTokenizer.from_pretrained(tmp_path / role)
        assert model.config.vocab_size == len(tok) == 54
    measured = info["measured"]
    assert 0.0 <= measured["teacher"]["countdown3_accuracy"] <= 1.0
    assert set(measured["student"]["skills"]) == {
        "skill-add",
        "skill-sub",
        "skill-mul",
        "skill-sort",
        "skill-rev",
    }


def test_the_regime_recipe_adds_a_resumable_base_phase(tmp_path):
    """``--recipe regime``: the student's base phase runs after its pretraining, is recorded in
    its build.json, and is not run twice; ``--only student`` rebuilds and remeasures it alone
    into a built testbed, with the latent-capability numbers."""
    import pytest

    from distillscope.testbed.build import build_student
    from distillscope.testbed.recipe import RECIPES

    with pytest.raises(FileNotFoundError, match="build the whole testbed first"):
        build_student(tmp_path, RECIPES["regime"], 0.002, lambda m: None)
    info = build(tmp_path, RECIPES["regime"], 0.002, lambda m: None, eval_items=4, skill_items=2)
    record = json.loads((tmp_path / "student" / "build.json").read_text())
    assert record["base_steps"] == info["records"]["student"]["base_steps"] == 1
    weights = (tmp_path / "student" / "model.safetensors").read_bytes()
    measured = build_student(tmp_path, RECIPES["regime"], 0.002, lambda m: None, 4, 2)
    assert (tmp_path / "student" / "model.safetensors").read_bytes() == weights  # not rerun
    assert {"countdown3_pass@32", "alt_style_share_with_flag_t1", "countdown3_len_mean"} <= set(
        measured
    )
    saved = json.loads((tmp_path / "testbed.json").read_text())
    assert saved["measured"]["student"] == measured
    assert saved["recipe"]["student_base"]["steps"] == RECIPES["regime"].student_base.steps
