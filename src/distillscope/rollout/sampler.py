"""One batched sampler for every rollout policy: both models decoded in lock step with KV caches.

    spec = SamplingSpec(max_new_tokens=30, stop_ids=2, pad_id=0)
    g = torch.Generator().manual_seed(0)
    r = sample_rollouts(SpectrumPolicy(lam=0.5), student, teacher, PromptBatch(ids, mask), spec, g)

Each model the policy needs gets a decoder (its own prompt, attention mask and KV cache): a
:class:`~distillscope.rollout.fast_decode.StaticDecoder` for Llama-family models, which runs the
same arithmetic without the ``transformers`` module overhead, else a :class:`_Decoder` over the
model's own forward and a ``DynamicCache``. At every step the policy sees the tempered
log-probs of all of them and draws one token per row, which is appended to every decoder.
Prompts are left padded, so each forward gets the full attention mask and explicit position ids
(cumsum(mask) − 1).
``SamplingSpec(use_cache=False)`` re-runs the whole sequence at each step: the reference the
tests hold the cached path to (same tokens for the same generator).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import torch
from transformers import DynamicCache, PreTrainedModel

from distillscope.objectives.divergences import tempered_log_softmax
from distillscope.rollout.fast_decode import StaticDecoder, static_decoder
from distillscope.rollout.policies import RolloutPolicy
from distillscope.rollout.rollouts import PromptBatch, Role, Rollouts, SamplingSpec, position_ids


def sample_rollouts(
    policy: RolloutPolicy,
    student: PreTrainedModel | None,
    teacher: PreTrainedModel | None,
    prompts: PromptBatch,
    spec: SamplingSpec,
    generator: torch.Generator,
) -> Rollouts:
    """Sample one completion per prompt row with ``policy``; every random draw uses ``generator``.

    The student reads ``prompts.ids_B_P``, the teacher ``prompts.teacher_ids_B_Q``; ``spec``
    says how decoding ends and what may be drawn (:class:`SamplingSpec`). ``generator`` must
    live on the models' device. A model the policy does not need is not run (and may be None);
    its ``logp_*_B_T`` stays None for :func:`score_rollouts`. Returned tensors are ordinary (not
    inference) tensors.
    """
    source_B = policy.assign_sources(prompts.ids_B_P.shape[0], generator)
    run_student, run_teacher = policy.models_needed(source_B)
    decoders: dict[Role, _Decoder | StaticDecoder] = {}
    for role, model, needed in (
        ("student", student, run_student),
        ("teacher", teacher, run_teacher),
    ):
        if needed:
            decoders[role] = _decoder(_require(model, role, policy), *prompts.of(role), spec)
    device = prompts.ids_B_P.device
    every = spec.stop_check_every
    resolved = replace(
        spec,
        vocab_size=_shared_vocab_size(decoders, spec.vocab_size),
        stop_check_every=(1 if device.type == "cpu" else 8) if every is None else every,
    )
    with _eval_mode([d.model for d in decoders.values()]), torch.inference_mode():
        steps = _decode(policy, decoders, source_B, generator, resolved)
    # Clone outside inference mode: inference tensors could not be saved for a later backward.
    out = {name: t.clone() for name, t in steps.items()}
    return Rollouts(
        prompt_ids_B_P=prompts.ids_B_P,
        prompt_mask_B_P=prompts.mask_B_P,
        teacher_prompt_ids_B_Q=prompts.teacher_ids_B_Q,
        teacher_prompt_mask_B_Q=prompts.teacher_mask_B_Q,
        completion_B_T=out["completion"],
        completion_mask_B_T=out["mask"],
        logp_student_B_T=out.get("student"),
        logp_teacher_B_T=out.get("teacher"),
        logp_behavior_B_T=out["behavior"],
        lengths_B=out["mask"].sum(dim=1),
        truncated_B=out["truncated"],
        source=policy.name,
        source_B=source_B.clone(),
    )


def _decoder(
    model: PreTrainedModel, ids_B_P: torch.Tensor, mask_B_P: torch.Tensor, spec: SamplingSpec
) -> _Decoder | StaticDecoder:
    """The fastest decoder that computes ``model``'s own forward for these prompts."""
    if spec.use_cache and spec.fast_decode:  # the lean decoder always caches
        decoder = static_decoder(model, ids_B_P, mask_B_P, spec.max_new_tokens)
        if decoder is not None:
            return decoder
    return _Decoder(model, ids_B_P, mask_B_P, spec.use_cache, spec.max_new_tokens)


