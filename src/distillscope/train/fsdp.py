"""FSDP for a student that does not fit on one process: its decoder layers sharded (torch FSDP2).

    distillscope train CONFIG --launcher accelerate --num-processes 2 --fsdp
    accelerate launch --use_fsdp --fsdp_version 2 --num_processes 2 -m distillscope.cli train CONFIG

Under ``--fsdp`` (accelerate's ``ACCELERATE_USE_FSDP``, :meth:`.distributed.Ranks.current`) each
decoder layer (``model.model.layers[i]``) is its own ``fully_shard`` unit: rank r of N holds
1/N of every layer parameter, of its gradient and of its AdamW moments. The embeddings, the
final norm and the LM head stay replicated — the fused loss head, the scorers and a tied head
read ``lm_head.weight`` directly — and their gradients go through the ranks' bucketed all-reduce
(:meth:`.distributed.Ranks.sum_gradients`) as without FSDP.

Exactness: the loss is already weighted by global shares, so FSDP's reduce-scatter must SUM,
not average: :func:`shard_student` sets a divide factor of 1 and sum-only collectives (gloo has
no pre-multiplied sum). Each micro-batch's backward reduce-scatters into the sharded gradient,
which accumulates across micro-batches — the same sum as one reduce-scatter of the
accumulated gradient, and no unsharded gradient outlives its layer's backward. Every rank must
therefore run as many micro-batches as every other (:func:`.machinery.check_ranks`).

What reads weights directly must not see shards. Scoring takes the model's own forward (FSDP's
hooks gather each layer in turn): :func:`~distillscope.rollout.fast_decode.supports` refuses
sharded parameters, as it refuses a LoRA student's wrapped linears. Sampling (rank 0 samples)
needs the full weights: every rank gathers them together (:func:`full_weights`), rank 0
samples, and every rank frees them — the full parameters are held for the duration of the
sampling, as TRL's ``unwrap_model_for_generation`` holds them, while gradients and optimizer
states stay sharded. AdamW keeps torch's fused kernel: it steps DTensor parameters when a
parameter group holds only DTensors (:func:`adamw_groups`; a group mixing them with plain
tensors fails). Checkpoints hold the full state dicts in one process's layout
(:func:`full_state`), so a run checkpointed under FSDP resumes under FSDP or on one process.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from distillscope.config import ConfigError


def shard_student(model: nn.Module) -> None:
    """Shard each decoder layer of ``model`` (a ``transformers`` causal LM) over the process
    group, its gradients reduce-scattered as a plain sum (the loss carries the global shares)."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not isinstance(layers, nn.ModuleList) or not len(layers):
        raise ConfigError(
            f"--fsdp shards the decoder layers (model.model.layers) and {type(model).__name__} "
            "has none; train it without --fsdp"
        )
    for layer in layers:
        # explicit: each layer is a root of its own (the model above it is not sharded), and
        # FSDP keeps a root's parameters gathered after forward unless told otherwise, which
        # would hold every layer whole from the forward to its backward
        fully_shard(layer, reshard_after_forward=True)
        layer.set_gradient_divide_factor(1.0)
        layer.set_force_sum_reduction_for_comms(True)  # gloo has no PREMUL_SUM


def _units(model: nn.Module) -> list[FSDPModule]:
    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def is_sharded(tensor: torch.Tensor | None) -> bool:
    """Whether ``tensor`` (a parameter, a gradient, an optimizer moment) is an FSDP shard."""
    return isinstance(tensor, DTensor)


@contextlib.contextmanager
def full_weights(model: nn.Module) -> Iterator[None]:
    """Every rank gathers ``model``'s full parameters (one all-gather per layer, all ranks
    together) for the block — direct weight reads (the lean decoder) and the model's own
    forward on one rank alone then work — and frees them after it."""
    units = _units(model)
    for unit in units:
        unit.unshard()
        # FSDP's hooks then find each layer gathered and leave it so: a forward on rank 0
        # alone needs no other rank
        unit.set_reshard_after_forward(False, recurse=False)
    try:
        yield
    finally:
        for unit in units:
            unit.set_reshard_after_forward(True, recurse=False)
            unit.reshard()


