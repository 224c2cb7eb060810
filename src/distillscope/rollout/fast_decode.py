"""A lean decoder for Llama-family models: the same forward as ``transformers``, fewer layers.

On small models (the testbed, tests, short rollouts on CPU) a decoding step through the
``transformers`` modules is mostly Python and dispatch overhead: causal-mask construction, a
``DynamicCache`` that grows every layer's keys and values by concatenation, and a dozen module
calls per layer. :class:`StaticDecoder` runs the same arithmetic straight from the model's own
weights — RMSNorm in fp32, rotary embeddings from the model's own ``rotary_emb`` (so every RoPE
variant it supports), grouped-query attention through ``scaled_dot_product_attention``, SwiGLU
— with keys and values written into buffers preallocated for prompt + completion.
:func:`sequence_hidden` is the same arithmetic over a whole prompt ⧺ completion in one pass (the
scoring forwards of the training step, with or without autograd), computed on the real tokens
only: no padding position goes through a projection or an MLP.

It serves the architectures whose decoder layer is exactly that computation
(:data:`SUPPORTED`: Llama, Qwen2, Mistral without a sliding window in reach); anything else, or
a model whose configuration departs from it (another activation, tensor-parallel pretraining
slices, Qwen2 sliding-window layers, quantised or wrapped linear layers, modules dispatched by
``accelerate`` hooks), gets ``None`` from
:func:`static_decoder` and the sampler keeps its ``transformers`` path. The tests hold both
paths to the same logits and the same sampled tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from distillscope.rollout.rollouts import position_ids

#: Causal-LM classes whose decoder layers :class:`StaticDecoder` reproduces.
SUPPORTED = ("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM")
_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj")
_MLP = ("gate_proj", "up_proj", "down_proj")


def supports(model: PreTrainedModel, max_length: int) -> bool:
    """Whether :class:`StaticDecoder` computes exactly what ``model``'s forward computes.

    ``max_length`` is the longest sequence (prompt + completion) it will decode: a sliding
    attention window shorter than that changes the computation, so it is refused.
    """
    if type(model).__name__ not in SUPPORTED:
        return False
    cfg = model.config
    if getattr(cfg, "hidden_act", None) != "silu" or getattr(cfg, "pretraining_tp", 1) != 1:
        return False
    if getattr(cfg, "mlp_bias", False):
        return False
    if any(t != "full_attention" for t in getattr(cfg, "layer_types", None) or ()):
        return False
    window = getattr(cfg, "sliding_window", None)
    if window is not None and getattr(cfg, "use_sliding_window", True) and window < max_length:
        return False
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "rotary_emb") or model.get_output_embeddings() is None:
        return False
    linears = [model.get_output_embeddings()]
    for layer in inner.layers:
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        if attn is None or mlp is None:
            return False
        if set(dict(attn.named_children())) != set(_LINEARS):  # e.g. Qwen3's q_norm/k_norm
            return False
        linears += [getattr(attn, n) for n in _LINEARS] + [getattr(mlp, n, None) for n in _MLP]
    if any(hasattr(m, "_hf_hook") for m in model.modules()):  # accelerate offload/dispatch
        return False
    return all(type(m) is nn.Linear for m in linears)


def static_decoder(
    model: PreTrainedModel, ids_B_P: torch.Tensor, mask_B_P: torch.Tensor, max_new_tokens: int
) -> StaticDecoder | None:
    """A :class:`StaticDecoder` for ``model``, or None when :func:`supports` says no."""
    if not supports(model, ids_B_P.shape[1] + max_new_tokens):
        return None
    return StaticDecoder(model, ids_B_P, mask_B_P, max_new_tokens)


class StaticDecoder:
    """One model's decoding state with static key/value buffers ``[B, kv_heads, P + L, D]``.

    Same interface as the sampler's ``transformers`` decoder: :meth:`start` runs the prompt and
    returns the next-token logits ``[B, V]``; :meth:`append` feeds one token per row (attended
    where ``keep_B`` = 1) and returns the logits after it. Position ids are each row's count of
    real tokens so far (left padding), as in ``rollouts.position_ids``.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        ids_B_P: torch.Tensor,
        mask_B_P: torch.Tensor,
        max_new_tokens: int,
    ):
        self.model = model
        self.home = ids_B_P.device
        cfg = model.config
        inner = model.model
        self.device = inner.embed_tokens.weight.device
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.scale = self.head_dim**-0.5
        self.eps = cfg.rms_norm_eps
        b, p = ids_B_P.shape
        total = p + max_new_tokens
        self.width = p
        self.mask_B_S = torch.zeros((b, total), dtype=torch.bool, device=self.device)
        self.mask_B_S[:, :p] = mask_B_P.to(self.device).bool()
        self.prompt_B_P = ids_B_P.to(self.device)
        self.real_B = self.mask_B_S[:, :p].sum(dim=1)
        shape = (b, self.kv_heads, total, self.head_dim)
        dtype = inner.embed_tokens.weight.dtype
        self.keys = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in inner.layers]
        self.values = [torch.zeros_like(k) for k in self.keys]
        fuse = _fuses(model)
        self.layers = [_Layer(layer, fuse) for layer in inner.layers]

    def start(self) -> torch.Tensor:
        """Logits ``[B, V]`` for the first completion token (fills the buffers with the prompt).

        A prompt that several rows share (n samples per item, rollouts per prompt) is run once
        and its keys, values and logits are copied to each of its rows.
        """
        p = self.width
        rows_B_2P = torch.cat([self.prompt_B_P, self.mask_B_S[:, :p].long()], dim=1)
        unique_U_2P, inverse_B = torch.unique(rows_B_2P, dim=0, return_inverse=True)
        if unique_U_2P.shape[0] == rows_B_2P.shape[0]:
            return self._prefill(self.prompt_B_P, self.mask_B_S[:, :p], self.keys, self.values)
        shape = (unique_U_2P.shape[0], self.kv_heads, p, self.head_dim)
        keys = [k.new_zeros(shape) for k in self.keys]
        values = [torch.zeros_like(k) for k in keys]
        logits_U_V = self._prefill(unique_U_2P[:, :p], unique_U_2P[:, p:].bool(), keys, values)
        for buffers, shared in ((self.keys, keys), (self.values, values)):
            for buffer, layer in zip(buffers, shared, strict=True):
                buffer[:, :, :p] = layer[inverse_B]
        return logits_U_V[inverse_B]

    def _prefill(self, ids_B_P, mask_B_P, keys, values) -> torch.Tensor:
        p = ids_B_P.shape[1]
        # Causal and key-padding mask; every query also sees itself, so the rows of left pads
        # stay finite (their outputs are never attended to by a real token).
        causal_P_P = torch.ones((p, p), dtype=torch.bool, device=self.device).tril()
        eye_P_P = torch.eye(p, dtype=torch.bool, device=self.device)
        attend_B_1_P_P = (causal_P_P & mask_B_P[:, None, :]) | eye_P_P
        return self._forward(
            ids_B_P, position_ids(mask_B_P), attend_B_1_P_P[:, None], 0, keys, values
        )

    def keep_rows(self, rows_R: torch.Tensor) -> None:
        """Drop every row but ``rows_R`` (indices into the current rows, ascending): finished
        rows stop costing compute. Later calls take and return ``R`` rows."""
        rows_R = rows_R.to(self.device)
        self.mask_B_S, self.real_B = self.mask_B_S[rows_R], self.real_B[rows_R]
        self.keys = [k[rows_R] for k in self.keys]
        self.values = [v[rows_R] for v in self.values]

    def append(self, token_B: torch.Tensor, keep_B: torch.Tensor) -> torch.Tensor:
        """Append ``token_B`` (attended where ``keep_B`` = 1); logits ``[B, V]`` for the next."""
        token_B, keep_B = token_B.to(self.device), keep_B.to(self.device)
        column = self.width
        self.mask_B_S[:, column] = keep_B.bool()
        self.width += 1
        self.real_B += keep_B
        pos_B_1 = (self.real_B - 1).clamp(min=0)[:, None]
        attend_B_1_1_W = self.mask_B_S[:, None, None, : self.width]
        return self._forward(
            token_B[:, None], pos_B_1, attend_B_1_1_W, column, self.keys, self.values
        )

    def _forward(
        self,
        ids_B_T: torch.Tensor,
        pos_B_T: torch.Tensor,
        attend: torch.Tensor,
        start: int,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
    ) -> torch.Tensor:
        """Run ``ids_B_T`` (written at columns ``start…``) through every layer; last logits."""
        inner = self.model.model
        x_B_T_H = inner.embed_tokens(ids_B_T)
        cos, sin = inner.rotary_emb(x_B_T_H, pos_B_T)
        cos_B_T_1_D, sin_B_T_1_D = cos[:, :, None], sin[:, :, None]
        end = start + ids_B_T.shape[1]
        b, t = ids_B_T.shape
        n, kv, d = self.heads, self.kv_heads, self.head_dim
        for w, k_buf, v_buf in zip(self.layers, keys, values, strict=True):
            h_B_T_H = _rms_norm(x_B_T_H, w.input_norm, self.eps)
            qkv_B_T_M_D = w.project_qkv(h_B_T_H).view(b, t, n + 2 * kv, d)
            # queries and keys rotate together: one pass over [B, T, N + K, D]
            qk_B_T_M_D = _rotate(qkv_B_T_M_D[:, :, : n + kv], cos_B_T_1_D, sin_B_T_1_D)
            k_buf[:, :, start:end] = qk_B_T_M_D[:, :, n:].transpose(1, 2)
            v_buf[:, :, start:end] = qkv_B_T_M_D[:, :, n + kv :].transpose(1, 2)
            out_B_N_T_D = _attention(
                qk_B_T_M_D[:, :, :n].transpose(1, 2),
                k_buf[:, :, :end],
                v_buf[:, :, :end],
                attend,
                self.scale,
            )
            out_B_T_HD = out_B_N_T_D.transpose(1, 2).reshape(b, t, -1)
            x_B_T_H = x_B_T_H + F.linear(out_B_T_HD, w.o, w.o_bias)
            h_B_T_H = _rms_norm(x_B_T_H, w.post_norm, self.eps)
            x_B_T_H = x_B_T_H + w.mlp(h_B_T_H)
        last_B_H = _rms_norm(x_B_T_H[:, -1], inner.norm.weight, self.eps)
        head = self.model.get_output_embeddings()
        return F.linear(last_B_H, head.weight, head.bias).to(self.home)


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


