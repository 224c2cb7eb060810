"""A lean decoder for Llama-family models: the same forward as ``transformers``, fewer layers.

On small models (the testbed, tests, short rollouts on CPU) a decoding step through the
``transformers`` modules is mostly Python and dispatch overhead: causal-mask construction, a
``DynamicCache`` that grows every layer's keys and values by concatenation, and a dozen module
calls per layer. :class:`StaticDecoder` runs the same arithmetic straight from the model's own
weights — RMSNorm in fp32, rotary embeddings from the model's own ``rotary_emb`` (so every RoPE
variant it supports), grouped-query attention through ``scaled_dot_product_attention``, SwiGLU
— with keys and values written into buffers preallocated for prompt + completion.
:mod:`.fast_score` runs the same arithmetic over a whole prompt ⧺ completion (the training
step's scoring forwards).

It serves the architectures whose decoder layer is exactly that computation
(:data:`SUPPORTED`: Llama, Qwen2, Mistral without a sliding window in reach); anything else, or
a model whose configuration departs from it (another activation, tensor-parallel pretraining
slices, Qwen2 sliding-window layers, quantised or wrapped linear layers, weights sharded by
FSDP, modules dispatched by ``accelerate`` hooks), gets ``None`` from
:func:`static_decoder` and the sampler keeps its ``transformers`` path. The tests hold both
paths to the same logits and the same sampled tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor
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
    # FSDP shards (DTensors) are gathered by the model's own forward only
    return all(type(m) is nn.Linear and not isinstance(m.weight, DTensor) for m in linears)


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
        head = model.get_output_embeddings()
        transpose_head = fuse or (self.device.type == "cpu" and max_new_tokens >= HEAD_COPY_TOKENS)
        self.head = _Projection.of(head.weight, head.bias, transpose_head)

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
            x_B_T_H = x_B_T_H + w.o(out_B_T_HD)
            h_B_T_H = _rms_norm(x_B_T_H, w.post_norm, self.eps)
            x_B_T_H = x_B_T_H + w.mlp(h_B_T_H)
        last_B_H = _rms_norm(x_B_T_H[:, -1], inner.norm.weight, self.eps)
        return self.head(last_B_H).to(self.home)


#: Largest model (bytes of its decoder layers' weights) whose projections a decoder fuses.
FUSE_MAX_BYTES = 64 * 2**20

#: On CPU, decoding at least this many tokens multiplies by a transposed copy of the LM head.
#: At B = 4 and V = 151,936 × H = 896 one decoding step's head GEMM takes 38 ms against the
#: ``[H, V]`` copy and 68 ms against the ``[V, H]`` weight (2 threads); the copy (545 MB, alive
#: for the rollout) takes 0.46 s, about 16 steps' saving.
HEAD_COPY_TOKENS = 16


class _Layer:
    """One decoder layer's weights; on small models copied into the layout their GEMMs like.

    A decoding step on a small model is mostly per-call overhead and skinny GEMMs (B rows):
    one GEMM for queries, keys and values (weight ``[(N + 2K)·D, H]``) instead of three makes
    testbed steps at B = 16–64 8–40% faster (with rotating queries and keys in one pass), and
    every projection multiplied by its weight stored transposed (``[H_in, H_out]``, contiguous)
    runs ~1.8× faster at B = 16 than against the ``[H_out, H_in]`` weight (the layout
    ``F.linear`` reads). Both copy the weights once per decoder (training changes them between
    rollouts), so models above :data:`FUSE_MAX_BYTES`, where the GEMMs dominate, keep their own
    projections. Gate and up stay apart: fused, the strided halves made SwiGLU slower at
    B = 256.
    """

    def __init__(self, layer: nn.Module, fuse: bool):
        attn, mlp = layer.self_attn, layer.mlp
        self.input_norm = layer.input_layernorm.weight
        self.post_norm = layer.post_attention_layernorm.weight
        linears = (attn.q_proj, attn.k_proj, attn.v_proj)
        self.qkv = [_Projection.of(p.weight, p.bias, fuse) for p in linears]
        biased = {p.bias is not None for p in linears}  # Qwen2: all three biased
        if fuse and len(biased) == 1:
            weight = torch.cat([p.weight.detach() for p in linears])
            bias = torch.cat([p.bias.detach() for p in linears]) if biased == {True} else None
            self.qkv = [_Projection.of(weight, bias, True)]
        self.o = _Projection.of(attn.o_proj.weight, attn.o_proj.bias, fuse)
        self.gate, self.up, self.down = (
            _Projection.of(p.weight, None, fuse)
            for p in (mlp.gate_proj, mlp.up_proj, mlp.down_proj)
        )

    def project_qkv(self, h_B_T_H: torch.Tensor) -> torch.Tensor:
        """Queries, keys and values side by side: ``[B, T, (N + 2K)·D]``."""
        parts = [p(h_B_T_H) for p in self.qkv]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def mlp(self, h_B_T_H: torch.Tensor) -> torch.Tensor:
        """SwiGLU: ``down(silu(gate(h)) * up(h))``."""
        return self.down(F.silu(self.gate(h_B_T_H)) * self.up(h_B_T_H))


class _Projection:
    """``x Wᵀ + b`` from ``W`` as the module holds it, or from a contiguous copy of ``Wᵀ``."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, transposed: bool):
        self.weight, self.bias, self.transposed = weight, bias, transposed

    @classmethod
    def of(cls, weight: torch.Tensor, bias: torch.Tensor | None, transpose: bool) -> _Projection:
        if not transpose:
            return cls(weight, bias, False)
        bias = None if bias is None else bias.detach()
        return cls(weight.detach().T.contiguous(), bias, True)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not self.transposed:
            return F.linear(x, self.weight, self.bias)
        x_N_I = x.reshape(-1, x.shape[-1])
        if self.bias is None:
            out_N_O = torch.mm(x_N_I, self.weight)
        else:
            out_N_O = torch.addmm(self.bias, x_N_I, self.weight)
        return out_N_O.view(*x.shape[:-1], self.weight.shape[1])


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
    """``transformers``' RMSNorm: normalise in fp32, cast back, then scale (in fp32, torch's own
    ``rms_norm``: the same arithmetic in one call)."""
    if x.dtype == weight.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * (normed if x.dtype == torch.float32 else normed.to(x.dtype))


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of ``x`` ``[..., D]`` (the half-split convention of Llama)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin
