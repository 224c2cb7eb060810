"""The λ-spectrum's ends (docs/method.md §3): the two `rollout.spectrum_temperatures`.

With ``policies`` temperatures each model samples at its pure policy's temperature, so λ = −1
draws exactly the OffPD tokens (teacher at ``rollout.teacher_temperature``) and λ = +1 exactly the
OnPD ones, seed for seed: z_λ at λ = ±1 is ℓ_T or ℓ_S bit for bit, and every policy draws one
uniform per row per step. With ``paper`` temperatures (the default, [P]) both models sample at the
student's temperature (1.0), as before: λ = −1 is the teacher at T = 1.0.
"""

from __future__ import annotations

import hashlib

import pytest
import torch

from distillscope import testbed
from distillscope.config import RolloutConfig, load_run_config
from distillscope.models.load import load_pair
from distillscope.rollout.policies import SOURCE_STUDENT, SOURCE_TEACHER, SpectrumPolicy
from distillscope.rollout.rollouts import PromptBatch, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.store import read_metrics
from distillscope.tasks.base import styled
from distillscope.testbed.tokenizer import build_tokenizer
from distillscope.train.loop import distill
from distillscope.train.setup import make_policy

PROMPTS = ["cd 3,5,7 to 56:", "sort 3 1 2:", "rev abc:", "cd 1,2,3 to 6:", "cp 4,4:"]
MAX_NEW = 24


@pytest.fixture(scope="module", params=["testbed", "tiny"])
def pair(request):
    """(student, teacher) of the shipped testbed, and of tests/conftest.py's tiny random pair."""
    if request.param == "testbed":
        teacher, student = testbed.testbed_path("teacher"), testbed.testbed_path("student")
    else:
        teacher, student = request.getfixturevalue("tiny_pair")
    models = load_pair(teacher, student)
    return models.student, models.teacher


@pytest.fixture(scope="module")
def prompts() -> PromptBatch:
    tok = build_tokenizer()
    plain = tok(PROMPTS, return_tensors="pt", padding=True)
    flagged = tok([styled(p) for p in PROMPTS], return_tensors="pt", padding=True)
    return PromptBatch(
        plain["input_ids"],
        plain["attention_mask"],
        flagged["input_ids"],
        flagged["attention_mask"],
    )


def _sample(cfg: RolloutConfig, pair, prompts: PromptBatch, seed: int):
    tok = build_tokenizer()
    spec = SamplingSpec(MAX_NEW, stop_ids=tok.eos_token_id, pad_id=tok.pad_token_id)
    student, teacher = pair
    generator = torch.Generator().manual_seed(seed)
    return sample_rollouts(make_policy(cfg), student, teacher, prompts, spec, generator)


def _assert_same_draws(a, b, role: str) -> None:
    assert torch.equal(a.completion_B_T, b.completion_B_T)
    assert torch.equal(a.completion_mask_B_T, b.completion_mask_B_T)
    assert torch.equal(a.truncated_B, b.truncated_B)
    assert torch.equal(a.source_B, b.source_B)
    assert torch.equal(a.logp_behavior_B_T, b.logp_behavior_B_T)
    # The writer's own log-probs, at its sampling temperature, are recorded by both.
    assert torch.equal(getattr(a, f"logp_{role}_B_T"), getattr(b, f"logp_{role}_B_T"))


SETTINGS = [
    {},  # the defaults: OnPD at 1.0, OffPD at 0.5
    {"student_temperature": 0.8, "teacher_temperature": 0.7, "top_p": 0.9},
]


@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("settings", SETTINGS, ids=["defaults", "tempered-top-p"])
def test_policies_temperatures_make_the_ends_the_pure_policies(pair, prompts, settings, seed):
    spectrum = dict(settings, policy="spectrum", spectrum_temperatures="policies")
    offpd = _sample(RolloutConfig(policy="teacher", **settings), pair, prompts, seed)
    onpd_settings = {k: v for k, v in settings.items() if k != "teacher_temperature"}
    onpd = _sample(RolloutConfig(policy="student", **onpd_settings), pair, prompts, seed)
    at_teacher = _sample(RolloutConfig(lam=-1.0, **spectrum), pair, prompts, seed)
    at_student = _sample(RolloutConfig(lam=1.0, **spectrum), pair, prompts, seed)
    _assert_same_draws(at_teacher, offpd, "teacher")
    _assert_same_draws(at_student, onpd, "student")
    assert (at_teacher.source_B == SOURCE_TEACHER).all()
    assert (at_student.source_B == SOURCE_STUDENT).all()
    # The two pure policies differ, so the equalities above are not vacuous.
    assert not torch.equal(offpd.completion_B_T, onpd.completion_B_T)


