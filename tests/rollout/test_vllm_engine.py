"""vLLM rollouts (``rollout.engine: vllm``) on the real engine, on CPU, with the testbed models.

The engine tests (marked ``vllm``) need vLLM, which lives in its own virtual environment
(``make test-vllm`` builds ``.venv-vllm`` and runs them there); without it they are skipped
with that reason. References: the testbed student's own forward (log_softmax at the sampling
temperature, computed here), and hand-computed numbers for the importance weight.
"""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch
from tests.conftest import TEST_THREADS
from tests.numerics import forward_logprob_tol
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from distillscope.config import ConfigError, load_run_config
from distillscope.models.locate import resolve_model_path
from distillscope.objectives.divergences import token_weights, truncated_is_weight
from distillscope.rollout.policies import StudentPolicy, TeacherPolicy
from distillscope.rollout.rollouts import PromptBatch, Rollouts, SamplingSpec
from distillscope.rollout.sampler import forward_completion_logprobs
from distillscope.rollout.vllm_engine import (
    MISSING_EXTRA,
    VLLMEngine,
    engine_metrics,
    engine_options,
)
from distillscope.train.step import loss_mask

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

HAS_VLLM = importlib.util.find_spec("vllm") is not None
_skip = pytest.mark.skipif(not HAS_VLLM, reason="vllm not installed: `make test-vllm` runs these")


def needs_vllm(test):
    """Marks ``test`` ``vllm`` and ``slow``, skipped with the reason when vLLM is missing."""
    return pytest.mark.vllm(pytest.mark.slow(_skip(test)))


PAD, EOS, MAX_NEW = 0, 2, 12


def _prompts() -> PromptBatch:
    """Six left-padded prompts of the testbed vocabulary (BOS = 1), widths 3 to 6."""
    g = torch.Generator().manual_seed(5)
    ids_B_P = torch.randint(3, 54, (6, 6), generator=g)
    mask_B_P = torch.ones_like(ids_B_P)
    for b, pad in enumerate([0, 1, 2, 3, 0, 2]):
        ids_B_P[b, :pad], mask_B_P[b, :pad] = PAD, 0
        ids_B_P[b, pad] = 1
    return PromptBatch(ids_B_P, mask_B_P)


def _llama(hidden_size: int, max_position_embeddings: int) -> LlamaForCausalLM:
    """A random one-layer Llama with a 64-row tied head, two heads of ``hidden_size / 2``."""
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config)


def _student():
    return AutoModelForCausalLM.from_pretrained(resolve_model_path("testbed:student"))


@pytest.fixture(scope="module")
def engine():
    # vLLM's parallel state is process-wide: an engine that is collected while another lives
    # tears it down for both, so the tests that start their own engine come after this one's.
    yield VLLMEngine(_student())


