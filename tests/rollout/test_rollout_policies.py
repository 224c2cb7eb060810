"""Policy draws on crafted distributions: top-p nucleus, interleaving's exact behaviour prob."""

from __future__ import annotations

import math

import pytest
import torch
from tests.numerics import chain_tols

from distillscope.rollout.policies import (
    InterleavePolicy,
    MixturePolicy,
    SpectrumPolicy,
    StudentPolicy,
    TeacherPolicy,
    behavior_logprobs,
    sample_token,
)

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

P = torch.tensor([0.5, 0.3, 0.15, 0.05])


def test_top_p_one_is_a_no_op():
    logp = torch.log_softmax(torch.randn(3, 9, generator=torch.Generator().manual_seed(0)), -1)
    assert torch.equal(behavior_logprobs(logp, 1.0), torch.log_softmax(logp, -1))


def test_top_p_keeps_the_smallest_set_reaching_the_mass_and_renormalises():
    # Sorted masses before each token: 0, 0.5, 0.8, 0.95 -> top_p = 0.7 keeps tokens 0 and 1.
    logp_V = behavior_logprobs(P.log()[None], 0.7)[0]
    torch.testing.assert_close(logp_V.exp(), torch.tensor([0.625, 0.375, 0.0, 0.0]))
    # The top token survives any top_p > 0.
    assert torch.equal(
        behavior_logprobs(P.log()[None], 0.01)[0].exp(), torch.tensor([1.0, 0, 0, 0])
    )


def test_top_p_draws_never_leave_the_nucleus():
    # Shuffled order, so the filter must map sorted positions back to token ids.
    probs_V = torch.tensor([0.05, 0.3, 0.15, 0.5])
    logp_N_V = behavior_logprobs(probs_V.log().expand(20_000, 4), 0.7)
    tokens_N, logp_N = sample_token(logp_N_V, torch.Generator().manual_seed(0))
    assert set(tokens_N.tolist()) == {1, 3}
    assert abs((tokens_N == 3).double().mean().item() - 0.625) < 0.015
    torch.testing.assert_close(
        logp_N[tokens_N == 1], torch.full_like(logp_N[tokens_N == 1], math.log(0.375))
    )


def test_interleave_empirical_frequencies_match_the_behaviour_probability():
    # Student proposal p_S, teacher p_T; teacher top-2 = {0, 3}. Proposals 1, 2 are replaced.
    logp_s = torch.tensor([0.4, 0.3, 0.2, 0.1]).log().expand(40_000, 4)
    logp_t = torch.tensor([0.5, 0.1, 0.1, 0.3]).log().expand(40_000, 4)
    policy = InterleavePolicy(top_k=2)
    active = torch.ones(40_000, dtype=torch.bool)
    g = torch.Generator().manual_seed(1)
    tokens, logp_behavior = policy.draw(logp_s, logp_t, None, active, g)
    # ρ = p_S·1[top-2] + 0.5·p_T: [0.4 + 0.25, 0.05, 0.05, 0.1 + 0.15]
    want = torch.tensor([0.65, 0.05, 0.05, 0.25])
    freq = torch.bincount(tokens, minlength=4).double() / len(tokens)
    torch.testing.assert_close(freq, want.double(), atol=0.01, rtol=0)
    # ρ from four fp32 probabilities: sums of ≤ 4 terms of size ≤ 1
    torch.testing.assert_close(logp_behavior.exp(), want[tokens], **chain_tols(1.0, 4, 4))


def test_interleave_finished_rows_never_trigger_teacher_draws():
    # All proposals land outside top-1, but no row is active: the generator is not touched again.
    logp_s = torch.tensor([0.0, 1.0]).log().expand(4, 2)
    logp_t = torch.tensor([0.9, 0.1]).log().expand(4, 2)
    g = torch.Generator().manual_seed(0)
    InterleavePolicy(top_k=1).draw(logp_s, logp_t, None, torch.zeros(4, dtype=torch.bool), g)
    reference = torch.Generator().manual_seed(0)
    sample_token(logp_s, reference)
    assert torch.equal(g.get_state(), reference.get_state())


@pytest.mark.parametrize(
    "make",
    [
        lambda: StudentPolicy(temperature=0.0),
        lambda: TeacherPolicy(top_p=0.0),
        lambda: TeacherPolicy(top_p=1.5),
        lambda: SpectrumPolicy(2.0, alpha=0.0),
        lambda: SpectrumPolicy(float("nan")),
        lambda: MixturePolicy(1.2),
        lambda: InterleavePolicy(top_k=0),
    ],
)
def test_invalid_settings_are_rejected(make):
    with pytest.raises(ValueError):
        make()


def test_names_and_temperatures():
    assert SpectrumPolicy(-0.5).name == "spectrum(lam=-0.5)"
    assert MixturePolicy(0.25).name == "mix(p=0.25)"
    assert InterleavePolicy().name == "interleave(k=5)"
    assert (StudentPolicy().student_temperature, StudentPolicy().teacher_temperature) == (1.0, None)
    assert (TeacherPolicy().student_temperature, TeacherPolicy().teacher_temperature) == (None, 0.5)
    assert (InterleavePolicy().student_temperature, InterleavePolicy().teacher_temperature) == (
        1.0,
        0.5,
    )
