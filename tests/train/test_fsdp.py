"""Two processes with the student's layers sharded by FSDP (gloo on CPU) train as one process.

The test launches this file as the workers' script (``accelerate launch --use_fsdp``). Each
worker (1) shards a fixed fp64 student, runs the forward/backward of its rank's rows for the
gradient cases of test_distributed.py and gathers the summed gradient, then takes one AdamW
step and records how many elements of the sharded layers its gradients and moments hold; (2)
trains the tiny testbed pair with ``distill`` into one shared run directory, uninterrupted,
and once killed after a checkpoint and resumed under FSDP — a copy of the killed run is
resumed by the parent on one process. The parent compares to one process: gradients and
metrics to 1e-6, the runs' metrics row by row, the checkpointed parameters and optimizer
moments, ``RUN/student/``, and each rank's share of the sharded elements (1/2).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from tests.numerics import chain_tols
from torch.distributed.fsdp import FSDPModule

from distillscope.config import ConfigError, load_run_config
from distillscope.store import read_metrics
from distillscope.train.distributed import Ranks, accelerate_command
from distillscope.train.fsdp import is_sharded, shard_student
from distillscope.train.loop import _adamw
from distillscope.train.machinery import check_ranks

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

try:
    from . import test_distributed as two
except ImportError:  # run as the workers' script: tests/train is its sys.path[0]
    import test_distributed as two

GRAD_CASES, VOCAB, one_update, case_cfg = two.GRAD_CASES, two.VOCAB, two.one_update, two._case_cfg


#: the max norm the gradient cases are clipped to (below every case's norm)
CLIP = 1e-3


def _sharded_update(case: tuple, ranks: Ranks) -> tuple[dict, dict[str, torch.Tensor], dict]:
    """One update of the gradient case on the sharded student: its metrics; the summed gradient
    gathered whole, its global norm and the gradient clipped to CLIP; and the elements of the
    sharded layers this rank's gradients and AdamW moments hold, against the layers' whole."""
    cfg = case_cfg(*case)
    student = two.tiny_llama(VOCAB, 16, seed=1)
    shard_student(student)
    metrics, grad = one_update(cfg, ranks, student)
    norm = ranks.clip_gradients(student, CLIP)
    clipped = torch.cat([two.whole(p.grad).flatten() for p in student.parameters()])
    grads = {"grad": grad, "norm": torch.tensor(norm, dtype=torch.float64), "clipped": clipped}
    optimizer = _adamw(cfg, student)
    optimizer.step()
    layers = [p for p in student.parameters() if is_sharded(p)]
    held = {
        "grad": sum(p.grad.to_local().numel() for p in layers),
        "moments": sum(optimizer.state[p]["exp_avg"].to_local().numel() for p in layers),
        "whole": sum(p.numel() for p in layers),
    }
    return metrics, grads, held


def _worker(cfg_file: Path, out: Path) -> None:
    """One rank: the gradient cases, then the runs (``out/run``, ``out/resumed``, and the
    killed run's copy ``out/partial``)."""
    from distillscope.train.loop import distill

    torch.set_num_threads(1)
    cfg = load_run_config(cfg_file)
    ranks = Ranks.current(cfg)
    assert ranks.fsdp and ranks.world == 2
    held_by_rank = []
    for i, case in enumerate(GRAD_CASES):
        metrics, grads, held = _sharded_update(case, ranks)
        boxes = [None] * ranks.world
        torch.distributed.all_gather_object(boxes, held)
        held_by_rank.append(boxes)
        if ranks.writes:
            save_file(grads, out / f"grad_{i}.safetensors")
            (out / f"metrics_{i}.json").write_text(json.dumps(metrics))
    if ranks.writes:
        (out / "held.json").write_text(json.dumps(held_by_rank))
    student = distill(cfg, out / "run")
    # the run was sharded; rank 0 returns a whole student for the evaluation
    assert isinstance(student.model.layers[0], FSDPModule) == (not ranks.writes)
    try:
        distill(cfg, out / "resumed", on_step=two.killed_after_step_1)
    except KeyboardInterrupt:
        if ranks.writes:  # the parent resumes this copy on one process
            shutil.copytree(out / "resumed", out / "partial")
        torch.distributed.barrier()
        distill(cfg, out / "resumed")


@pytest.mark.slow
def test_fsdp_two_processes_train_as_one(tiny_pair, tmp_path):
    from transformers import AutoModelForCausalLM

    from distillscope.train.loop import distill

    cfg = two._tiny_cfg(tiny_pair)
    out = two.launch_workers(cfg, tmp_path, __file__, fsdp=True)

    held_by_rank = json.loads((out / "held.json").read_text())
    for i, (kind, reduction, accum) in enumerate(GRAD_CASES):
        _, ref_grad = one_update(case_cfg(kind, reduction, 1), Ranks())
        grads = load_file(out / f"grad_{i}.safetensors")
        torch.testing.assert_close(grads["grad"], ref_grad, rtol=0, atol=1e-6)
        assert grads["grad"].abs().max() > 1e-3
        ref_norm = torch.linalg.vector_norm(ref_grad)
        assert float(grads["norm"]) == pytest.approx(float(ref_norm), rel=1e-6)
        assert ref_norm > 10 * CLIP  # the clip acts
        want = ref_grad * (CLIP / (ref_norm + 1e-6))  # torch's clip_grad_norm_ coefficient
        torch.testing.assert_close(grads["clipped"], want, rtol=0, atol=1e-7)
        ref_metrics, _ = one_update(case_cfg(kind, reduction, 2 * accum), Ranks())
        metrics = json.loads((out / f"metrics_{i}.json").read_text())
        assert metrics.keys() == ref_metrics.keys()
        for key, value in ref_metrics.items():
            assert metrics[key] == pytest.approx(value, abs=1e-6), (kind, key)
        for held in held_by_rank[i]:  # each rank holds half of the layers' grads and moments
            assert held["whole"] > 0
            assert held["grad"] == held["moments"] == held["whole"] // 2

    distill(cfg, tmp_path / "one")
    ref = read_metrics(tmp_path / "one")
    assert len((out / "run" / "metrics.jsonl").read_text().splitlines()) == 3
    distill(cfg, out / "partial")  # an FSDP checkpoint resumed on one process
    chain = two.fp32_chain(cfg)  # fp32 training steps (the gradients above are fp64)
    for run in ("run", "resumed", "partial"):
        two._assert_rows_close(read_metrics(out / run), ref, chain)
    ckpt = tmp_path / "one" / "checkpoint"
    ref_params, ref_moments = (load_file(ckpt / f"{f}.safetensors") for f in ("model", "optimizer"))
    for run in ("run", "resumed", "partial"):
        for name, want in (("model", ref_params), ("optimizer", ref_moments)):
            saved = load_file(out / run / "checkpoint" / f"{name}.safetensors")
            assert saved.keys() == want.keys()
            for key, value in want.items():
                torch.testing.assert_close(saved[key], value, **chain_tols(value, *chain))
    exported = AutoModelForCausalLM.from_pretrained(out / "run" / "student").state_dict()
    for name, want in ref_params.items():
        tols = chain_tols(want, *chain)
        torch.testing.assert_close(exported[name].to(want.dtype), want, **tols)


def test_fsdp_refuses_one_process(monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    cfg = load_run_config(None)
    ranks = Ranks.current(cfg)
    assert ranks.fsdp and ranks.world == 1
    with pytest.raises(ConfigError, match="FSDP shards the student over several processes"):
        check_ranks(cfg, ranks)


def test_fsdp_refuses_a_lora_student():
    cfg = load_run_config(None, ["model.lora={r: 4}"])
    with pytest.raises(ConfigError, match="--fsdp shards a full student"):
        check_ranks(cfg, Ranks(0, 2, fsdp=True))
    check_ranks(cfg, Ranks(0, 2))  # without FSDP: allowed


def test_fsdp_needs_every_rank_to_run_every_micro_batch():
    items = ["rollout.prompts_per_step=3", "rollout.rollouts_per_prompt=1", "optim.grad_accum=2"]
    cfg = load_run_config(None, items)
    with pytest.raises(ConfigError, match=r"grad_accum=2 micro-batches, and 3 rows over 2 proc"):
        check_ranks(cfg, Ranks(0, 2, fsdp=True))
    check_ranks(cfg, Ranks(0, 2))  # without FSDP a rank may run fewer micro-batches
    check_ranks(load_run_config(None, [*items[:2], "optim.grad_accum=1"]), Ranks(0, 2, fsdp=True))


def test_fsdp_needs_the_launcher():
    from typer.testing import CliRunner

    from distillscope.cli import app

    res = CliRunner().invoke(app, ["train", "--fsdp"])
    assert res.exit_code == 2
    assert "--fsdp shards the student over several processes: add --launcher accelerate" in (
        res.output
    )


def test_the_fsdp_launch_command_uses_accelerates_flag():
    command = accelerate_command(
        ["train", "c.yaml", "--fsdp", "--launcher", "accelerate"], 2, fsdp=True
    )
    assert "--use_fsdp" in command and "--multi_gpu" not in command
    assert command[command.index("--fsdp_version") + 1] == "2"
    assert command[-4:] == ["-m", "distillscope.cli", "train", "c.yaml"]  # --fsdp dropped


if __name__ == "__main__":  # a worker of test_fsdp_two_processes_train_as_one
    _worker(Path(sys.argv[1]), Path(sys.argv[2]))