def _sample(engine: VLLMEngine, seed: int, temperature: float = 1.0) -> Rollouts:
    spec = SamplingSpec(max_new_tokens=MAX_NEW, stop_ids=EOS, pad_id=PAD)
    policy = StudentPolicy(temperature=temperature)
    return engine.sample(policy, _prompts(), spec, torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@needs_vllm
def test_engine_logprobs_match_the_models_forward(engine, temperature):
    r = _sample(engine, seed=0, temperature=temperature)
    model = engine.model
    prompts = _prompts()
    for b in range(r.batch_size):
        n = int(r.lengths_B[b])
        completion = r.completion_B_T[b, :n]
        # layout: EOS only as the last real token, pads after, truncated iff no EOS
        assert (completion[:-1] != EOS).all()
        assert bool(r.truncated_B[b]) == (int(completion[-1]) != EOS)
        assert bool(r.truncated_B[b]) == (n == MAX_NEW)
        assert (r.completion_B_T[b, n:] == PAD).all() and (r.completion_mask_B_T[b, n:] == 0).all()
        # reference: an unpadded forward of this row alone
        row = torch.cat([prompts.ids_B_P[b][prompts.mask_B_P[b].bool()], completion])
        with torch.no_grad():
            logits = model(row[None]).logits[0, -n - 1 : -1]
        ref = torch.log_softmax(logits / temperature, dim=-1).gather(-1, completion[:, None])[:, 0]
        # the same fp32 forward in other reduction orders (a padded batch; vLLM's own kernels,
        # each off the exact value by up to tol: 2·tol between them)
        tol = forward_logprob_tol(logits, temperature, model.config)
        torch.testing.assert_close(r.logp_engine_B_T[b, :n], ref, atol=2 * tol, rtol=0)
        torch.testing.assert_close(r.logp_student_B_T[b, :n], ref, atol=tol, rtol=0)
        assert (r.logp_engine_B_T[b, n:] == 0).all()
    assert r.logp_behavior_B_T is r.logp_student_B_T and r.source == "student"
    assert engine_metrics(r)["rollout/engine_logprob_gap"] < 2 * tol  # a mean of such gaps
    assert torch.get_num_threads() == TEST_THREADS  # the session's setting survives the engine


@needs_vllm
def test_same_generator_same_rollouts_other_generator_others(engine):
    a, b, c = _sample(engine, seed=3), _sample(engine, seed=3), _sample(engine, seed=4)
    assert torch.equal(a.completion_B_T, b.completion_B_T)
    assert not torch.equal(a.completion_B_T, c.completion_B_T)


@needs_vllm
def test_a_weight_push_changes_the_samples_and_pushing_back_restores_them(engine):
    before = _sample(engine, seed=1)
    trained = engine.model
    original = {k: v.clone() for k, v in trained.state_dict().items()}
    torch.manual_seed(0)
    try:
        with torch.no_grad():
            for p in trained.parameters():
                p.add_(0.3 * torch.randn_like(p))
        perturbed = _sample(engine, seed=1)  # sample() pushes the student's current weights
        assert not torch.equal(before.completion_B_T, perturbed.completion_B_T)
        assert engine_metrics(perturbed)["rollout/engine_logprob_gap"] < 1e-4  # the push landed
    finally:
        trained.load_state_dict(original)
    assert torch.equal(before.completion_B_T, _sample(engine, seed=1).completion_B_T)


@needs_vllm
def test_padded_embedding_rows_are_never_drawn_and_scores_are_over_the_tokenizer():
    # a head of 64 rows for a tokenizer of 54 (as Qwen pads 151,665 to 151,936), the padding
    # rows made dominant: drawn they would be; head_dim 32 (vLLM's CPU attention needs ≥ 32)
    torch.manual_seed(0)
    model = _llama(hidden_size=64, max_position_embeddings=128)
    with torch.no_grad():
        model.lm_head.weight[54:] *= 30
    spec = SamplingSpec(max_new_tokens=MAX_NEW, stop_ids=EOS, pad_id=PAD, vocab_size=54)
    prompts = _prompts()
    r = VLLMEngine(model).sample(
        StudentPolicy(1.0), prompts, spec, torch.Generator().manual_seed(0)
    )
    assert int(r.completion_B_T.max()) < 54
    b, n = 0, int(r.lengths_B[0])
    row = torch.cat([prompts.ids_B_P[b][prompts.mask_B_P[b].bool()], r.completion_B_T[b, :n]])
    with torch.no_grad():
        logits = model(row[None]).logits[0, -n - 1 : -1, :54]
    ref = torch.log_softmax(logits, dim=-1).gather(-1, r.completion_B_T[b, :n, None])[:, 0]
    tol = forward_logprob_tol(logits, 1.0, model.config)  # as in the test above
    torch.testing.assert_close(r.logp_student_B_T[b, :n], ref, atol=tol, rtol=0)
    assert engine_metrics(r)["rollout/engine_logprob_gap"] < 2 * tol


@needs_vllm
def test_a_teachers_engine_samples_the_teacher_policy():
    teacher = AutoModelForCausalLM.from_pretrained(resolve_model_path("testbed:teacher"))
    spec = SamplingSpec(max_new_tokens=MAX_NEW, stop_ids=EOS, pad_id=PAD)
    r = VLLMEngine(teacher).sample(
        TeacherPolicy(temperature=0.5), _prompts(), spec, torch.Generator().manual_seed(0)
    )
    assert r.source == "teacher" and r.logp_student_B_T is None
    assert (r.source_B == 0).all()
    assert engine_metrics(r)["rollout/engine_logprob_gap"] < 1e-4


@needs_vllm
def test_a_lora_students_engine_samples_its_merged_weights():
    pytest.importorskip("peft")
    from distillscope.config import LoraConfig
    from distillscope.train.lora import attach_lora, plain_weights

    torch.manual_seed(0)
    cfg = LoraConfig(r=4, alpha=8, target_modules=["q_proj", "v_proj", "down_proj"])
    student = attach_lora(_student(), cfg)
    base = _student()  # the same weights without adapters: what an engine of the base samples
    adapters = [p for name, p in student.named_parameters() if ".lora_B." in name]
    engine = VLLMEngine(student, weights=plain_weights)
    for scale in (0.5, 1.0):  # two different adapters: sample() pushes the merged weights
        with torch.no_grad():
            for p in adapters:
                p.copy_(scale * torch.randn_like(p))
        r = _sample(engine, seed=2)
        assert engine_metrics(r)["rollout/engine_logprob_gap"] < 1e-4  # the adapted student's
        # and the adapters matter: the base model scores the same tokens far from the engine
        base_logp = forward_completion_logprobs(base, r, "student", 1.0, 54)
        keep = r.completion_mask_B_T.bool()
        assert (base_logp - r.logp_engine_B_T)[keep].abs().mean() > 0.1


@needs_vllm
def test_a_two_step_lora_run_samples_the_updated_adapters(tmp_path):
    pytest.importorskip("peft")
    from distillscope.store import read_metrics
    from distillscope.train.loop import distill

    items = ["optim.steps=2", "rollout.prompts_per_step=4", "task.max_new_tokens=12"]
    items += ["rollout.engine=vllm", "model.lora={r: 4, alpha: 8}", "optim.lr=0.05"]
    distill(load_run_config(None, items), tmp_path / "run")
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [0, 1]
    for row in rows:  # step 1 samples the adapters step 0 trained (lr 0.05 moves them far)
        assert 0 <= row["rollout/engine_logprob_gap"] < 1e-4
    assert (tmp_path / "run" / "student" / "model.safetensors").exists()


@needs_vllm
def test_two_step_onpd_run_with_vllm_rollouts_logs_the_gap(tmp_path):
    from distillscope.store import read_metrics
    from distillscope.train.loop import distill

    items = [
        "optim.steps=2",
        "rollout.prompts_per_step=4",
        "task.max_new_tokens=12",
        "rollout.engine=vllm",
        "rollout.engine_is_correction=true",
    ]
    runs = []
    for name in ("a", "b"):
        distill(load_run_config(None, items), tmp_path / name)
        rows = read_metrics(tmp_path / name)
        runs.append(
            [{k: v for k, v in r.items() if not k.startswith(("time/", "perf/"))} for r in rows]
        )
    assert [r["step"] for r in runs[0]] == [0, 1]
    for row in runs[0]:  # the second step samples the once-updated student: the push is checked
        assert 0 <= row["rollout/engine_logprob_gap"] < 1e-4
        assert math.isfinite(row["train/loss"]) and row["train/grad_norm"] > 0
    assert runs[0] == runs[1]  # seeded per (seed, step): a second engine samples the same run


# --- without vLLM: configuration, the importance weight, the missing extra ------------------


def test_on_cuda_the_engine_takes_its_share_of_the_gpu_and_on_cpu_none(monkeypatch):
    torch.manual_seed(0)
    model = _llama(hidden_size=32, max_position_embeddings=96)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cpu = engine_options(model, None, 0.3)
    assert "gpu_memory_utilization" not in cpu  # the CPU KV cache is VLLM_CPU_KVCACHE_SPACE's
    assert cpu["max_model_len"] == 96 and cpu["dtype"] == "float32"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cfg = load_run_config(None, ["rollout.engine=vllm", "rollout.engine_gpu_memory=0.4"])
    cuda = engine_options(model, 64, cfg.rollout.engine_gpu_memory)
    assert cuda == {**cpu, "max_model_len": 64, "gpu_memory_utilization": 0.4}
    assert load_run_config(None, ["rollout.engine=vllm"]).rollout.engine_gpu_memory == 0.3


@pytest.mark.parametrize(
    "items,message",
    [
        (["rollout.engine=vllm", "rollout.policy=mix"], "rollout.policy=mix needs rollout.engine"),
        (["rollout.engine_gpu_memory=0.5"], "rollout.engine_gpu_memory=0.5 is ignored"),
        (["rollout.engine=vllm", "rollout.engine_gpu_memory=1.0"], "engine_gpu_memory"),
        (["rollout.engine=vllm", "rollout.top_p=0.9"], "rollout.top_p < 1 needs"),
        (["rollout.engine_is_correction=true"], "rollout.engine_is_correction=True is ignored"),
        (["rollout.engine=vllm", "rollout.engine_is_cap=3.0"], "rollout.engine_is_cap=3.0 is"),
    ],
)
def test_config_refuses_what_the_engine_cannot_do(items, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config(None, items)


def test_float_mask_weights_each_tokens_share():
    mask_B_T = torch.tensor([[1, 1, 0], [1, 0, 0]])
    c_B_T = torch.tensor([[2.0, 0.5, 9.0], [1.5, 9.0, 9.0]])
    weighted_B_T = mask_B_T * c_B_T
    # by hand: seq_mean 1/(n_b · 2 rows); token_mean 1/3 tokens; sum 1
    expected = {
        "seq_mean": [[2.0 / 4, 0.5 / 4, 0.0], [1.5 / 2, 0.0, 0.0]],
        "token_mean": [[2.0 / 3, 0.5 / 3, 0.0], [1.5 / 3, 0.0, 0.0]],
        "sum": [[2.0, 0.5, 0.0], [1.5, 0.0, 0.0]],
    }
    for reduction, want in expected.items():
        got = token_weights(weighted_B_T, reduction)
        torch.testing.assert_close(got, torch.tensor(want), rtol=0, atol=1e-7)
        unweighted = token_weights(mask_B_T.float(), reduction)
        assert torch.equal(unweighted, token_weights(mask_B_T, reduction))


def test_weighted_forward_kl_and_its_gradient_on_both_paths():
    """The loss of a weighted mask is Σ c_bt w_bt KL_bt (seq_mean), plain and fused alike."""
    from distillscope.objectives.divergences import divergence_loss
    from distillscope.objectives.fused import fused_divergence

    g = torch.Generator().manual_seed(0)
    h_s = torch.randn(2, 3, 8, generator=g, dtype=torch.float64, requires_grad=True)
    h_t = torch.randn(2, 3, 8, generator=g, dtype=torch.float64)
    w_s, w_t = (torch.randn(11, 8, generator=g, dtype=torch.float64) for _ in range(2))
    mask_B_T = torch.tensor([[1, 1, 0], [1, 1, 1]])
    c_B_T = torch.tensor([[0.5, 2.0, 7.0], [1.0, 0.1, 1.5]], dtype=torch.float64)
    logp_s, logp_t = torch.log_softmax(h_s @ w_s.T, -1), torch.log_softmax(h_t @ w_t.T, -1)
    kl_B_T = (logp_t.exp() * (logp_t - logp_s)).sum(-1)
    want = (kl_B_T[0, :2] * c_B_T[0, :2]).sum() / 2 / 2 + (kl_B_T[1] * c_B_T[1]).sum() / 3 / 2
    (grad_want,) = torch.autograd.grad(want, h_s)
    weighted_B_T = mask_B_T * c_B_T
    plain, _ = divergence_loss(h_s @ w_s.T, h_t @ w_t.T, weighted_B_T)
    fused, _, _ = fused_divergence(h_s, w_s, h_t, w_t, weighted_B_T)
    for loss in (plain, fused):
        torch.testing.assert_close(loss, want)
        torch.testing.assert_close(torch.autograd.grad(loss, h_s)[0], grad_want)


def test_loss_mask_is_the_truncated_importance_weight_on_engine_rollouts():
    logp_train_B_T = torch.tensor([[-1.0, -2.0, 0.0]])
    logp_engine_B_T = torch.tensor([[-1.5, -0.5, 0.0]])
    mask_B_T = torch.tensor([[1, 1, 0]])
    r = Rollouts(
        prompt_ids_B_P=torch.ones(1, 1, dtype=torch.long),
        prompt_mask_B_P=torch.ones(1, 1, dtype=torch.long),
        teacher_prompt_ids_B_Q=torch.ones(1, 1, dtype=torch.long),
        teacher_prompt_mask_B_Q=torch.ones(1, 1, dtype=torch.long),
        completion_B_T=torch.tensor([[5, 2, 0]]),
        completion_mask_B_T=mask_B_T,
        logp_student_B_T=logp_train_B_T,
        logp_teacher_B_T=None,
        logp_behavior_B_T=logp_train_B_T,
        lengths_B=torch.tensor([2]),
        truncated_B=torch.tensor([False]),
        source="student",
        source_B=torch.ones(1, dtype=torch.int8),
        logp_engine_B_T=logp_engine_B_T,
    )
    # min(e^{0.5}, 1.2) = 1.2 and min(e^{-1.5}, 1.2) = 0.2231; masked position 0
    torch.testing.assert_close(
        loss_mask(r, 1.2), torch.tensor([[1.2, math.exp(-1.5), 0.0]]), rtol=0, atol=1e-6
    )
    assert loss_mask(r, None) is mask_B_T
    assert engine_metrics(r) == pytest.approx({"rollout/engine_logprob_gap": 1.0})  # (0.5+1.5)/2
    with pytest.raises(ValueError, match="cap must be > 0"):
        truncated_is_weight(logp_train_B_T, logp_engine_B_T, 0.0)


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed: the missing-extra error cannot occur")
def test_without_vllm_the_engine_names_the_extra():
    with pytest.raises(ImportError) as err:
        VLLMEngine(_student())
    assert str(err.value) == MISSING_EXTRA and "distillscope[vllm]" in MISSING_EXTRA
