"""One run on several processes: data parallel over the rows of each step's rollout batch.

    accelerate launch --multi_gpu --num_processes 2 -m distillscope.cli train CONFIG
    distillscope train CONFIG --launcher accelerate --num-processes 2   # the same

A launcher (``accelerate launch``, ``torchrun``) sets ``WORLD_SIZE``/``RANK``/``LOCAL_RANK``;
:meth:`Ranks.current` joins the process group through accelerate (gloo on CPU, NCCL on CUDA).
Rank 0 samples the step's rollout batch (prompts from (seed, step), the step's own generator)
and sends it to every rank (:meth:`Ranks.rollouts_of_rank0`); rank r takes its contiguous slice
of the rows (:meth:`Ranks.micro_batches`) for the student's and the teacher's forwards and the
backward — the union over ranks is the single-process batch. The teacher is replicated on every
rank.

Exactness: each micro-batch's loss is weighted by its share of the WHOLE batch's normaliser
(every rank holds the whole batch's mask, so the share is the global one with no collective),
and :meth:`Ranks.sum_gradients` sums the ranks' gradients, so the summed gradient equals the
single-process gradient for every reduction. Clip, optimizer step and divergence checks then
see the same gradient on every rank. Metric totals and the whole-batch diagnostic log-probs are
summed across ranks (:meth:`Ranks.sum_metrics`, :meth:`Ranks.sum_rows`), so every rank computes
the row one process logs. Only rank 0 writes the run directory (:attr:`Ranks.writes`).

The student is not wrapped in ``DistributedDataParallel``: the scoring paths call the model's
decoder body and head directly (:mod:`distillscope.rollout.scoring`), which DDP's forward would not
see, so its gradient hooks would never fire. One all-reduce per update after the micro-batches'
backward passes (in 32 MB buckets) is what DDP does under ``no_sync`` accumulation. With one process
every method is the identity and the loop is unchanged bit for bit.

A student too large for one process is sharded with FSDP (``--fsdp``, accelerate's
``--use_fsdp``; :mod:`.fsdp`): its decoder layers' parameters, gradients and AdamW moments are
split over the ranks, the rest stays replicated and all-reduced as above.

What a run on several processes needs once — the configs its ranks refuse, each rank's own
config, rank 0's claim of the run directory — is :class:`.machinery.Run`'s; a loop's step sees only
the collectives below.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

from distillscope.config import ConfigError, RunConfig
from distillscope.rollout.rollouts import MicroBatch, Rollouts, micro_batches
from distillscope.train import fsdp
from distillscope.train.lora import trainable_parameters

T = TypeVar("T")


@dataclass(frozen=True)
class Ranks:
    """This process's place among the run's processes: ``rank`` of ``world`` (1: alone), its
    device (``None``: the config's ``model.device``), and whether the student is sharded
    (``fsdp``: :mod:`.fsdp`)."""

    rank: int = 0
    world: int = 1
    device: str | None = None
    fsdp: bool = False

    @classmethod
    def current(cls, cfg: RunConfig) -> Ranks:
        """The launcher's ranks (``WORLD_SIZE`` > 1 joins the process group), else one process.

        On CUDA each rank takes the GPU of its ``LOCAL_RANK`` for the student and, when it sits
        on the student's device, the teacher. ``accelerate launch --use_fsdp`` (which sets
        ``ACCELERATE_USE_FSDP``) shards the student.
        """
        world = int(os.environ.get("WORLD_SIZE", "1"))
        sharded = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
        if world <= 1:
            return cls(fsdp=sharded)  # refused by machinery.check_ranks
        _require_accelerate()
        from accelerate import PartialState

        state = PartialState(cpu=cfg.model.device == "cpu")
        device = None if cfg.model.device == "cpu" else str(state.device)
        return cls(state.process_index, state.num_processes, device, sharded)

    @property
    def writes(self) -> bool:
        """Whether this process writes the run directory (rank 0 only)."""
        return self.rank == 0

    def of_rank0(self, make: Callable[[], T]) -> T:
        """``make()`` run on rank 0 only and its (small, tensor-free) value sent to every rank;
        an error it raises is raised on every rank, so none waits for a value that never comes.
        One process: ``make()``."""
        if self.world == 1:
            return make()
        payload = None
        if self.writes:
            try:
                payload = make()
            except Exception as err:  # noqa: BLE001 — re-raised below, on every rank
                payload = err
        return _raised(_broadcast(payload, self.device))

    def rollouts_of_rank0(
        self, fetch: Callable[..., tuple[Rollouts, float]], *args: object
    ) -> tuple[Rollouts, float]:
        """``fetch(*args)``: the step's rollouts and the seconds a cache saved, made on rank 0
        only and sent to every rank through the CPU (so every rank holds the same bits whatever
        its device); an error it raises is raised on every rank. One process: ``fetch(*args)``."""
        if self.world == 1:
            return fetch(*args)

        def on_cpu() -> tuple[Rollouts, float]:
            rollouts, saved_s = fetch(*args)
            return rollouts.to("cpu"), saved_s

        return self.of_rank0(on_cpu)

    def micro_batches(self, rollouts: Rollouts, n: int) -> list[MicroBatch]:
        """This rank's ``n`` micro-batches: its contiguous slice of the batch's rows, split as
        :func:`~distillscope.train.step.micro_batches` splits a batch (row indices stay the
        whole batch's). One process: exactly that function's micro-batches."""
        if self.world == 1:
            return micro_batches(rollouts, n)
        mine_b = torch.arange(rollouts.batch_size).tensor_split(self.world)[self.rank]
        device = rollouts.completion_mask_B_T.device
        return [
            MicroBatch(index_b, rollouts.rows(index_b.to(device)))
            for index_b in mine_b.tensor_split(n)
            if len(index_b)
        ]

    def sum_gradients(self, model: torch.nn.Module) -> None:
        """Sum the gradients of ``model``'s trainable parameters over the ranks (a parameter
        without a gradient contributes zeros), a bucket of at most :data:`BUCKET_NUMEL`
        elements per all-reduce: the extra memory is one bucket, not a flat copy of every
        gradient, and a gradient larger than a bucket is summed in place. FSDP's shards are
        already summed (reduce-scattered in the backward) and left alone."""
        if self.world == 1:
            return
        params = [p for p in model.parameters() if p.requires_grad and not fsdp.is_sharded(p)]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        for bucket in _buckets(params, BUCKET_NUMEL):
            if len(bucket) == 1:
                torch.distributed.all_reduce(bucket[0].grad)
                continue
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            torch.distributed.all_reduce(flat)
            offset = 0
            for p in bucket:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p.grad))
                offset += p.numel()

    def clip_gradients(self, model: torch.nn.Module, max_norm: float) -> float:
        """Clip the summed gradients to ``max_norm``; returns their pre-clip global L2 norm
        (under FSDP over the shards of every rank, :func:`.fsdp.clip_grad_norm`)."""
        if not self.fsdp:
            return float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
        return fsdp.clip_grad_norm(trainable_parameters(model), max_norm)

    def full_weights(
        self, model: torch.nn.Module, when: bool = True
    ) -> contextlib.AbstractContextManager:
        """Under FSDP (and ``when``): ``model``'s full parameters gathered on every rank for the
        block (:func:`.fsdp.full_weights`; every rank enters it). Else nothing happens."""
        return fsdp.full_weights(model) if self.fsdp and when else contextlib.nullcontext()

    def sum_rows(self, values_B_T: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Whole-batch tensors each rank filled at its own rows (zeros elsewhere), summed over the
        ranks: every rank gets every row."""
        if self.world == 1:
            return values_B_T
        for value in values_B_T.values():
            torch.distributed.all_reduce(value)
        return values_B_T

    def sum_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        """The ranks' metric totals (already weighted by their micro-batches' global shares)
        summed over the ranks, in float64, key by key (every rank computes the same keys)."""
        if self.world == 1:
            return totals
        keys = list(totals)  # every rank inserts the same keys in the same order
        summed = torch.tensor([totals[k] for k in keys], dtype=torch.float64, device=self._on)
        torch.distributed.all_reduce(summed)
        return dict(zip(keys, summed.tolist(), strict=True))

    @property
    def _on(self) -> str:
        """Where this rank's collectives put their tensors (NCCL needs them on the GPU)."""
        return self.device or "cpu"


#: elements of one gradient all-reduce (32 MB in fp32; DDP's buckets are 25 MB): a flat copy of
#: every gradient cost data-parallel ranks one more fp32 copy of the student
#: (BENCHMARKS.md "FSDP: per-rank memory and step time")
BUCKET_NUMEL = 1 << 23


def _buckets(params: list[torch.nn.Parameter], limit: int) -> Iterator[list[torch.nn.Parameter]]:
    """``params`` in order, cut into runs of at most ``limit`` elements (a larger one alone)."""
    bucket, size = [], 0
    for p in params:
        if bucket and size + p.numel() > limit:
            yield bucket
            bucket, size = [], 0
        bucket.append(p)
        size += p.numel()
    if bucket:
        yield bucket


#: the ranks of a run in one process (every method the identity)
ONE_PROCESS = Ranks()


#: the ``train`` options that pick the launcher; the re-launched command drops them
LAUNCHER_OPTIONS = ("--launcher", "--num-processes")
#: the ``train`` flags the re-launched command drops (``--fsdp`` becomes accelerate's)
LAUNCHER_FLAGS = ("--fsdp", "--no-fsdp")


def accelerate_command(
    args: Sequence[str],
    processes: int,
    program: Sequence[str] = ("-m", "distillscope.cli"),
    fsdp: bool = False,
) -> list[str]:
    """``accelerate launch`` of ``program`` (``distillscope``) with ``args`` (a ``train`` command
    line, its launcher options dropped) on ``processes`` local processes, its rendezvous on a
    free 127.0.0.1 port.

    accelerate's ``--multi_gpu`` is its torchrun launcher: on a machine without CUDA the ranks
    join over gloo on the CPU (:meth:`Ranks.current`). ``fsdp`` launches with ``--use_fsdp``
    instead (the same launcher; the ranks read it from the environment and shard the student).
    """
    if processes < 2:
        raise ConfigError(f"--num-processes must be at least 2 with --launcher, got {processes}")
    _require_accelerate()
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in LAUNCHER_OPTIONS:
            skip = True
        elif arg not in LAUNCHER_FLAGS and not arg.startswith(
            tuple(f"{o}=" for o in LAUNCHER_OPTIONS)
        ):
            kept.append(arg)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mode = ["--use_fsdp", "--fsdp_version", "2"] if fsdp else ["--multi_gpu"]
    launch = [sys.executable, "-m", "accelerate.commands.launch", *mode]
    launch += ["--num_processes", str(processes), "--num_machines", "1"]
    launch += ["--mixed_precision", "no", "--dynamo_backend", "no"]
    launch += ["--main_process_ip", "127.0.0.1", "--main_process_port", str(port)]
    return [*launch, *program, *kept]


def _require_accelerate() -> None:
    if importlib.util.find_spec("accelerate") is None:
        raise ConfigError(
            "a run on several processes needs accelerate: pip install 'distillscope[dist]'"
        )


def _broadcast(payload: object, device: str | None) -> object:
    """Rank 0's ``payload`` on every rank (pickled; NCCL carries it on the rank's GPU)."""
    box = [payload]
    torch.distributed.broadcast_object_list(box, src=0, device=device and torch.device(device))
    return box[0]


def _raised(value: T | BaseException) -> T:
    if isinstance(value, BaseException):
        raise value
    return value
