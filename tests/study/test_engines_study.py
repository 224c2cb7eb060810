"""One study with every real-scale engine at once, each the real one, on CPU
(configs/studies/testbed-engines.yaml): vLLM rollouts of a LoRA student, its merged weights
pushed before each batch; the testbed teacher served over HTTP by ``serve-teacher`` (top-16
log-probs + tail); TensorBoard beside ``metrics.jsonl``.

Marked ``vllm`` (``make test-vllm`` runs it in ``.venv-vllm``, which has the lora and
tensorboard extras); skipped with the reason elsewhere. References: the shipped testbed
student's weights (what LoRA may move), each run's own ``metrics.jsonl`` (what TensorBoard
holds), the engine's gap to the trainer's log-probs (what a stale push would break).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from tests.conftest import served_teacher
from tests.rollout.test_vllm_engine import needs_vllm
from tests.train.conftest import tensorboard_rows

from distillscope.models.locate import resolve_model_path
from distillscope.results.aggregate import with_labels
from distillscope.store import read_metrics
from distillscope.study.run_study import run_study
from distillscope.study.spec import load_spec

SPEC = Path(__file__).resolve().parents[2] / "configs" / "studies" / "testbed-engines.yaml"
STEPS = 3


@pytest.fixture()
def teacher_url():
    """The testbed teacher served on a free port of 127.0.0.1, stopped after the test."""
    with served_teacher(resolve_model_path("testbed:teacher"), topk_max=54) as url:
        yield url


@needs_vllm
def test_vllm_lora_a_served_teacher_and_tensorboard_run_one_study(teacher_url, tmp_path):
    pytest.importorskip("peft")
    pytest.importorskip("tensorboard")
    spec = load_spec(SPEC, [f"model.teacher={teacher_url}", f"optim.steps={STEPS}"])
    out = tmp_path / "study"
    table = pd.read_parquet(run_study(spec, out))
    assert list(table.status) == ["done"] * 3  # two runs and the baseline
    runs = with_labels(table[table.experiment == "main"])
    assert sorted(runs["_kl"]) == ["forward KL (top-16 teacher)", "reverse KL (top-16 teacher)"]
    assert set(runs["rollout.engine"]) == {"vllm"}
    shipped = load_file(resolve_model_path("testbed:student") / "model.safetensors")
    for run_id in runs.run_id:
        run = out / "runs" / run_id
        rows = read_metrics(run)
        assert [r["step"] for r in rows] == list(range(STEPS))
        for row in rows:  # every step sampled the adapters as trained so far
            assert 0 <= row["rollout/engine_logprob_gap"] < 1e-4
            assert row["train/grad_norm"] > 0
        # LoRA: student/ is the merged model, and only the adapted projections moved
        exported = load_file(run / "student" / "model.safetensors")
        moved = {k for k, v in exported.items() if not torch.equal(v, shipped[k])}
        assert moved and all(k.endswith(("q_proj.weight", "v_proj.weight")) for k in moved)
        # TensorBoard: one log directory per run, the rows metrics.jsonl holds
        board = tensorboard_rows(out / "tensorboard" / run_id)
        logged = {step: row["train/loss"] for step, row in board.items()}
        assert logged == pytest.approx({r["step"]: r["train/loss"] for r in rows}, rel=1e-6)
