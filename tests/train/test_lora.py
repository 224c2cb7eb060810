"""LoRA students (``model.lora``): only the adapters train, the export is the merged model, and
evaluation (sparsity) reads the merged weights; runs are deterministic and resume exactly."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from safetensors.torch import load_file
from tests.numerics import chain_tols, logit_tol
from tests.train.test_distill import strip_timings, tiny_cfg
from transformers import AutoModelForCausalLM

from distillscope.config import LORA_MISSING, ConfigError, load_run_config
from distillscope.models.load import load_model
from distillscope.store import checkpoint_dir, read_metrics
from distillscope.study.run_one import evaluate_run
from distillscope.train.loop import distill
from distillscope.train.lora import LoraSetupError, attach_lora, merged_student, plain_weights
from distillscope.train.run_checks import preflight

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

pytest.importorskip("peft")

LORA = {"model.lora": "{r: 4, alpha: 8, target_modules: [q_proj, v_proj, down_proj]}"}
TARGETS = ("q_proj", "v_proj", "down_proj")


def lora_cfg(tiny_pair, **over):
    return tiny_cfg(tiny_pair, **{**LORA, "optim.steps": 2, **over})


@pytest.fixture(scope="module")
def lora_run(tiny_pair, tmp_path_factory):
    """A finished 2-step LoRA run: (config, run directory, the returned student)."""
    cfg = lora_cfg(tiny_pair)
    run = tmp_path_factory.mktemp("lora-run")
    return cfg, run, distill(cfg, run)


def base_name(key: str) -> str:
    """A checkpoint key of the adapted student → the plain model's key of the same weight."""
    return key.replace(".base_layer.", ".")


def test_only_the_adapters_train_and_the_base_stays_frozen(tiny_pair, lora_run):
    cfg, run, _ = lora_run
    initial = load_model(tiny_pair[1])[0].state_dict()
    trained = load_file(checkpoint_dir(run) / "model.safetensors")
    adapters = {k for k in trained if ".lora_" in k}
    # one A and one B per adapted layer (one decoder layer), nothing else is an adapter
    assert len(adapters) == 2 * len(TARGETS)
    for key, value in trained.items():
        if key not in adapters:  # every base weight bit for bit as loaded
            assert torch.equal(value, initial[base_name(key)]), key
    for key in adapters:  # B starts at zero: every B moved, so the adapters trained
        if ".lora_B." in key:
            assert trained[key].abs().max() > 0, key
    # the optimizer holds the adapters only, and state (AdamW's moments) for each of them
    meta = json.loads((checkpoint_dir(run) / "meta.json").read_text())["optimizer"]
    assert len(meta["param_groups"][0]["params"]) == len(meta["state"]) == len(adapters)


def test_the_export_is_the_merged_model_with_the_peft_models_logits(tiny_pair, lora_run):
    cfg, run, student = lora_run
    exported = AutoModelForCausalLM.from_pretrained(run / "student")  # no peft involved
    assert not [k for k in exported.state_dict() if "lora" in k or "base_layer" in k]
    assert not (run / "student" / "adapter_config.json").exists()  # a full model, no adapter
    # the adapted (peft) student rebuilt from the checkpoint, adapters unmerged
    torch.manual_seed(0)
    adapted = attach_lora(load_model(tiny_pair[1])[0], cfg.model.lora)
    adapted.load_state_dict(load_file(checkpoint_dir(run) / "model.safetensors"))
    ids_B_T = torch.randint(3, exported.config.vocab_size, (3, 9), generator=torch.Generator())
    with torch.no_grad():
        want = adapted.eval()(ids_B_T).logits
        tol = logit_tol(want, exported.config)  # merged W x vs W x + B (A x): other sums
        assert torch.allclose(exported(ids_B_T).logits, want, atol=tol, rtol=0)
        assert torch.allclose(student(ids_B_T).logits, want, atol=tol, rtol=0)
    # and each merged weight is W + (alpha / r)·B·A of the checkpoint's tensors
    ckpt = load_file(checkpoint_dir(run) / "model.safetensors")
    for name in ("model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj"):
        a, b = ckpt[f"{name}.lora_A.default.weight"], ckpt[f"{name}.lora_B.default.weight"]
        want_W = ckpt[f"{name}.base_layer.weight"] + (8 / 4) * b @ a
        got_W = exported.get_submodule(name).weight
        assert torch.allclose(got_W, want_W, **chain_tols(want_W, a.shape[0]))  # rank-r sums


def test_sparsity_is_computed_on_the_merged_weights(tiny_pair, lora_run):
    cfg, run, student = lora_run
    initial = load_model(tiny_pair[1])[0]
    params = {id(p): p for p in initial.parameters()}  # tied weights once
    total = sum(p.numel() for p in params.values())
    adapted = sum(
        m.weight.numel() for n, m in initial.named_modules() if n.rsplit(".", 1)[-1] in TARGETS
    )
    # rank-4 updates B·A change a dense matrix in (almost) every entry; nothing else moves
    merged = AutoModelForCausalLM.from_pretrained(run / "student").state_dict()
    moved = sum(int((merged[k] != v).sum()) for k, v in initial.state_dict().items())
    assert 0.99 * adapted <= moved <= adapted
    given = evaluate_run(cfg, run, student)  # the returned (merged) student
    read = evaluate_run(cfg, run)  # no student: the evaluation reads RUN/student/
    for metrics in (given, read):
        unmoved = metrics["eval/sparsity_fp32_tau1e-06"] * total
        assert total - adapted <= unmoved <= total - 0.99 * adapted
    assert read["eval/sparsity_fp32_tau1e-06"] == given["eval/sparsity_fp32_tau1e-06"]
    assert read["eval/sparsity_bf16_tau1e-06"] == given["eval/sparsity_bf16_tau1e-06"]