#: Largest model (bytes of its decoder layers' weights) whose projections a decoder fuses.
FUSE_MAX_BYTES = 64 * 2**20


class _Layer:
    """One decoder layer's weights; on small models its query, key and value projections fused.

    A decoding step on a small model is mostly per-call overhead: one GEMM for queries, keys
    and values (weight ``[(N + 2K)·D, H]``) instead of three makes testbed steps at B = 16–64
    8–40% faster (with rotating queries and keys in one pass). Fusing copies those weights once
    per decoder (training changes them between rollouts), so models above
    :data:`FUSE_MAX_BYTES`, where the GEMMs dominate, keep their own projections. Gate and up
    stay apart: fused, the strided halves made SwiGLU slower at B = 256.
    """

    def __init__(self, layer: nn.Module, fuse: bool):
        attn, mlp = layer.self_attn, layer.mlp
        self.input_norm = layer.input_layernorm.weight
        self.post_norm = layer.post_attention_layernorm.weight
        self.o, self.o_bias = attn.o_proj.weight, attn.o_proj.bias
        self.down = mlp.down_proj.weight
        self.qkv = [(p.weight, p.bias) for p in (attn.q_proj, attn.k_proj, attn.v_proj)]
        self.gate, self.up = mlp.gate_proj.weight, mlp.up_proj.weight
        biased = {b is not None for _, b in self.qkv}  # Qwen2: all three biased
        if fuse and len(biased) == 1:
            weight = torch.cat([w.detach() for w, _ in self.qkv])
            bias = torch.cat([b.detach() for _, b in self.qkv]) if biased == {True} else None
            self.qkv = [(weight, bias)]

    def project_qkv(self, h_B_T_H: torch.Tensor) -> torch.Tensor:
        """Queries, keys and values side by side: ``[B, T, (N + 2K)·D]``."""
        parts = [F.linear(h_B_T_H, w, b) for w, b in self.qkv]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def mlp(self, h_B_T_H: torch.Tensor) -> torch.Tensor:
        """SwiGLU: ``down(silu(gate(h)) * up(h))``."""
        return F.linear(
            F.silu(F.linear(h_B_T_H, self.gate)) * F.linear(h_B_T_H, self.up), self.down
        )


