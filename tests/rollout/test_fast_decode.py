"""The lean static-cache decoder computes what the model's own forward computes.

Held to the ``transformers`` decoder (``DynamicCache``) step by step on left-padded prompts,
with rows that stop attending their new tokens, for Llama (grouped-query attention, attention
bias, Llama-3 RoPE scaling), Qwen2 (q/k/v bias, untied head) and Mistral; and to the sampler's
draws with and without it. Configurations it does not reproduce are refused, not approximated.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from tests.numerics import logit_tol
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from distillscope.rollout import fast_decode
from distillscope.rollout.fast_decode import StaticDecoder, static_decoder, supports
from distillscope.rollout.policies import SpectrumPolicy, StudentPolicy, TeacherPolicy
from distillscope.rollout.rollouts import PromptBatch, SamplingSpec
from distillscope.rollout.sampler import _Decoder, sample_rollouts

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

V = 97
B, P, L = 5, 7, 9


def _shape(**extra) -> dict:
    return dict(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        **extra,
    )


def _model(cls, cfg_cls, seed=0, dtype=torch.float32, **extra):
    torch.manual_seed(seed)
    model = cls(cfg_cls(**_shape(**extra))).to(dtype).eval()
    with torch.no_grad():  # random biases and norm weights, so none of them is a no-op
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.normal_(0.0, 0.5 if "bias" in name else 1.0)
    return model


MODELS = {
    "llama-gqa-bias": lambda: _model(LlamaForCausalLM, LlamaConfig, attention_bias=True),
    # heads × head_dim (4 × 16) wider than the hidden size (32), as in Gemma-style configs
    "llama-wide-heads": lambda: _model(LlamaForCausalLM, LlamaConfig, seed=4, head_dim=16),
    "llama3-rope": lambda: _model(
        LlamaForCausalLM,
        LlamaConfig,
        seed=1,
        tie_word_embeddings=True,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8,
        },
    ),
    "qwen2": lambda: _model(Qwen2ForCausalLM, Qwen2Config, seed=2, tie_word_embeddings=False),
    "mistral": lambda: _model(MistralForCausalLM, MistralConfig, seed=3, sliding_window=None),
}


def _prompts(seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, V, (B, P), generator=g)
    mask = torch.ones(B, P, dtype=torch.long)
    for row, pads in enumerate((0, 3, 1, 6, 0)):  # left padding, one row with a 1-token prompt
        ids[row, :pads], mask[row, :pads] = 0, 0
    return ids, mask


@pytest.mark.parametrize(
    ("fused", "head_copy"),
    [(True, True), (False, False), (False, True)],
    ids=["fused-qkv", "own-projections", "own-projections-head-copy"],
)
@pytest.mark.parametrize("name", MODELS)
def test_logits_equal_the_models_own_forward_step_by_step(name, fused, head_copy, monkeypatch):
    model = MODELS[name]()
    if not fused:  # a model above the size that fuses its query/key/value projections
        monkeypatch.setattr(fast_decode, "FUSE_MAX_BYTES", 0)
    # long enough a rollout (or not) for the head to be multiplied as a transposed copy
    monkeypatch.setattr(fast_decode, "HEAD_COPY_TOKENS", L if head_copy else L + 1)
    ids, mask = _prompts()
    assert supports(model, P + L)
    with torch.inference_mode():
        ours = static_decoder(model, ids, mask, L)
        ref = _Decoder(model, ids, mask, True, L)
        assert isinstance(ours, StaticDecoder)
        assert all(len(layer.qkv) == (1 if fused else 3) for layer in ours.layers)
        assert ours.head.transposed == head_copy
        a, b = ours.start(), ref.start()
        tol = logit_tol(b, model.config)  # the same fp32 forward in other reduction orders
        torch.testing.assert_close(a, b, rtol=0, atol=tol)
        g = torch.Generator().manual_seed(1)
        for n in range(L):
            token = torch.randint(0, V, (B,), generator=g)
            keep = torch.ones(B, dtype=torch.long)
            keep[1] = int(n < 3)  # row 1 ended: its later tokens are not attended
            a, b = ours.append(token, keep), ref.append(token, keep)
            torch.testing.assert_close(a, b, rtol=0, atol=logit_tol(b, model.config))


@pytest.mark.parametrize("name", ["llama-gqa-bias", "qwen2"])
def test_repeated_prompts_are_prefilled_once_with_the_same_logits(name, monkeypatch):
    """n samples per item: a prompt shared by several rows is run once, then copied."""
    model = MODELS[name]()
    ids, mask = _prompts(2)
    order = torch.tensor([0, 3, 0, 1, 3, 3, 0, 2, 1])  # row 3 is the 1-token prompt
    ids, mask = ids[order], mask[order]
    rows_prefilled = []
    prefill = StaticDecoder._prefill

    def counting(self, ids_B_P, *args):
        rows_prefilled.append(ids_B_P.shape[0])
        return prefill(self, ids_B_P, *args)

    monkeypatch.setattr(StaticDecoder, "_prefill", counting)
    with torch.inference_mode():
        ours, ref = static_decoder(model, ids, mask, L), _Decoder(model, ids, mask, True, L)
        a, b = ours.start(), ref.start()  # the same fp32 forward in other reduction orders
        torch.testing.assert_close(a, b, rtol=0, atol=logit_tol(b, model.config))
        assert rows_prefilled == [4]  # four distinct prompts for nine rows
        g = torch.Generator().manual_seed(3)
        for _ in range(L):
            token = torch.randint(0, V, (len(order),), generator=g)  # rows diverge at once
            keep = torch.ones(len(order), dtype=torch.long)
            a, b = ours.append(token, keep), ref.append(token, keep)
            torch.testing.assert_close(a, b, rtol=0, atol=logit_tol(b, model.config))


def test_bf16_model_matches_its_forward_in_bf16():
    model = MODELS["qwen2"]().to(torch.bfloat16)
    ids, mask = _prompts(1)
    with torch.inference_mode():
        ours, ref = static_decoder(model, ids, mask, 2), _Decoder(model, ids, mask, True, 2)
        a, b = ours.start(), ref.start()
        assert a.dtype == b.dtype == torch.bfloat16
        # bf16 keeps 8 bits: each stored activation moves by up to u = 2^-9 of itself; two paths
        # differ by a few such roundings of logits of order 1 (5 u ≈ 1e-2, with headroom: 2e-2)
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2)


def _with_and_without(policy, ids, mask, max_new_tokens, stops, seed):
    """The sampler's rollouts with the lean decoders and through the models' own forward."""
    student, teacher = MODELS["llama-gqa-bias"](), MODELS["qwen2"]()
    return [
        sample_rollouts(
            policy,
            student,
            teacher,
            PromptBatch(ids, mask),
            SamplingSpec(max_new_tokens, stop_ids=stops, pad_id=0, fast_decode=fast),
            torch.Generator().manual_seed(seed),
        )
        for fast in (True, False)
    ]


def _assert_same_draws(a, b) -> None:
    assert torch.equal(a.completion_B_T, b.completion_B_T)
    assert torch.equal(a.completion_mask_B_T, b.completion_mask_B_T)
    for name in ("logp_behavior_B_T", "logp_student_B_T", "logp_teacher_B_T"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None)
        if x is not None:
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "policy", [StudentPolicy(), TeacherPolicy(temperature=0.7), SpectrumPolicy(lam=0.5)]
)
def test_sampler_draws_the_same_tokens_with_and_without_it(policy):
    ids, mask = _prompts(2)
    _assert_same_draws(*_with_and_without(policy, ids, mask, L, [5, 6], seed=4))


@pytest.mark.parametrize("policy", [StudentPolicy(), SpectrumPolicy(lam=-0.5)])
def test_ended_rows_leave_the_batch_without_changing_any_draw(policy, monkeypatch):
    """Rows that stopped are dropped from the decoders; live rows draw exactly as before."""
    ids, mask = _prompts(3)
    ids, mask = ids.repeat(4, 1), mask.repeat(4, 1)  # 20 rows, several stop ids: they end apart
    kept = []
    keep_rows = StaticDecoder.keep_rows

    def counting(self, rows):
        kept.append(len(rows))
        return keep_rows(self, rows)

    monkeypatch.setattr(StaticDecoder, "keep_rows", counting)
    fast, plain = _with_and_without(policy, ids, mask, 12, list(range(5, 40)), seed=5)
    assert kept and min(kept) < len(ids)  # the lean decoders did drop ended rows
    assert int(fast.lengths_B.min()) < int(fast.lengths_B.max())
    _assert_same_draws(fast, plain)


def test_configurations_it_does_not_reproduce_are_refused():
    assert not supports(_model(LlamaForCausalLM, LlamaConfig, hidden_act="gelu"), 16)
    assert not supports(_model(LlamaForCausalLM, LlamaConfig, mlp_bias=True), 16)
    windowed = _model(MistralForCausalLM, MistralConfig, sliding_window=8)
    assert supports(windowed, 8) and not supports(windowed, 9)  # the window is out of reach
    sliding = _model(
        Qwen2ForCausalLM,
        Qwen2Config,
        use_sliding_window=True,
        sliding_window=4,
        max_window_layers=0,
    )
    assert not supports(sliding, 16)
    if hasattr(transformers, "Qwen3ForCausalLM"):  # per-head q/k norms: another layer
        qwen3 = _model(transformers.Qwen3ForCausalLM, transformers.Qwen3Config, head_dim=8)
        assert not supports(qwen3, 16)
    hooked = _model(LlamaForCausalLM, LlamaConfig)
    hooked.model.layers[0].mlp._hf_hook = object()  # as accelerate's device-map dispatch leaves
    assert not supports(hooked, 16)
    ids, mask = _prompts()
    gelu = _model(LlamaForCausalLM, LlamaConfig, hidden_act="gelu")
    assert static_decoder(gelu, ids, mask, L) is None
    # ... and the sampler decodes it with the model's own forward, same draws as without cache
    runs = [
        sample_rollouts(
            StudentPolicy(),
            gelu,
            None,
            PromptBatch(ids, mask),
            SamplingSpec(4, stop_ids=5, pad_id=0, use_cache=cache),
            torch.Generator().manual_seed(0),
        )
        for cache in (True, False)
    ]
    assert torch.equal(runs[0].completion_B_T, runs[1].completion_B_T)


def test_grouped_query_attention_without_sdpa_sharing_matches(monkeypatch):
    """torch < 2.5 has no ``enable_gqa``: the key/value heads are repeated instead."""
    model = MODELS["llama-gqa-bias"]()
    ids, mask = _prompts(3)
    with torch.inference_mode():
        shared = static_decoder(model, ids, mask, 1).start()
        monkeypatch.setattr(fast_decode, "_SDPA_GQA", False)
        repeated = static_decoder(model, ids, mask, 1).start()
    # the same fp32 forward through two attention kernels
    torch.testing.assert_close(shared, repeated, rtol=0, atol=logit_tol(repeated, model.config))
