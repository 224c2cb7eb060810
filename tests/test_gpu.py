"""Train, evaluate and run a two-run study on CUDA (``-m gpu``; skipped without a CUDA device).

python -m pytest -m gpu tests/test_gpu.py -rs     # bench/gpu_check.sh runs this
"""

import pytest
import torch

from distillscope.config import apply_overrides, run_config_from_dict
from distillscope.eval.evaluate import evaluate
from distillscope.store import read_metrics, read_status
from distillscope.study.run_study import run_study
from distillscope.study.spec import StudySpec
from distillscope.train.loop import distill

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: GPU tests skipped"),
]
TEACHER_DEVICE = "cuda:1" if torch.cuda.device_count() > 1 else "cuda:0"


def gpu_base(tiny_pair) -> dict:
    teacher, student = tiny_pair
    return {
        "model": {
            "teacher": str(teacher),
            "student": str(student),
            "device": "cuda:0",
            "teacher_device": TEACHER_DEVICE,
        },
        "task": {"max_new_tokens": 6},
        "rollout": {"prompts_per_step": 4},
        "optim": {"steps": 2, "warmup_steps": 1, "lr": 1e-3},
        "eval": {
            "items": 4,
            "coverage_items": 2,
            "coverage_samples": 2,
            "skill_items": 2,
            "harder_task": None,
            "samples_per_block": 2,
        },
    }


@pytest.mark.parametrize("policy,kind", [("student", "forward_kl"), ("teacher", "reverse_kl")])
def test_train_and_eval_on_cuda(tiny_pair, tmp_path, policy, kind):
    chosen = [f"rollout.policy={policy}", f"objective.kind={kind}"]
    cfg = run_config_from_dict(apply_overrides(gpu_base(tiny_pair), chosen))
    student = distill(cfg, tmp_path)
    assert next(student.parameters()).device.type == "cuda"
    rows = read_metrics(tmp_path)
    assert len(rows) == 2 and all(r["train/grad_norm"] > 0 for r in rows)
    metrics = evaluate(cfg, tmp_path, student)
    assert 0.0 <= metrics["eval/accuracy"] <= 1.0
    assert (tmp_path / "samples.jsonl").read_text()
    assert (tmp_path / "student" / "model.safetensors").is_file()


def test_two_run_study_on_cuda(tiny_pair, tmp_path):
    spec = StudySpec.model_validate(
        {
            "name": "gpu",
            "base": gpu_base(tiny_pair),
            "experiments": [{"name": "main", "axes": {"rollout.policy": ["student", "teacher"]}}],
        }
    )
    run_study(spec, tmp_path)
    statuses = [read_status(p)["status"] for p in (tmp_path / "runs").iterdir()]
    assert statuses == ["done", "done"]


def test_top_k_teacher_on_cuda_fused_equals_plain(tiny_pair, tmp_path):
    """The folded objective from hidden states (chunked) equals the one from logits on CUDA."""
    losses = []
    for chunk_size in (0, 3):
        chosen = ["objective.teacher_topk=5", f"objective.chunk_size={chunk_size}", "optim.steps=1"]
        cfg = run_config_from_dict(apply_overrides(gpu_base(tiny_pair), chosen))
        distill(cfg, tmp_path / str(chunk_size))
        (row,) = read_metrics(tmp_path / str(chunk_size))
        losses.append((row["train/loss"], row["objective/teacher_topk_mass"], row["kl/k1"]))
    assert losses[1] == pytest.approx(losses[0], rel=1e-4, abs=1e-6)