def _decode(
    policy: RolloutPolicy,
    decoders: dict[Role, _Decoder | StaticDecoder],
    source_B: torch.Tensor,
    generator: torch.Generator,
    spec: SamplingSpec,
) -> dict[str, torch.Tensor]:
    """The decoding loop; returns ``[B, L]`` columns (and ``truncated`` ``[B]``).

    ``spec`` is resolved: its ``vocab_size`` and ``stop_check_every`` are set. Columns are
    written into preallocated ``[B, max_new_tokens]`` buffers and trimmed to the longest row at
    the end; no host synchronisation happens except the stop check. On CPU, where counting rows
    is free, lean decoders drop ended rows once a quarter of the rows they hold have ended
    (:func:`_compact`), at the same steps whatever ``stop_check_every`` is; the policy still
    draws for every row from its own uniform, and ended rows keep their last logits, so the
    draws of live rows are unchanged.
    """
    temperature = {"student": policy.student_temperature, "teacher": policy.teacher_temperature}
    logits = {role: d.start() for role, d in decoders.items()}
    live_R = None  # rows the decoders hold; None: all of them
    can_compact = source_B.device.type == "cpu" and all(
        isinstance(d, StaticDecoder) for d in decoders.values()
    )
    active_B = torch.ones_like(source_B, dtype=torch.bool)
    max_new_tokens, pad_id, vocab_size = spec.max_new_tokens, spec.pad_id, spec.vocab_size
    stop_ids = torch.as_tensor(spec.stop_ids, dtype=torch.long, device=source_B.device)
    shape, device = (source_B.shape[0], max_new_tokens), source_B.device
    out = {
        "completion": torch.full(shape, pad_id, dtype=torch.long, device=device),
        "mask": torch.zeros(shape, dtype=torch.long, device=device),
    }
    for name in ("behavior", *decoders):
        out[name] = torch.zeros(shape, dtype=torch.float32, device=device)
    steps = max_new_tokens
    for n in range(max_new_tokens):
        logp = {
            role: tempered_log_softmax(logits[role][:, :vocab_size], temperature[role])
            for role in decoders
        }
        token_B, logp_behavior_B = policy.draw(
            logp.get("student"), logp.get("teacher"), source_B, active_B, generator
        )
        token_B = token_B.masked_fill(~active_B, pad_id)
        out["completion"][:, n] = token_B
        out["mask"][:, n] = active_B
        out["behavior"][:, n] = logp_behavior_B.masked_fill(~active_B, 0.0)
        for role, logp_B_V in logp.items():
            logp_B = logp_B_V.gather(-1, token_B[:, None]).squeeze(-1)
            out[role][:, n] = logp_B.masked_fill(~active_B, 0.0)
        keep_B = active_B.long()
        active_B = active_B & ~torch.isin(token_B, stop_ids)
        if n + 1 == max_new_tokens:
            break
        # The only host synchronisation: stop once every row has ended.
        if (n + 1) % spec.stop_check_every == 0 and not bool(active_B.any()):
            steps = n + 1
            break
        if can_compact:
            alive, held = int(active_B.sum()), len(active_B if live_R is None else live_R)
            if alive and held - alive >= max(2, held // 4):
                live_R = _compact(decoders, active_B, live_R)
        if live_R is None:
            logits = {role: d.append(token_B, keep_B) for role, d in decoders.items()}
        else:
            for role, d in decoders.items():
                logits[role][live_R] = d.append(token_B[live_R], keep_B[live_R])
    width = max(1, int(out["mask"][:, :steps].sum(dim=1).max()))
    out = {name: t[:, :width] for name, t in out.items()}
    out["truncated"] = active_B
    return out


def _compact(
    decoders: dict[Role, StaticDecoder], active_B: torch.Tensor, live_R: torch.Tensor | None
) -> torch.Tensor:
    """Keep only the active rows in every decoder; returns their indices into the batch."""
    new_live = active_B.nonzero().squeeze(-1)
    old_live = torch.arange(len(active_B), device=active_B.device) if live_R is None else live_R
    position_of = torch.full_like(active_B, -1, dtype=torch.long)
    position_of[old_live] = torch.arange(len(old_live), device=active_B.device)
    for d in decoders.values():
        d.keep_rows(position_of[new_live])
    return new_live


class _Decoder:
    """One model's decoding state: its own prompt, attention mask and KV cache.

    Token ids and the attention mask live in buffers preallocated for the whole completion
    (no growth by concatenation); a running count of real tokens gives the next position id
    (cumsum(mask) − 1 at the last column). With a cache each step feeds only the new token;
    without one the whole sequence is re-run (the reference path). Either way the head is
    applied to the last position only (``logits_to_keep=1``), so no ``[B, S, V]`` tensor exists.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        ids_B_P: torch.Tensor,
        mask_B_P: torch.Tensor,
        use_cache: bool,
        max_new_tokens: int,
    ):
        # The decoder works on its model's device; logits go back to the prompts' device (where
        # the policy and its generator draw), one [B, V] row per step.
        self.model = model
        self.home = ids_B_P.device
        self.device = next(model.parameters()).device
        b, p = ids_B_P.shape
        self.width = p
        self.ids_B_S = ids_B_P.new_zeros((b, p + max_new_tokens), device=self.device)
        self.mask_B_S = mask_B_P.new_zeros(
            (b, p + max_new_tokens), dtype=torch.long, device=self.device
        )
        self.ids_B_S[:, :p] = ids_B_P.to(self.device)
        self.mask_B_S[:, :p] = mask_B_P.to(self.device)
        self.real_B = self.mask_B_S[:, :p].sum(dim=1)
        self.cache = DynamicCache(config=model.config) if use_cache else None

    def start(self) -> torch.Tensor:
        """Logits ``[B, V]`` for the first completion token (fills the cache with the prompt)."""
        mask_B_P = self.mask_B_S[:, : self.width]
        return self._last_logits(self.ids_B_S[:, : self.width], position_ids(mask_B_P))

    def append(self, token_B: torch.Tensor, keep_B: torch.Tensor) -> torch.Tensor:
        """Append ``token_B`` (attended where ``keep_B`` = 1); logits ``[B, V]`` for the next."""
        token_B, keep_B = token_B.to(self.device), keep_B.to(self.device)
        self.ids_B_S[:, self.width] = token_B
        self.mask_B_S[:, self.width] = keep_B
        self.width += 1
        self.real_B += keep_B
        if self.cache is not None:
            pos_B_1 = (self.real_B - 1).clamp(min=0)[:, None]
            return self._last_logits(token_B[:, None], pos_B_1)
        mask_B_S = self.mask_B_S[:, : self.width]
        return self._last_logits(self.ids_B_S[:, : self.width], position_ids(mask_B_S))

    def _last_logits(self, ids_B_T: torch.Tensor, pos_B_T: torch.Tensor) -> torch.Tensor:
        kwargs = _cache_kwargs(self.model, self.cache)
        kwargs.update(_last_logits_kwargs(type(self.model)))
        out = self.model(
            input_ids=ids_B_T,
            attention_mask=self.mask_B_S[:, : self.width],
            position_ids=pos_B_T,
            **kwargs,
        )
        return out.logits[:, -1].to(self.home)  # [B, V]: the next-token logits of every row


def _shared_vocab_size(
    decoders: dict[Role, _Decoder | StaticDecoder], vocab_size: int | None
) -> int:
    """V: ``vocab_size`` if given (checked against each model's logit width), else the width."""
    widths = {role: _logit_width(d.model) for role, d in decoders.items()}
    if vocab_size is None:
        if len(set(widths.values())) > 1:
            raise ValueError(
                f"the models' logit widths differ ({widths}); pass vocab_size=len(tokenizer) "
                "so that both are sliced to the shared tokenizer"
            )
        return next(iter(widths.values()))
    for role, width in widths.items():
        if width < vocab_size:
            raise ValueError(
                f"the {role} has {width} logit columns but vocab_size is {vocab_size}; "
                "its output layer is narrower than the tokenizer"
            )
    return vocab_size


def _logit_width(model: PreTrainedModel) -> int:
    """Columns of the model's logits (its padded vocabulary size)."""
    head = model.get_output_embeddings()
    return head.weight.shape[0] if head is not None else model.config.vocab_size


def score_rollouts(
    rollouts: Rollouts,
    student: PreTrainedModel | None,
    teacher: PreTrainedModel | None,
    *,
    student_temperature: float,
    teacher_temperature: float,
) -> Rollouts:
    """A copy of ``rollouts`` with missing ``logp_student_B_T``/``logp_teacher_B_T`` filled.

    One full forward per missing model (the teacher with its own prompt), see
    :func:`forward_completion_logprobs`. Log-probs recorded during sampling are kept as they are.
    """
    changes = {}
    if rollouts.logp_student_B_T is None:
        model = _require(student, "student", None)
        changes["logp_student_B_T"] = forward_completion_logprobs(
            model, rollouts, "student", student_temperature
        )
    if rollouts.logp_teacher_B_T is None:
        model = _require(teacher, "teacher", None)
        changes["logp_teacher_B_T"] = forward_completion_logprobs(
            model, rollouts, "teacher", teacher_temperature
        )
    return replace(rollouts, **changes)


def forward_completion_logprobs(
    model: PreTrainedModel,
    rollouts: Rollouts,
    role: Role,
    temperature: float,
    vocab_size: int | None = None,
) -> torch.Tensor:
    """log π(y_n | h_n) ``[B, L]`` at ``temperature`` from one forward of ``role``'s sequence.

    fp32 log_softmax of logits / T gathered at the completion tokens, 0 where masked; with
    ``vocab_size`` V the logits are sliced to their first V columns first, as the sampler draws.
    Use it at temperature 1.0 for the likelihood diagnostic (docs/method.md §3).
    """
    with _eval_mode([model]), torch.inference_mode():
        home = rollouts.completion_B_T.device
        on_model = rollouts.to(next(model.parameters()).device)  # once, if the devices differ
        ids_B_S, mask_B_S, pos_B_S = on_model.sequence(role)
        logits_B_S_V = model(
            input_ids=ids_B_S, attention_mask=mask_B_S, position_ids=pos_B_S
        ).logits
        logits_B_L_V = logits_B_S_V[:, rollouts.completion_logits_slice(role), :vocab_size]
        logp_B_L_V = tempered_log_softmax(logits_B_L_V, temperature)
        logp_B_L = logp_B_L_V.gather(-1, on_model.completion_B_T[..., None]).squeeze(-1)
        logp_B_L = logp_B_L.masked_fill(on_model.completion_mask_B_T == 0, 0.0)
    return logp_B_L.to(home).clone()  # an ordinary tensor, usable in a later autograd graph


def _cache_kwargs(model: PreTrainedModel, cache: DynamicCache | None) -> dict:
    """Forward kwargs for the KV cache (none, and no cache built, on the reference path)."""
    if cache is None:
        return {"use_cache": False}
    return {_cache_kwarg_name(type(model)): cache, "use_cache": True}


@functools.cache
def _last_logits_kwargs(model_cls: type) -> dict:
    """Keep only the last position's logits: ``logits_to_keep=1`` (transformers ≥ 4.50;
    ``num_logits_to_keep`` in 4.45–4.49). A model without either computes all positions."""
    params = inspect.signature(model_cls.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: 1}
    return {}


@functools.cache
def _cache_kwarg_name(model_cls: type) -> str:
    """Recent transformers 5 releases call the KV-cache argument ``cache``; older ones
    ``past_key_values`` (later releases still accept it, with a deprecation warning)."""
    params = inspect.signature(model_cls.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


@contextmanager
def _eval_mode(models: list[PreTrainedModel]) -> Iterator[None]:
    """Eval mode (no dropout) while sampling; each model's previous mode is restored after."""
    was_training = [m.training for m in models]
    for m in models:
        m.eval()
    try:
        yield
    finally:
        for m, mode in zip(models, was_training, strict=True):
            m.train(mode)


def _require(
    model: PreTrainedModel | None, role: Role, policy: RolloutPolicy | None
) -> PreTrainedModel:
    if model is None:
        needs = f"policy {policy.name!r}" if policy is not None else "scoring these rollouts"
        raise ValueError(f"{needs} needs the {role} model, but None was passed")
    return model
