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
