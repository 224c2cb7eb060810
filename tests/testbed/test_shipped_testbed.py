"""The testbed shipped inside the package: vocabulary, shapes and the recorded capability gap."""

import json

import torch

from distillscope import testbed
from distillscope.models import resolve_model_path
from distillscope.models.load import load_pair
from distillscope.safeyaml import load_yaml
from distillscope.study.spec import PRESETS_DIR
from distillscope.testbed.tokenizer import ALPHABET, SPECIAL_TOKENS


def test_shipped_models_load_and_share_the_character_vocabulary():
    pair = load_pair(testbed.testbed_path("teacher"), testbed.testbed_path("student"))
    assert pair.vocab_size == len(ALPHABET) + len(SPECIAL_TOKENS) == 54
    assert pair.tokenizer.decode(pair.tokenizer("cd 3,5,7 to 56:")["input_ids"][1:]) == (
        "cd 3,5,7 to 56:"
    )
    ids = pair.tokenizer(["cd 1,2,3 to 6:"], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        s = pair.student(input_ids=ids).logits
        t = pair.teacher(input_ids=ids).logits
    assert s.shape == t.shape == (1, ids.shape[1], 54)
    n_t = sum(p.numel() for p in pair.teacher.parameters())
    n_s = sum(p.numel() for p in pair.student.parameters())
    assert n_t > 2 * n_s
    assert resolve_model_path("testbed:student") == testbed.testbed_path("student")


def test_recorded_capability_gap_meets_the_relative_spec():
    """The capability spec (docs/testbed.md): teacher ≥ 60% on held-out tb-countdown3, the
    untrained student ≤ 30%, the student's skill-suite mean ≥ 90%."""
    measured = testbed.testbed_info()["measured"]
    assert measured["teacher"]["countdown3_accuracy"] >= 0.60
    assert measured["student"]["countdown3_accuracy"] <= 0.30
    assert measured["student"]["skill_mean"] >= 0.90
    assert measured["teacher"]["alt_style_share_with_flag"] >= 0.95


def _preset_eval(name: str) -> dict:
    return load_yaml((PRESETS_DIR / f"{name}.yaml").read_text(), name)["base"]["eval"]


def test_recorded_harder_variant_is_the_presets_and_within_reach():
    """The harder variant within reach (docs/testbed.md): the teacher's pass@10 ≥ 50%, the
    untrained student's < 10%, and the variant is harder than tb-countdown3 for the teacher;
    measured on the task the testbed presets evaluate, at their harder temperature."""
    info = testbed.testbed_info()
    how, measured = info["eval"]["harder"], info["measured"]
    for preset in ("smoke", "quick", "paper"):
        assert _preset_eval(preset)["harder_task"] == how["task"] == "tb-countdown3-hard"
    for preset in ("quick", "paper"):
        e = _preset_eval(preset)
        assert e["harder_temperature"] == how["temperature"]
        assert (e["items"], e["coverage_items"], e["coverage_samples"]) == (
            how["items"],
            how["coverage_items"],
            how["samples"],
        )
    teacher, student = measured["teacher"], measured["student"]
    assert teacher["harder_pass@10"] >= 0.50
    assert student["harder_pass@10"] < 0.10
    assert teacher["harder_accuracy"] < teacher["countdown3_accuracy"]


def test_shipped_weights_were_built_by_the_recipe_in_the_code():
    """The shipped record names today's recipe, and each model's shape is the recipe's."""
    from dataclasses import asdict

    from distillscope.testbed.recipe import DEFAULT_RECIPE

    info = testbed.testbed_info()
    recipe = json.loads(json.dumps(asdict(DEFAULT_RECIPE)))
    # the shipped weights predate the base phase (RECIPES["regime"]): none in their recipe
    assert recipe.pop("student_base") is None
    assert info["recipe"] == recipe
    for role in ("teacher", "student"):
        spec = getattr(DEFAULT_RECIPE, role)
        cfg = json.loads((testbed.testbed_path(role) / "config.json").read_text())
        assert (cfg["hidden_size"], cfg["num_hidden_layers"]) == (
            spec.hidden_size,
            spec.num_hidden_layers,
        )