def test_same_seed_same_metrics_and_a_killed_run_resumes_to_them(tiny_pair, tmp_path):
    cfg = lora_cfg(tiny_pair, **{"optim.steps": 4})
    distill(cfg, tmp_path / "a")
    distill(cfg, tmp_path / "b")
    a = strip_timings(read_metrics(tmp_path / "a"))
    assert a == strip_timings(read_metrics(tmp_path / "b"))

    def killed_at_step_2(step, row):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        distill(cfg, tmp_path / "c", on_step=killed_at_step_2)
    assert len(read_metrics(tmp_path / "c")) == 3
    distill(cfg, tmp_path / "c")
    assert strip_timings(read_metrics(tmp_path / "c")) == a
    exported = [AutoModelForCausalLM.from_pretrained(tmp_path / r / "student") for r in "ac"]
    want, got = (m.state_dict() for m in exported)
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)


def test_gradient_checkpointing_and_opd_updates_compose_with_lora(tiny_pair, tmp_path):
    plain = lora_cfg(tiny_pair)
    distill(plain, tmp_path / "a")
    distill(lora_cfg(tiny_pair, **{"model.gradient_checkpointing": "true"}), tmp_path / "b")
    a, b = strip_timings(read_metrics(tmp_path / "a")), strip_timings(read_metrics(tmp_path / "b"))
    for ra, rb in zip(a, b, strict=True):
        assert rb == pytest.approx(ra, rel=1e-4, abs=1e-6)
    opd = {"objective.kind": "opd", "objective.updates_per_batch": 2}
    distill(lora_cfg(tiny_pair, **opd), tmp_path / "c")
    assert [r["step"] for r in read_metrics(tmp_path / "c")] == [0, 1]


def test_a_bad_target_module_is_one_line_naming_the_field_and_the_modules(tiny_pair, tmp_path):
    cfg = lora_cfg(tiny_pair, **{"model.lora": "{target_modules: [q_proj, qkv_proj]}"})
    with pytest.raises(LoraSetupError) as err:
        distill(cfg, tmp_path)
    message = str(err.value)
    assert "\n" not in message and message.startswith("model.lora.target_modules: 'qkv_proj'")
    for present in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "lm_head"):
        assert present in message


def test_a_tied_embedding_is_refused(tiny_pair, tmp_path):
    cfg = lora_cfg(tiny_pair, **{"model.lora": "{target_modules: [lm_head]}"})
    with pytest.raises(LoraSetupError, match="'lm_head' shares its weight"):
        distill(cfg, tmp_path)


def test_without_peft_a_lora_run_fails_naming_the_extra(tiny_pair, monkeypatch):
    cfg = lora_cfg(tiny_pair)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "peft" else real(n))
    with pytest.raises(ConfigError) as err:
        preflight(cfg)
    assert str(err.value) == LORA_MISSING and "pip install 'distillscope[lora]'" in LORA_MISSING
    monkeypatch.setitem(__import__("sys").modules, "peft", None)  # import peft → ImportError
    with pytest.raises(LoraSetupError, match=r"distillscope\[lora\]"):
        attach_lora(load_model(tiny_pair[1])[0], cfg.model.lora)


def test_full_fine_tuning_stays_the_default():
    assert load_run_config(None).model.lora is None


def test_plain_weights_are_the_merged_models_and_leave_the_student_as_it_is(tiny_pair):
    """What a vLLM engine holds for a LoRA student (``rollout.engine: vllm``): the merged
    model's weights under its names, computed without merging the student being trained."""
    torch.manual_seed(0)
    cfg = lora_cfg(tiny_pair)
    student = attach_lora(load_model(tiny_pair[1])[0], cfg.model.lora)
    with torch.no_grad():  # B ≠ 0, so every adapted weight differs from its base
        for name, p in student.named_parameters():
            if ".lora_B." in name:
                p.copy_(torch.randn_like(p))
    before = {k: v.clone() for k, v in student.state_dict().items()}
    weights = dict(plain_weights(student))
    assert {k: torch.equal(v, before[k]) for k, v in student.state_dict().items()} == {
        k: True for k in before
    }  # nothing merged in place: training goes on
    merged = merged_student(cfg.model, student).state_dict()  # the independent reference
    assert list(weights) == list(merged)
    for name, value in merged.items():
        rank = cfg.model.lora.r  # W + (α/r)·B·A: sums of r terms
        assert torch.allclose(weights[name], value, **chain_tols(value, rank)), name
    moved = [k for k in merged if not torch.equal(weights[k], before.get(k, weights[k]))]
    assert moved == []  # every unadapted weight is the student's own tensor value
    plain = load_model(tiny_pair[1])[0]
    assert [n for n, _ in plain_weights(plain)] == list(plain.state_dict())


def test_vllm_rollouts_take_a_lora_student():
    cfg = load_run_config(None, ["rollout.engine=vllm", "model.lora={r: 4}"])
    assert cfg.rollout.engine == "vllm" and cfg.model.lora.r == 4