def adamw_groups(params: list[nn.Parameter]) -> list[dict]:
    """``params`` as two AdamW parameter groups, the replicated ones and the shards: the fused
    kernel takes a group of DTensors, not a group mixing them with plain tensors."""
    plain = [p for p in params if not is_sharded(p)]
    return [{"params": plain}, {"params": [p for p in params if is_sharded(p)]}]


@torch.no_grad()
def clip_grad_norm(params: list[nn.Parameter], max_norm: float) -> float:
    """``clip_grad_norm_`` over sharded and replicated gradients: the global L2 norm (each
    shard's squared norm summed over the ranks, a replicated gradient's counted once), and
    every gradient scaled by min(1, max_norm / (norm + 1e-6)) as torch scales them."""
    grads = [p.grad for p in params if p.grad is not None]
    sharded = [g.to_local() for g in grads if is_sharded(g)]
    replicated = [g for g in grads if not is_sharded(g)]
    squares = torch.zeros(2, dtype=torch.float64, device=_device(grads))
    for i, group in enumerate((sharded, replicated)):
        for g in group:
            squares[i] += torch.linalg.vector_norm(g, dtype=torch.float64) ** 2
    shard_squares = squares[:1].clone()
    torch.distributed.all_reduce(shard_squares)
    norm = math.sqrt(float(shard_squares[0] + squares[1]))
    coef = min(1.0, max_norm / (norm + 1e-6))
    if coef < 1.0:
        for g in sharded + replicated:
            g.mul_(coef)
    return norm


def _device(grads: list[torch.Tensor]) -> torch.device:
    return grads[0].device if grads else torch.device("cpu")


def full_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, params: list[nn.Parameter], keep: bool
) -> tuple[dict[str, torch.Tensor], dict]:
    """``model``'s and ``optimizer``'s state dicts with every shard gathered, in one process's
    layout: the optimizer's state keyed by the index of its parameter in ``params`` and one
    parameter group, as an AdamW over ``params`` writes it.

    A collective: every rank calls it, and the shards are gathered one tensor at a time, each
    moved to the CPU of the rank that ``keep``s them (the writer); the others drop each one and
    get empty dicts. The device's peak is one whole tensor, not the whole state."""
    model_sd = {k: _gathered(v, keep) for k, v in model.state_dict().items()}
    state = {}
    for i, p in enumerate(params):
        if p in optimizer.state:
            state[i] = {k: _gathered(v, keep) for k, v in optimizer.state[p].items()}
    if not keep:
        return {}, {}
    hyper = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
    return model_sd, {
        "state": state,
        "param_groups": [{**hyper, "params": list(range(len(params)))}],
    }


def _gathered(value, keep: bool):
    if not is_sharded(value):
        return value
    full = value.full_tensor()  # every rank takes part in the all-gather
    return full.cpu() if keep else None


def sharded_model_state(model: nn.Module, full: dict[str, torch.Tensor]) -> dict:
    """A full state dict ``full`` cut to this rank's shards where ``model`` holds shards (each
    rank cuts its own: no communication)."""
    own = model.state_dict()
    return {k: _like(v, own.get(k)) for k, v in full.items()}


def sharded_optimizer_state(
    optimizer: torch.optim.Optimizer, params: list[nn.Parameter], full: dict
) -> dict:
    """One process's optimizer state dict ``full`` (over ``params``) in ``optimizer``'s own
    layout (:func:`adamw_groups`), each moment cut to its parameter's shard."""
    index = {id(p): i for i, p in enumerate(params)}
    hyper = {k: v for k, v in full["param_groups"][0].items() if k != "params"}
    state, groups, n = {}, [], 0
    for group in optimizer.param_groups:
        ids = []
        for p in group["params"]:
            saved = full["state"].get(index[id(p)])
            if saved is not None:
                state[n] = {k: _like(v, p) for k, v in saved.items()}
            ids.append(n)
            n += 1
        groups.append({**hyper, "params": ids})
    return {"state": state, "param_groups": groups}


def _like(value, reference):
    """``value`` as ``reference`` holds it: this rank's shard when ``reference`` is sharded and
    ``value`` is as large as the whole (a moment; AdamW's scalar step stays whole)."""
    if not is_sharded(reference) or not torch.is_tensor(value) or value.shape != reference.shape:
        return value
    return distribute_tensor(value, reference.device_mesh, reference.placements, src_data_rank=None)
