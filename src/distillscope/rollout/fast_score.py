"""The training step's scoring forward for Llama-family models, on the real tokens only.

The teacher's scores and the student's training forward run prompt ⧺ completion through the
model once. :func:`sequence_hidden` computes that forward with the lean decoder's arithmetic
(:mod:`.fast_decode`: RMSNorm in fp32, the model's own rotary embedding, grouped-query SDPA,
SwiGLU) on the real tokens gathered into one batch — no padding position (left-padded prompts,
completions after their EOS) goes through a projection or an MLP — and runs the last layer's
queries, output projection and MLP only where the loss reads. It is differentiable, and
:func:`scores_exactly` says when it equals the model's own forward; the tests hold both to the
same hidden states and the same parameter gradients.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from distillscope.rollout.fast_decode import _attention, _rms_norm, _rotate, supports


def scores_exactly(model: PreTrainedModel, length: int) -> bool:
    """Whether :func:`sequence_hidden` computes ``model``'s own forward for sequences of
    ``length``: what decoding needs (:func:`supports`), no attention dropout when training, no
    gradient checkpointing, and no autocast (mixed precision keeps the model's own forward)."""
    if not supports(model, length) or _checkpointing(model):
        return False
    if model.training and getattr(model.config, "attention_dropout", 0.0):
        return False
    return not torch.is_autocast_enabled(model.model.embed_tokens.weight.device.type)


def _checkpointing(model: PreTrainedModel) -> bool:
    """Activation checkpointing on (``is_activation_checkpointing`` from transformers 5)."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name):
            return bool(getattr(model, name))
    return False


def sequence_hidden(
    model: PreTrainedModel,
    ids_B_S: torch.Tensor,
    mask_B_S: torch.Tensor,
    pos_B_S: torch.Tensor,
    first: int,
) -> torch.Tensor:
    """Final hidden states ``[B, S - first, H]`` (after the last norm) at columns ``first…`` of
    left-padded prompt ⧺ right-padded completion: ``model.model(...)``'s, 0 at padding.

    The real tokens are gathered into one ``[N, H]`` batch for every projection and MLP, and
    scattered into ``[B, S]`` only for attention (same mask as decoding's prefill). The last
    layer runs its queries, output projection and MLP on the real tokens at columns ``first…``
    only (the loss reads nothing else; every column still gives its keys and values).
    Differentiable: the training forward of the student takes this path when
    :func:`scores_exactly` says it may.
    """
    inner, cfg = model.model, model.config
    b, s = ids_B_S.shape
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    real_B_S = mask_B_S.bool()
    index_N = real_B_S.flatten().nonzero().squeeze(-1)  # real tokens, row-major
    tail_B_S = real_B_S.clone()
    tail_B_S[:, :first] = False
    tail_M = tail_B_S.flatten()[index_N].nonzero().squeeze(-1)  # of those, at columns first…
    x_N_H = inner.embed_tokens(ids_B_S.flatten()[index_N])
    cos, sin = inner.rotary_emb(x_N_H[None], pos_B_S.flatten()[index_N][None])
    cos_N_1_D, sin_N_1_D = cos[0, :, None], sin[0, :, None]
    causal_S_S = torch.ones((s, s), dtype=torch.bool, device=ids_B_S.device).tril()
    eye_S_S = torch.eye(s, dtype=torch.bool, device=ids_B_S.device)
    attend_B_1_S_S = ((causal_S_S & real_B_S[:, None, :]) | eye_S_S)[:, None]
    layers = list(inner.layers)
    for depth, layer in enumerate(layers):
        last = depth == len(layers) - 1
        attn, eps = layer.self_attn, cfg.rms_norm_eps
        h_N_H = _rms_norm(x_N_H, layer.input_layernorm.weight, eps)
        k_N_K_D = _rotate(_project(attn.k_proj, h_N_H, kv_heads, dim), cos_N_1_D, sin_N_1_D)
        v_N_K_D = _project(attn.v_proj, h_N_H, kv_heads, dim)
        q_rows = tail_M if last else slice(None)  # the last layer: queries of columns first…
        q_M_N_D = _rotate(
            _project(attn.q_proj, h_N_H[q_rows], heads, dim), cos_N_1_D[q_rows], sin_N_1_D[q_rows]
        )
        keys, values = (_padded(t, index_N, b, s) for t in (k_N_K_D, v_N_K_D))
        queries = _padded(q_M_N_D, index_N[q_rows], b, s)
        start = first if last else 0
        out_B_N_Q_D = _attention(
            queries[:, :, start:], keys, values, attend_B_1_S_S[:, :, start:], dim**-0.5
        )
        rows = index_N[q_rows]  # flat (b · s + column) of the query tokens
        out_M_HD = out_B_N_Q_D.transpose(1, 2).reshape(b, s - start, -1)
        out_M_HD = out_M_HD.flatten(0, 1)[_shifted(rows, s, start)]
        x_N_H = x_N_H[q_rows] + F.linear(out_M_HD, attn.o_proj.weight, attn.o_proj.bias)
        h_N_H = _rms_norm(x_N_H, layer.post_attention_layernorm.weight, eps)
        mlp = layer.mlp
        gate_up = F.silu(F.linear(h_N_H, mlp.gate_proj.weight)) * F.linear(
            h_N_H, mlp.up_proj.weight
        )
        x_N_H = x_N_H + F.linear(gate_up, mlp.down_proj.weight)
    x_M_H = _rms_norm(x_N_H, inner.norm.weight, cfg.rms_norm_eps)
    out = x_M_H.new_zeros((b * (s - first), x_M_H.shape[-1]))
    out = out.index_copy(0, _shifted(index_N[tail_M], s, first), x_M_H)
    return out.view(b, s - first, -1)


def _project(linear: nn.Linear, h_N_H: torch.Tensor, heads: int, dim: int) -> torch.Tensor:
    return F.linear(h_N_H, linear.weight, linear.bias).view(-1, heads, dim)


def _padded(t_N_M_D: torch.Tensor, index_N: torch.Tensor, b: int, s: int) -> torch.Tensor:
    """Tokens ``[N, M, D]`` at flat positions ``index_N`` → ``[B, M, S, D]``, 0 elsewhere."""
    out = t_N_M_D.new_zeros((b * s, *t_N_M_D.shape[1:])).index_copy(0, index_N, t_N_M_D)
    return out.view(b, s, *t_N_M_D.shape[1:]).transpose(1, 2)


def _shifted(flat_N: torch.Tensor, s: int, start: int) -> torch.Tensor:
    """Flat ``b · s + column`` → flat ``b · (s − start) + column − start``."""
    return flat_N - (flat_N // s + 1) * start