def test_paper_temperatures_make_the_teacher_end_the_teacher_at_one(pair, prompts):
    # [P]'s spectrum: λ = −1 is the teacher at T = 1.0, not the OffPD cell (teacher at 0.5).
    paper = RolloutConfig(policy="spectrum", lam=-1.0)
    assert make_policy(paper) == make_policy(
        RolloutConfig(policy="spectrum", lam=-1.0, spectrum_temperatures="paper")
    )
    at_teacher = _sample(paper, pair, prompts, seed=3)
    at_one = _sample(RolloutConfig(policy="teacher", teacher_temperature=1.0), pair, prompts, 3)
    offpd = _sample(RolloutConfig(policy="teacher"), pair, prompts, seed=3)
    _assert_same_draws(at_teacher, at_one, "teacher")
    assert not torch.equal(at_teacher.logp_behavior_B_T, offpd.logp_behavior_B_T)
    at_student = _sample(RolloutConfig(policy="spectrum", lam=1.0), pair, prompts, seed=3)
    _assert_same_draws(at_student, _sample(RolloutConfig(), pair, prompts, 3), "student")


def test_paper_is_the_policy_built_before_the_option_existed():
    # Today's `paper` construction, field for field: both models at the student temperature.
    for lam in (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5):
        cfg = RolloutConfig(policy="spectrum", lam=lam, student_temperature=0.9, top_p=0.95)
        want = SpectrumPolicy(lam, student_temperature=0.9, teacher_temperature=0.9, top_p=0.95)
        assert make_policy(cfg) == want


#: sha256 of the completion tokens of the tiny pair at λ = 0.5, seed 11, `paper` temperatures,
#: recorded with the sampler as it was before `rollout.spectrum_temperatures` existed.
PAPER_INTERIOR_DIGEST = "55ae230ff3a12daabb815416afd00796ac5361b285833cfa60ec96a1e2a24c27"


def test_paper_interior_tokens_are_unchanged(tiny_pair, prompts):
    teacher, student = tiny_pair
    models = load_pair(teacher, student)
    cfg = RolloutConfig(policy="spectrum", lam=0.5)
    r = _sample(cfg, (models.student, models.teacher), prompts, seed=11)
    digest = hashlib.sha256(r.completion_B_T.numpy().tobytes()).hexdigest()
    assert digest == PAPER_INTERIOR_DIGEST


@pytest.mark.parametrize("lam", [-0.5, 0.0, 0.5])
def test_policies_temperatures_change_the_interior(pair, prompts, lam):
    # Between the ends the temperatures shape π_λ: `policies` is a different spectrum.
    paper = _sample(RolloutConfig(policy="spectrum", lam=lam), pair, prompts, seed=2)
    cfg = RolloutConfig(policy="spectrum", lam=lam, spectrum_temperatures="policies")
    policies = _sample(cfg, pair, prompts, seed=2)
    assert not torch.equal(paper.logp_behavior_B_T, policies.logp_behavior_B_T)


def test_policies_spectrum_at_minus_one_trains_like_offpd(tiny_pair, tmp_path):
    # The whole run, not only one batch: every step's rollouts come from the step's own
    # generator, whatever the policy, so λ = −1 at `policies` temperatures is the OffPD run
    # (and at `paper` temperatures, the teacher at T = 1.0, is not).
    teacher, student = tiny_pair
    base = [
        f"model.teacher={teacher}",
        f"model.student={student}",
        "optim.steps=3",
        "optim.warmup_steps=1",
        "optim.lr=1e-3",
        "rollout.prompts_per_step=4",
        "task.max_new_tokens=8",
        "eval.items=4",
        "eval.coverage_items=2",
        "eval.coverage_samples=3",
        "eval.skill_items=2",
    ]
    offpd = ["rollout.policy=teacher"]
    spectrum = [
        "rollout.policy=spectrum",
        "rollout.lam=-1",
        "rollout.spectrum_temperatures=policies",
    ]
    paper = ["rollout.policy=spectrum", "rollout.lam=-1"]
    runs = {"offpd": offpd, "spectrum": spectrum, "paper": paper}
    keys = ("train/loss", "train/grad_norm", "rollout/len_mean", "rollout/reward")
    got = {}
    for name, over in runs.items():
        distill(load_run_config(None, base + over), tmp_path / name)
        got[name] = [[r[k] for k in keys] for r in read_metrics(tmp_path / name)]
    assert got["spectrum"] == got["offpd"]
    assert got["paper"] != got["offpd"]
