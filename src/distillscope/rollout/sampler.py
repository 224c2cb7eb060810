"""One batched sampler for every rollout policy: both models decoded in lock step with KV caches.

    g = torch.Generator().manual_seed(0)
    r = sample_rollouts(SpectrumPolicy(lam=0.5), student, teacher, ids_B_P, mask_B_P,
                        max_new_tokens=30, eos_token_id=2, pad_token_id=0, generator=g)

Each model the policy needs gets a :class:`_Decoder` (its own prompt, attention mask and
``DynamicCache``); at every step the policy sees the tempered log-probs of all of them and
draws one token per row, which is appended to every decoder. Prompts are left padded, so each
forward gets the full attention mask and explicit position ids (cumsum(mask) − 1).
``use_cache=False`` re-runs the whole sequence at each step: the reference the tests hold the
cached path to (same tokens for the same generator).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import torch
import torch.nn.functional as F
from transformers import DynamicCache, PreTrainedModel

from distillscope.rollout.policies import RolloutPolicy
from distillscope.rollout.rollouts import Role, Rollouts, position_ids


def sample_rollouts(
    policy: RolloutPolicy,
    student: PreTrainedModel | None,
    teacher: PreTrainedModel | None,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    *,
    teacher_prompt_ids: torch.Tensor | None = None,
    teacher_prompt_mask: torch.Tensor | None = None,
    max_new_tokens: int,
    eos_token_id: int,
    pad_token_id: int,
    generator: torch.Generator,
    use_cache: bool = True,
) -> Rollouts:
    """Sample one completion per prompt row with ``policy``; every random draw uses ``generator``.

    ``prompt_ids``/``prompt_mask`` ``[B, P]`` are the student's left-padded prompts; the teacher
    reads ``teacher_prompt_ids``/``teacher_prompt_mask`` ``[B, Q]`` if given, else the same.
    ``generator`` must live on the models' device. A model the policy does not need is not run
    (and may be None); its ``logp_*_B_L`` stays None for :func:`score_rollouts`. Decoding stops
    once every row has emitted EOS; the returned tensors are ordinary (not inference) tensors.
    """
    if teacher_prompt_ids is None:
        teacher_prompt_ids, teacher_prompt_mask = prompt_ids, prompt_mask
    _check_inputs(prompt_ids, teacher_prompt_ids, max_new_tokens)
    source_B = policy.assign_sources(prompt_ids.shape[0], generator)
    run_student, run_teacher = policy.models_needed(source_B)
    decoders: dict[Role, _Decoder] = {}
    if run_student:
        model = _require(student, "student", policy)
        decoders["student"] = _Decoder(model, prompt_ids, prompt_mask, use_cache)
    if run_teacher:
        model = _require(teacher, "teacher", policy)
        decoders["teacher"] = _Decoder(model, teacher_prompt_ids, teacher_prompt_mask, use_cache)
    with _eval_mode([d.model for d in decoders.values()]), torch.inference_mode():
        steps = _decode(
            policy, decoders, source_B, generator, max_new_tokens, eos_token_id, pad_token_id
        )
    # Clone outside inference mode: inference tensors could not be saved for a later backward.
    out = {name: t.clone() for name, t in steps.items()}
    return Rollouts(
        prompt_ids_B_P=prompt_ids,
        prompt_mask_B_P=prompt_mask,
        teacher_prompt_ids_B_Q=teacher_prompt_ids,
        teacher_prompt_mask_B_Q=teacher_prompt_mask,
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


def _decode(
    policy: RolloutPolicy,
    decoders: dict[Role, _Decoder],
    source_B: torch.Tensor,
    generator: torch.Generator,
    max_new_tokens: int,
    eos_token_id: int,
    pad_token_id: int,
) -> dict[str, torch.Tensor]:
    """The decoding loop; returns ``[B, L]`` columns stacked (and ``truncated`` ``[B]``)."""
    temperature = {"student": policy.student_temperature, "teacher": policy.teacher_temperature}
    logits = {role: d.start() for role, d in decoders.items()}
    active_B = torch.ones_like(source_B, dtype=torch.bool)
    columns: dict[str, list[torch.Tensor]] = {k: [] for k in ("completion", "mask", "behavior")}
    columns.update({role: [] for role in decoders})
    for _ in range(max_new_tokens):
        logp = {role: tempered_logprobs(logits[role], temperature[role]) for role in decoders}
        token_B, logp_behavior_B = policy.draw(
            logp.get("student"), logp.get("teacher"), source_B, active_B, generator
        )
        token_B = token_B.masked_fill(~active_B, pad_token_id)
        columns["completion"].append(token_B)
        columns["mask"].append(active_B.long())
        columns["behavior"].append(logp_behavior_B.masked_fill(~active_B, 0.0))
        for role, logp_B_V in logp.items():
            logp_B = logp_B_V.gather(-1, token_B[:, None]).squeeze(-1)
            columns[role].append(logp_B.masked_fill(~active_B, 0.0))
        mask_B = active_B.long()
        active_B = active_B & (token_B != eos_token_id)
        # A CPU-GPU sync per token, paid to stop as soon as every row is finished.
        if not bool(active_B.any()):
            break
        logits = {role: d.append(token_B, mask_B) for role, d in decoders.items()}
    out = {name: torch.stack(cols, dim=1) for name, cols in columns.items()}
    out["truncated"] = active_B
    return out


def tempered_logprobs(logits_B_V: torch.Tensor, temperature: float) -> torch.Tensor:
    """ℓ = log_softmax(z / T) in fp32 (docs/method.md §1: one tempered π samples and scores)."""
    return F.log_softmax(logits_B_V.float() / temperature, dim=-1)


class _Decoder:
    """One model's decoding state: its own prompt, the growing attention mask and KV cache.

    With a cache each step feeds only the new token with the full ``[B, S]`` attention mask
    and its position id; without one the whole sequence is re-run (the reference path).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        ids_B_P: torch.Tensor,
        mask_B_P: torch.Tensor,
        use_cache: bool,
    ):
        # The decoder works on its model's device; logits go back to the prompts' device (where
        # the policy and its generator draw), one [B, V] row per step.
        self.model = model
        self.home = ids_B_P.device
        self.device = next(model.parameters()).device
        self.ids_B_S = ids_B_P.to(self.device)
        self.mask_B_S = mask_B_P.long().to(self.device)
        self.cache = DynamicCache(config=model.config) if use_cache else None

    def start(self) -> torch.Tensor:
        """Logits ``[B, V]`` for the first completion token (fills the cache with the prompt)."""
        return self._last_logits(self.ids_B_S, position_ids(self.mask_B_S))

    def append(self, token_B: torch.Tensor, keep_B: torch.Tensor) -> torch.Tensor:
        """Append ``token_B`` (attended where ``keep_B`` = 1); logits ``[B, V]`` for the next."""
        token_B, keep_B = token_B.to(self.device), keep_B.to(self.device)
        self.ids_B_S = torch.cat([self.ids_B_S, token_B[:, None]], dim=1)
        self.mask_B_S = torch.cat([self.mask_B_S, keep_B[:, None]], dim=1)
        pos_B_S = position_ids(self.mask_B_S)
        if self.cache is not None:
            return self._last_logits(token_B[:, None], pos_B_S[:, -1:])
        return self._last_logits(self.ids_B_S, pos_B_S)

    def _last_logits(self, ids_B_T: torch.Tensor, pos_B_T: torch.Tensor) -> torch.Tensor:
        kwargs = _cache_kwargs(self.model, self.cache)
        out = self.model(
            input_ids=ids_B_T, attention_mask=self.mask_B_S, position_ids=pos_B_T, **kwargs
        )
        return out.logits[:, -1].to(self.home)  # [B, V]: the next-token logits of every row


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
    :func:`completion_logprobs`. Log-probs recorded during sampling are kept as they are.
    """
    changes = {}
    if rollouts.logp_student_B_T is None:
        model = _require(student, "student", None)
        changes["logp_student_B_T"] = completion_logprobs(
            model, rollouts, "student", student_temperature
        )
    if rollouts.logp_teacher_B_T is None:
        model = _require(teacher, "teacher", None)
        changes["logp_teacher_B_T"] = completion_logprobs(
            model, rollouts, "teacher", teacher_temperature
        )
    return replace(rollouts, **changes)


def completion_logprobs(
    model: PreTrainedModel, rollouts: Rollouts, role: Role, temperature: float
) -> torch.Tensor:
    """log π(y_n | h_n) ``[B, L]`` at ``temperature`` from one forward of ``role``'s sequence.

    fp32 log_softmax of logits / T gathered at the completion tokens, 0 where masked. Use it
    at temperature 1.0 for the likelihood diagnostic (docs/method.md §3).
    """
    with _eval_mode([model]), torch.inference_mode():
        home = rollouts.completion_B_T.device
        on_model = rollouts.to(next(model.parameters()).device)  # once, if the devices differ
        ids_B_S, mask_B_S, pos_B_S = on_model.sequence(role)
        logits_B_S_V = model(
            input_ids=ids_B_S, attention_mask=mask_B_S, position_ids=pos_B_S
        ).logits
        logits_B_L_V = logits_B_S_V[:, rollouts.completion_logits_slice(role)]
        logp_B_L_V = tempered_logprobs(logits_B_L_V, temperature)
        logp_B_L = logp_B_L_V.gather(-1, on_model.completion_B_T[..., None]).squeeze(-1)
        logp_B_L = logp_B_L.masked_fill(on_model.completion_mask_B_T == 0, 0.0)
    return logp_B_L.to(home).clone()  # an ordinary tensor, usable in a later autograd graph


def _cache_kwargs(model: PreTrainedModel, cache: DynamicCache | None) -> dict:
    """Forward kwargs for the KV cache (none, and no cache built, on the reference path)."""
    if cache is None:
        return {"use_cache": False}
    return {_cache_kwarg_name(type(model)): cache, "use_cache": True}


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


def _check_inputs(
    prompt_ids_B_P: torch.Tensor, teacher_prompt_ids_B_Q: torch.Tensor, max_new_tokens: int
) -> None:
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if teacher_prompt_ids_B_Q.shape[0] != prompt_ids_B_P.shape[0]:
        raise ValueError(
            f"teacher_prompt_ids has {teacher_prompt_ids_B_Q.shape[0]} rows but prompt_ids has "
            f"{prompt_ids_B_P.shape[0]}: the teacher needs one prompt per student prompt"
        )


def _require(
    model: PreTrainedModel | None, role: Role, policy: RolloutPolicy | None
) -> PreTrainedModel:
    if model is None:
        needs = f"policy {policy.name!r}" if policy is not None else "scoring these rollouts"
        raise ValueError(f"{needs} needs the {role} model, but None was passed")
    return model