def _fuses(model: PreTrainedModel) -> bool:
    layers = model.model.layers
    size = sum(p.numel() * p.element_size() for layer in layers for p in layer.parameters())
    return size <= FUSE_MAX_BYTES


#: ``scaled_dot_product_attention`` shares key/value heads itself from torch 2.5 on.
_SDPA_GQA = "enable_gqa" in (F.scaled_dot_product_attention.__doc__ or "")


def _attention(
    q_B_N_T_D: torch.Tensor,
    k_B_K_S_D: torch.Tensor,
    v_B_K_S_D: torch.Tensor,
    attend: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Attention of N query heads over K ≤ N key/value heads (grouped-query when K < N)."""
    if q_B_N_T_D.shape[2] == 1 and q_B_N_T_D.device.type == "cpu":
        return _one_query_attention(q_B_N_T_D, k_B_K_S_D, v_B_K_S_D, attend, scale)
    groups = q_B_N_T_D.shape[1] // k_B_K_S_D.shape[1]
    if groups == 1:
        return F.scaled_dot_product_attention(
            q_B_N_T_D, k_B_K_S_D, v_B_K_S_D, attn_mask=attend, scale=scale
        )
    if _SDPA_GQA:
        return F.scaled_dot_product_attention(
            q_B_N_T_D, k_B_K_S_D, v_B_K_S_D, attn_mask=attend, scale=scale, enable_gqa=True
        )
    k_B_N_S_D = k_B_K_S_D.repeat_interleave(groups, dim=1)
    v_B_N_S_D = v_B_K_S_D.repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(
        q_B_N_T_D, k_B_N_S_D, v_B_N_S_D, attn_mask=attend, scale=scale
    )


def _one_query_attention(
    q_B_N_1_D: torch.Tensor,
    k_B_K_S_D: torch.Tensor,
    v_B_K_S_D: torch.Tensor,
    attend_B_1_1_S: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """One new token per row attending over the cache, as two batched matmuls (CPU decoding).

    On CPU, SDPA runs its blocked flash kernel even for a single query; this is ~1.7x faster at
    B = 256 (the evaluation's batches). Query heads are grouped over their key/value head, so
    grouped-query attention needs no copies.
    """
    b, n, _, d = q_B_N_1_D.shape
    kv = k_B_K_S_D.shape[1]
    q_B_K_G_D = q_B_N_1_D.reshape(b, kv, n // kv, d) * scale
    scores_B_K_G_S = torch.matmul(q_B_K_G_D, k_B_K_S_D.transpose(-1, -2))
    scores_B_K_G_S = scores_B_K_G_S.masked_fill(~attend_B_1_1_S, float("-inf"))
    out_B_K_G_D = torch.matmul(scores_B_K_G_S.softmax(dim=-1), v_B_K_S_D)
    return out_B_K_G_D.reshape(b, n, 1, d)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``transformers``' RMSNorm: normalise in fp32, cast back, then scale."""
    x32 = x.float()  # x itself when it is fp32
    normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * (normed if x.dtype == torch.float32 else normed.to(x.dtype))


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of ``x`` ``[..., D]`` (the half-split convention of Llama)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin
