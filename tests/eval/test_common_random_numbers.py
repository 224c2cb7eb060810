"""Common random numbers: every run of one seed draws the same evaluation uniforms, whatever its
weights; two seeds draw different ones (docs/outputs.md, "Evaluation samples")."""

import copy

import pytest
import torch

import distillscope.eval.generate as generate
from distillscope.config import load_run_config
from distillscope.eval.evaluate import evaluate
from distillscope.eval.generate import skip_unused_draws
from distillscope.models import resolve_model_path
from distillscope.models.load import load_model
from distillscope.rollout.policies import StudentPolicy
from distillscope.rollout.rollouts import PromptBatch, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts

MAX_NEW = 24  # the testbed's answer length in the quick preset
SAMPLE_ROLLOUTS = generate.sample_rollouts


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, CUDA])])
def test_a_batch_that_runs_to_the_limit_is_left_where_the_skip_leaves_it(tiny_pair, device):
    """The sampler draws one float64 uniform per row per step and nothing else: the assumption
    behind :func:`skip_unused_draws` (a sampler that draws otherwise fails here). On CUDA the
    sampler checks for the end every 8 steps; Philox advances by call, so the replay must
    repeat the sampler's calls shape for shape."""
    _, student_dir = tiny_pair
    model, _ = load_model(student_dir)
    model = model.to(device)
    ids = torch.randint(3, 20, (5, 4), device=device)
    spec = SamplingSpec(max_new_tokens=7, stop_ids=10_000, pad_id=0)  # no row ever stops
    prompts = PromptBatch(ids, torch.ones_like(ids))
    ran = torch.Generator(device).manual_seed(3)
    start = ran.get_state()
    sample_rollouts(StudentPolicy(1.0), model, None, prompts, spec, ran)
    skipped = torch.Generator(device).manual_seed(3)
    skip_unused_draws(skipped, start, rows=5, max_new_tokens=7)
    assert torch.equal(ran.get_state(), skipped.get_state())
    assert not torch.equal(start, skipped.get_state())


def _batch_starts(monkeypatch, cfg, student, tmp_path) -> tuple[list, list]:
    """Generator state at the start of every evaluation batch, and each batch's decoded width."""
    states, widths = [], []

    def recording(policy, model, teacher, prompts, spec, generator):
        states.append(generator.get_state().clone())
        r = SAMPLE_ROLLOUTS(policy, model, teacher, prompts, spec, generator)
        widths.append(r.completion_B_T.shape[1])
        return r

    monkeypatch.setattr(generate, "sample_rollouts", recording)
    monkeypatch.setattr(generate, "MAX_EVAL_BATCH", 4)  # several batches per block
    evaluate(cfg, tmp_path, student=student)
    return states, widths


@pytest.fixture(scope="module")
def students():
    """The shipped testbed student and a differently "trained" copy (its weights perturbed)."""
    base, _ = load_model(resolve_model_path("testbed:student"))
    other = copy.deepcopy(base)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.05 * p.std() * torch.randn(p.shape, generator=g))
    return base.eval(), other.eval()


def _cfg(seed: int):
    return load_run_config(
        None,
        [
            f"seed={seed}",
            f"task.max_new_tokens={MAX_NEW}",
            "eval.items=6",
            "eval.samples_per_item=2",
            "eval.coverage_items=2",
            "eval.coverage_samples=3",
            "eval.harder_samples_per_item=2",
            "eval.skill_items=3",
            "eval.skill_samples_per_item=2",
        ],
    )


def test_cells_of_one_seed_draw_the_same_uniforms_and_seeds_differ(students, monkeypatch, tmp_path):
    base, other = students
    a, widths_a = _batch_starts(monkeypatch, _cfg(42), base, tmp_path / "a")
    b, widths_b = _batch_starts(monkeypatch, _cfg(42), other, tmp_path / "b")
    c, _ = _batch_starts(monkeypatch, _cfg(43), base, tmp_path / "c")
    # the two students stopped at different steps, some batches before the limit: without the
    # skip, the next batch of the block (and the next skill) would start elsewhere
    assert widths_a != widths_b and min(widths_a + widths_b) < MAX_NEW
    assert len(a) == len(b) == len(c) > 10
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not any(torch.equal(x, z) for x, z in zip(a, c, strict=True))
