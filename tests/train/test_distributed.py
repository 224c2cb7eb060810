"""Two processes (gloo on CPU, started by ``accelerate launch``) train as one process does.

The test launches this file as the workers' script. Each worker (1) runs the forward/backward of
fixed fp64 batches on its rank's rows and sums the gradients (train/distributed.py), for every
reduction and kinds with and without the estimators' uniforms; (2) trains the tiny testbed pair
with ``distill`` into one shared run directory, uninterrupted, and once killed after a
checkpoint and resumed. The parent computes the same in one process and compares: gradients,
losses and diagnostics to 1e-6, the run's metrics row by row, the checkpointed parameters, one
``metrics.jsonl`` of N rows, and rank 1's file-system writes (an audit hook) — none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from tests.numerics import approx_tols, chain_tols, model_chain

from distillscope.config import RunConfig, dump_run_config, load_run_config
from distillscope.store import read_metrics
from distillscope.teacher.scorer import TeacherScorer
from distillscope.train.distributed import Ranks, accelerate_command
from distillscope.train.fsdp import is_sharded
from distillscope.train.loop import Learner, StepBatch, forward_backward
from distillscope.train.machinery import PhaseTimer, check_ranks, rank_config
from distillscope.train.step import Objective

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

try:
    from .conftest import random_rollouts, tiny_llama
except ImportError:  # run as the workers' script: tests/train is its sys.path[0]
    from conftest import random_rollouts, tiny_llama

#: (objective.kind, objective.reduction, optim.grad_accum) of the gradient cases
GRAD_CASES = [
    ("forward_kl", "seq_mean", 1),
    ("forward_kl", "token_mean", 2),
    ("reverse_kl", "sum", 1),
    ("opd", "token_mean", 1),
    ("forward_sampled", "seq_mean", 2),
]
BATCH, VOCAB = 7, 40  # 7 rows: the two ranks hold 4 and 3
STEPS = 3


def _case_cfg(kind: str, reduction: str, accum: int) -> RunConfig:
    items = [f"objective.kind={kind}", f"objective.reduction={reduction}"]
    return load_run_config(None, [*items, f"optim.grad_accum={accum}", "objective.path=plain"])


def whole(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, or the whole of an FSDP shard (a collective: every rank calls it)."""
    return tensor.full_tensor() if is_sharded(tensor) else tensor


def one_update(
    cfg: RunConfig, ranks: Ranks, student: torch.nn.Module | None = None
) -> tuple[dict[str, float], torch.Tensor]:
    """The metrics and the summed flat gradient of one forward/backward on the fixed batch, of
    ``student`` (default: the fixed student; test_fsdp.py passes it sharded)."""
    student = student or tiny_llama(VOCAB, 16, seed=1)
    teacher = tiny_llama(VOCAB, 24, seed=2)
    rollouts = random_rollouts(BATCH, VOCAB, seed=5)
    objective = Objective.from_config(cfg.objective, VOCAB)
    batches = ranks.micro_batches(rollouts, cfg.optim.grad_accum)
    scores, _ = TeacherScorer(cfg, teacher, objective).scores(0, None, batches)
    learner = Learner(cfg, objective, student, ranks)
    done = forward_backward(learner, StepBatch(0, rollouts, batches), scores, PhaseTimer())
    ranks.sum_gradients(student)
    return done.metrics, torch.cat([whole(p.grad).flatten() for p in student.parameters()])


def _record_writes(root: Path) -> list[str]:
    """File-system writes under ``root`` from now on, as audit events (opened for writing,
    created, moved, removed)."""
    writes: list[str] = []
    watched = {"os.mkdir", "os.rename", "os.replace", "os.remove", "shutil.rmtree"}

    def hook(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], (str, Path)):
            mode = args[1] if isinstance(args[1], str) else ""
            if any(c in mode for c in "wax+") or (isinstance(args[2], int) and args[2] & 0o3):
                if str(args[0]).startswith(str(root)):
                    writes.append(f"open {args[0]}")
        elif event in watched and any(str(a).startswith(str(root)) for a in args[:2]):
            writes.append(f"{event} {args[0]}")

    sys.addaudithook(hook)
    return writes


def killed_after_step_1(step: int, row: dict) -> None:
    """``distill``'s ``on_step`` that kills the run after step 1 is logged: the step-1
    checkpoint is written after this call, so step 0's is the last."""
    if step == 1:
        raise KeyboardInterrupt


