"""The lean scoring forward (``sequence_hidden``) computes the model's own forward and gradient.

Held to ``model.model(...)`` on left-padded prompts ⧺ right-padded completions for Llama
(grouped-query attention, attention bias, Llama-3 RoPE), Qwen2 (q/k/v bias) and Mistral: the
final hidden states at every real position the loss reads, and the parameters' gradients of a
loss on them; the training step's scores take it exactly when ``scores_exactly`` allows.
"""

from __future__ import annotations

import pytest
import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from distillscope.rollout import fast_decode
from distillscope.rollout.fast_score import scores_exactly, sequence_hidden
from distillscope.rollout.rollouts import position_ids
from distillscope.train.setup import checkpointing_enable

V, B, P, T = 61, 5, 6, 7


def _model(cls, cfg_cls, seed, **extra):
    torch.manual_seed(seed)
    cfg = cfg_cls(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        **extra,
    )
    model = cls(cfg).to(torch.float64)
    with torch.no_grad():  # random biases and norm weights, so none of them is a no-op
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.normal_(0.0, 0.5 if "bias" in name else 1.0)
    return model


MODELS = {
    "llama-gqa-bias": lambda: _model(LlamaForCausalLM, LlamaConfig, 0, attention_bias=True),
    "llama3-rope": lambda: _model(
        LlamaForCausalLM,
        LlamaConfig,
        1,
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
    "qwen2": lambda: _model(Qwen2ForCausalLM, Qwen2Config, 2, tie_word_embeddings=False),
    "mistral": lambda: _model(MistralForCausalLM, MistralConfig, 3, sliding_window=None),
}


def _sequence(seed=0):
    """Left-padded prompts ⧺ right-padded completions (one 1-token prompt, one 1-token answer)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, V, (B, P + T), generator=g)
    mask = torch.ones(B, P + T, dtype=torch.long)
    for row, (pads, length) in enumerate(((0, 7), (3, 2), (5, 5), (1, 1), (0, 4))):
        ids[row, :pads], mask[row, :pads] = 0, 0
        ids[row, P + length :], mask[row, P + length :] = 0, 0
    return ids, mask, position_ids(mask)


def _needed(mask):
    """Columns P − 1 … P + T − 2 where the next token is real (what the loss reads)."""
    return mask[:, P:].bool()  # column P − 1 + t predicts completion token t


@pytest.mark.parametrize("name", MODELS)
def test_hidden_states_equal_the_models_own_forward(name):
    model = MODELS[name]().eval()
    ids, mask, pos = _sequence()
    assert scores_exactly(model, P + T)
    with torch.no_grad():
        ref = model.model(input_ids=ids, attention_mask=mask, position_ids=pos).last_hidden_state
        ours = sequence_hidden(model, ids, mask, pos, P - 1)
    assert ours.shape == (B, T + 1, 32)
    need = _needed(mask)
    torch.testing.assert_close(ours[:, :T][need], ref[:, P - 1 : P - 1 + T][need])
    real_tail = mask[:, P - 1 :].bool()
    assert torch.all(ours[~real_tail] == 0)  # padding positions are never computed


@pytest.mark.parametrize("name", ["llama-gqa-bias", "qwen2"])
def test_gradients_equal_the_models_own(name):
    losses = []
    for lean in (True, False):
        model = MODELS[name]().train()
        ids, mask, pos = _sequence(1)
        need = _needed(mask)
        if lean:
            hidden = sequence_hidden(model, ids, mask, pos, P - 1)[:, :T]
        else:
            out = model.model(input_ids=ids, attention_mask=mask, position_ids=pos)
            hidden = out.last_hidden_state[:, P - 1 : P - 1 + T]
        weights = torch.linspace(-1.0, 2.0, hidden.shape[-1], dtype=hidden.dtype)
        (hidden[need] * weights).tanh().sum().backward()
        losses.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    lean, own = losses
    assert lean.keys() == own.keys()
    for n in own:
        torch.testing.assert_close(lean[n], own[n], msg=n)


def test_it_is_refused_where_the_forward_differs():
    model = MODELS["llama-gqa-bias"]()
    assert scores_exactly(model.train(), P + T)
    dropout = _model(LlamaForCausalLM, LlamaConfig, 4, attention_dropout=0.1)
    assert scores_exactly(dropout.eval(), P + T) and not scores_exactly(dropout.train(), P + T)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not scores_exactly(model, P + T)  # mixed precision: the model's own forward
    checkpointing_enable(model)
    assert not scores_exactly(model, P + T)
    gelu = _model(LlamaForCausalLM, LlamaConfig, 5, hidden_act="gelu")
    assert not scores_exactly(gelu, P + T)


def test_the_training_scores_take_it(monkeypatch):
    """``completion_hidden``/``completion_logits`` use it for these models, same values."""
    from distillscope.rollout.rollouts import Rollouts
    from distillscope.rollout.scoring import completion_hidden, completion_logits

    model = MODELS["qwen2"]().eval()
    ids, mask, _ = _sequence(2)
    r = Rollouts(
        prompt_ids_B_P=ids[:, :P],
        prompt_mask_B_P=mask[:, :P],
        teacher_prompt_ids_B_Q=ids[:, :P],
        teacher_prompt_mask_B_Q=mask[:, :P],
        completion_B_T=ids[:, P:],
        completion_mask_B_T=mask[:, P:],
        logp_student_B_T=None,
        logp_teacher_B_T=None,
        logp_behavior_B_T=torch.zeros(B, T),
        lengths_B=mask[:, P:].sum(1),
        truncated_B=torch.zeros(B, dtype=torch.bool),
        source="test",
        source_B=torch.ones(B, dtype=torch.int8),
    )
    need = r.completion_mask_B_T.bool()
    with torch.no_grad():
        lean = completion_hidden(model, r, "student"), completion_logits(model, r, "student")
        monkeypatch.setattr(fast_decode, "SUPPORTED", ())  # every model through its own forward
        own = completion_hidden(model, r, "student"), completion_logits(model, r, "student")
    for a, b in zip(lean, own, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a[need], b[need])
