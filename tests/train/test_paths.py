"""The fused path (hidden states, chunk by chunk) against the plain one (logits): same losses,
gradients and diagnostics for every objective kind and every writer of the tokens; no
``[B, T, V]`` tensor on the fused path; diagnostics honest to who wrote the tokens."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from distillscope.objectives import OBJECTIVES

from .conftest import random_rollouts, step_cfg, tiny_llama, train_step

# Rows written by the student (1), the teacher (0) or jointly (−1), as each policy writes them.
WRITERS = {
    "student": [1] * 6,
    "teacher": [0] * 6,
    "mix": [1, 0, 0, 1, 1, 0],
    "spectrum/interleave": [-1] * 6,
}


def _step(models, rollouts, vocab=40, **over):
    student, teacher = models
    student.zero_grad(set_to_none=True)
    row = train_step(step_cfg(**over), rollouts, student, teacher, vocab)
    return row, torch.cat([p.grad.flatten() for p in student.parameters() if p.grad is not None])


#: every kind but the cross-tokenizer ones, whose teacher is its own
#: (tests/teacher/test_cross_tokenizer_run.py compares their two paths)
ONE_TOKENIZER = [name for name, kind in OBJECTIVES.items() if kind.inputs != "cross_tokenizer"]


@pytest.mark.parametrize("writers", WRITERS)
@pytest.mark.parametrize("kind", ONE_TOKENIZER)
def test_fused_path_logs_what_the_plain_path_logs(models_f64, kind, writers):
    rollouts = random_rollouts(6, 40, seed=11, source_B=torch.tensor(WRITERS[writers]))
    over = {"objective.kind": kind}
    if kind == "opd" and writers != "student":
        pytest.skip("opd trains on student rollouts only (a config error otherwise)")
    plain, plain_grad = _step(models_f64, rollouts, **over, **{"objective.path": "plain"})
    fused, fused_grad = _step(models_f64, rollouts, **over, **{"objective.chunk_size": 4})
    assert fused.keys() == plain.keys()
    for key, value in plain.items():
        if not key.startswith("time/"):
            assert fused[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
    torch.testing.assert_close(fused_grad, plain_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("writers", WRITERS)
def test_k_estimators_only_on_the_tokens_of_their_sampling_model(models_f64, writers):
    source_B = torch.tensor(WRITERS[writers])
    row, _ = _step(models_f64, random_rollouts(6, 40, seed=5, source_B=source_B))
    has_student = bool((source_B == 1).any())
    has_teacher = bool((source_B == 0).any())
    assert ("kl/k1" in row) == has_student and ("kl/forward_k1" in row) == has_teacher
    if writers == "mix":  # each family equals its own rows alone
        rollouts = random_rollouts(6, 40, seed=5, source_B=source_B)
        only = rollouts.rows(torch.tensor([0, 3, 4]))
        row_s, _ = _step(models_f64, only)
        assert row["kl/k1"] == pytest.approx(row_s["kl/k1"], abs=1e-6)
        only_t = rollouts.rows(torch.tensor([1, 2, 5]))
        row_t, _ = _step(models_f64, only_t)
        assert row["kl/forward_k3"] == pytest.approx(row_t["kl/forward_k3"], abs=1e-6)


class _LargestVocabTensor(TorchDispatchMode):
    """Records the most rows any tensor with a last dimension of V has (rows = numel / V)."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab, self.rows = vocab, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor) and t.ndim >= 2 and t.shape[-1] == self.vocab:
                self.rows = max(self.rows, t.numel() // self.vocab)
        return out


@pytest.mark.parametrize("kind", ["forward_kl", "opd", "reverse_sampled"])
def test_no_batch_by_vocabulary_tensor_on_the_default_path_above_4096(kind):
    vocab = 5003  # > 4,096: the fused path is the default
    models = tiny_llama(vocab, 8, seed=1, dtype=torch.float32), tiny_llama(vocab, 8, seed=2)
    models = models[0], models[1].float()
    rollouts = random_rollouts(6, vocab, seed=2)
    tokens = int(rollouts.completion_mask_B_T.sum())
    with _LargestVocabTensor(vocab) as fused:
        _step(models, rollouts, vocab, **{"objective.kind": kind, "objective.chunk_size": 3})
    assert 0 < fused.rows <= 8  # a chunk of rows, or the (H, V) transposed head
    with _LargestVocabTensor(vocab) as plain:
        _step(models, rollouts, vocab, **{"objective.kind": kind, "objective.path": "plain"})
    assert plain.rows >= tokens  # the reference path does hold [B, T, V]


def test_memory_budget_sets_the_chunk_and_never_the_result(models_f64):
    rollouts = random_rollouts(8, 40, seed=4)
    rows = []
    for budget in (0.001, 0.01, 256):
        rows.append(_step(models_f64, rollouts, **{"objective.memory_budget_mb": budget})[1])
    for grad in rows[1:]:
        torch.testing.assert_close(grad, rows[0], rtol=1e-6, atol=1e-9)