def _worker(cfg_file: Path, out: Path) -> None:
    """One rank: the gradient cases, then the runs (into ``out/run`` and ``out/resumed``)."""
    from distillscope.train import distributed
    from distillscope.train.loop import distill

    torch.set_num_threads(1)
    # buckets of 500 elements: the tiny student's gradients are summed in several buckets, its
    # 640-element embedding alone and in place (a real student's buckets are 2²³ elements)
    distributed.BUCKET_NUMEL = 500
    cfg = load_run_config(cfg_file)
    ranks = Ranks.current(cfg)
    writes = _record_writes(out) if not ranks.writes else None
    for i, case in enumerate(GRAD_CASES):
        metrics, grad = one_update(_case_cfg(*case), ranks)
        if ranks.writes:
            save_file({"grad": grad}, out / f"grad_{i}.safetensors")
            (out / f"metrics_{i}.json").write_text(json.dumps(metrics))
    distill(cfg, out / "run")
    try:
        distill(cfg, out / "resumed", on_step=killed_after_step_1)
    except KeyboardInterrupt:
        distill(cfg, out / "resumed")
    if writes is not None:
        (out.parent / "rank1_writes.json").write_text(json.dumps(writes))


def _tiny_cfg(tiny_pair) -> RunConfig:
    teacher, student = tiny_pair
    items = [f"model.teacher={teacher}", f"model.student={student}", f"optim.steps={STEPS}"]
    items += ["optim.lr=1e-2", "optim.grad_clip=0.5", "rollout.prompts_per_step=3"]
    items += ["rollout.rollouts_per_prompt=2", "task.max_new_tokens=8", "checkpoint_every=1"]
    return load_run_config(None, [*items, "rollout.policy=student", "objective.kind=jsd"])


def _strip_timings(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "perf/"))} for r in rows]


def fp32_chain(cfg: RunConfig) -> tuple[int, ...]:
    """The sums of ``STEPS`` fp32 training steps of ``cfg``'s student (tests/numerics.py): its
    layers, its vocabulary and every position of a step's rows, each step's rounding carried
    into the next; two processes sum the same terms in another order."""
    from transformers import AutoConfig

    model = AutoConfig.from_pretrained(cfg.model.student)
    rows = cfg.rollout.prompts_per_step * cfg.rollout.rollouts_per_prompt
    return model_chain(model, rows * model.max_position_embeddings, STEPS)


def _assert_rows_close(rows: list[dict], ref: list[dict], chain: tuple[int, ...]) -> None:
    assert len(rows) == len(ref)
    for row, want in zip(_strip_timings(rows), _strip_timings(ref), strict=True):
        assert row.keys() == want.keys()
        for key, value in want.items():
            tols = approx_tols(value, *chain)
            assert row[key] == pytest.approx(value, **tols), (row["step"], key)


def launch_workers(cfg: RunConfig, tmp_path: Path, script: str, fsdp: bool = False) -> Path:
    """Two processes of ``script`` (``python script CONFIG OUT``) through ``accelerate launch``,
    ``cfg`` written to ``tmp_path``; returns OUT (``tmp_path/two``) once both have succeeded."""
    cfg_file = tmp_path / "run.yaml"
    cfg_file.write_text(dump_run_config(cfg))
    out = tmp_path / "two"
    out.mkdir()
    command = accelerate_command([str(cfg_file), str(out)], 2, program=[script], fsdp=fsdp)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.slow
def test_two_processes_train_as_one(tiny_pair, tmp_path):
    from distillscope.train.loop import distill

    cfg = _tiny_cfg(tiny_pair)
    out = launch_workers(cfg, tmp_path, __file__)

    for i, (kind, reduction, accum) in enumerate(GRAD_CASES):  # one update's gradient, metrics
        _, ref_grad = one_update(_case_cfg(kind, reduction, 1), Ranks())
        grad = load_file(out / f"grad_{i}.safetensors")["grad"]
        torch.testing.assert_close(grad, ref_grad, rtol=0, atol=1e-6)
        assert grad.abs().max() > 1e-3  # a real gradient, not an empty one
        # the same micro-batches in one process: a micro-batch statistic (OPD's advantage
        # std) is combined across ranks as across micro-batches (metric_keys)
        ref_metrics, _ = one_update(_case_cfg(kind, reduction, 2 * accum), Ranks())
        metrics = json.loads((out / f"metrics_{i}.json").read_text())
        assert metrics.keys() == ref_metrics.keys()
        for key, value in ref_metrics.items():
            assert metrics[key] == pytest.approx(value, abs=1e-6), (kind, key)

    distill(cfg, tmp_path / "one")
    ref = read_metrics(tmp_path / "one")
    lines = (out / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == STEPS  # one writer: one row per step
    chain = fp32_chain(cfg)
    _assert_rows_close(read_metrics(out / "run"), ref, chain)
    _assert_rows_close(read_metrics(out / "resumed"), ref, chain)
    ref_params = load_file(tmp_path / "one" / "checkpoint" / "model.safetensors")
    for run in ("run", "resumed"):
        params = load_file(out / run / "checkpoint" / "model.safetensors")
        for name, want in ref_params.items():
            torch.testing.assert_close(params[name], want, **chain_tols(want, *chain))
    assert json.loads((tmp_path / "rank1_writes.json").read_text()) == []


def test_the_batch_must_cover_every_rank():
    cfg = load_run_config(None, ["rollout.prompts_per_step=1"])
    with pytest.raises(ValueError, match=r"1 rows cannot be split over 2 processes"):
        check_ranks(cfg, Ranks(0, 2))


def test_vllm_rollouts_refuse_several_processes():
    cfg = load_run_config(None, ["rollout.engine=vllm"])
    with pytest.raises(ValueError, match="rollout.engine 'vllm' runs on one process"):
        check_ranks(cfg, Ranks(0, 2))
    check_ranks(cfg, Ranks())  # one process: allowed


def test_only_rank_0_profiles_and_tracks():
    cfg = load_run_config(None, ["eval.profile_steps=[0,2]", "log.trackers=[tensorboard]"])
    first, second = rank_config(cfg, Ranks(0, 2)), rank_config(cfg, Ranks(1, 2))
    assert first.eval.profile_steps == [0, 2] and first.log.trackers == ["tensorboard"]
    assert second.eval.profile_steps == [] and second.log is None
    assert second.model == cfg.model and second.optim == cfg.optim  # on CPU: nothing else moves


def test_the_launch_command_drops_the_launcher_options():
    command = accelerate_command(
        ["train", "c.yaml", "--launcher", "accelerate", "--num-processes=3", "--out", "r"], 3
    )
    assert command[command.index("--num_processes") + 1] == "3"
    assert command[-6:] == ["-m", "distillscope.cli", "train", "c.yaml", "--out", "r"]
    assert command[command.index("--main_process_ip") + 1] == "127.0.0.1"
    with pytest.raises(ValueError, match="--num-processes must be at least 2"):
        accelerate_command(["train"], 1)


def test_an_unknown_launcher_is_one_line():
    from typer.testing import CliRunner

    from distillscope.cli import app

    res = CliRunner().invoke(app, ["train", "--launcher", "slurm"])
    assert res.exit_code == 2
    assert "--launcher must be none or accelerate, got 'slurm'" in res.output


def test_an_rlvr_run_refuses_several_processes(tmp_path, monkeypatch):
    from distillscope.study.run_one import run_one

    monkeypatch.setattr(Ranks, "current", classmethod(lambda cls, cfg: cls(0, 2)))
    cfg = load_run_config(None, ["rlvr.parent=r0"])
    with pytest.raises(ValueError, match="an rlvr run trains on one process"):
        run_one(cfg, tmp_path)


if __name__ == "__main__":  # a worker of test_two_processes_train_as_one
    _worker(Path(sys.argv[1]), Path(sys.argv[2]))


def test_gradients_are_summed_in_buckets_in_order_a_large_one_alone():
    from distillscope.train.distributed import _buckets

    sizes = [3, 4, 9, 2, 2, 1, 5]
    params = [torch.nn.Parameter(torch.zeros(n)) for n in sizes]
    buckets = [[int(p.numel()) for p in b] for b in _buckets(params, 8)]
    assert buckets == [[3, 4], [9], [2, 2, 1], [5]]  # ≤ 8 elements each, 9 alone
    assert [p for b in _buckets(params, 8) for p in b] == params
