"""The batched sampler on two tiny random Llama models (student and teacher), left-padded prompts.

Reference checks: the KV-cache path writes the same tokens as re-running the full sequence each
step; recorded log-probs equal an independent unpadded forward of each row; the policies that
coincide in theory (λ = ±1, mixture p ∈ {0, 1}, interleave k = V) write identical tokens.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tests.numerics import logprob_tol
from transformers import LlamaConfig, LlamaForCausalLM

from distillscope.rollout.policies import (
    SOURCE_STUDENT,
    SOURCE_TEACHER,
    InterleavePolicy,
    MixturePolicy,
    SpectrumPolicy,
    StudentPolicy,
    TeacherPolicy,
)
from distillscope.rollout.rollouts import PromptBatch, Rollouts, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts, score_rollouts
from distillscope.tasks.base import styled
from distillscope.testbed.tokenizer import build_tokenizer

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

VOCAB = 54  # the testbed tokenizer's size
PAD, EOS = 0, 2
MAX_NEW = 16
PROMPTS = ["cd 3,5,7 to 56:", "ab", "sort 3 1 2:", "x", "rev abc:"]


def _tiny_llama(seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
        initializer_range=0.3,  # peaked, distinct distributions rather than near-uniform ones
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # a larger EOS logit spread: some rows end early, others run to the limit
        model.lm_head.weight[EOS] *= 1.5
    return model


@pytest.fixture(scope="module")
def models() -> tuple[LlamaForCausalLM, LlamaForCausalLM]:
    return _tiny_llama(0), _tiny_llama(1)


@pytest.fixture(scope="module")
def prompts() -> dict[str, torch.Tensor]:
    tok = build_tokenizer()
    plain = tok(PROMPTS, return_tensors="pt", padding=True)
    flagged = tok([styled(p) for p in PROMPTS], return_tensors="pt", padding=True)
    return {
        "ids": plain["input_ids"],
        "mask": plain["attention_mask"],
        "teacher_ids": flagged["input_ids"],
        "teacher_mask": flagged["attention_mask"],
    }


def _sample(
    policy, models, prompts, *, seed=0, use_cache=True, teacher_prompt=False, max_new_tokens=MAX_NEW
):
    student, teacher = models
    batch = PromptBatch(prompts["ids"], prompts["mask"])
    if teacher_prompt:
        batch = PromptBatch(
            prompts["ids"], prompts["mask"], prompts["teacher_ids"], prompts["teacher_mask"]
        )
    spec = SamplingSpec(max_new_tokens, stop_ids=EOS, pad_id=PAD, use_cache=use_cache)
    return sample_rollouts(
        policy, student, teacher, batch, spec, torch.Generator().manual_seed(seed)
    )


def _row_logprobs(model, prompt_ids_P, prompt_mask_P, completion_L, temperature) -> torch.Tensor:
    """log π(y_n | h_n) of one row from a forward of its unpadded prompt ⧺ completion."""
    prompt = prompt_ids_P[prompt_mask_P.bool()]
    ids = torch.cat([prompt, completion_L])[None]
    with torch.no_grad():
        logits_S_V = model(input_ids=ids).logits[0]
    logits_L_V = logits_S_V[len(prompt) - 1 : -1]
    logp_L_V = F.log_softmax(logits_L_V.float() / temperature, dim=-1)
    return logp_L_V.gather(-1, completion_L[:, None]).squeeze(-1)


def _assert_layout_consistent(r: Rollouts, max_new: int = MAX_NEW) -> None:
    b, length = r.completion_B_T.shape
    positions_L = torch.arange(length)
    assert torch.equal(r.completion_mask_B_T, (positions_L < r.lengths_B[:, None]).long())
    assert (r.lengths_B[r.truncated_B] == max_new).all()
    for i in range(b):
        n = int(r.lengths_B[i])
        assert (r.completion_B_T[i, n:] == PAD).all()
        ends_with_eos = bool(r.completion_B_T[i, n - 1] == EOS)
        assert ends_with_eos != bool(r.truncated_B[i])
        assert not (r.completion_B_T[i, : n - 1] == EOS).any()
    for logp in (r.logp_student_B_T, r.logp_teacher_B_T, r.logp_behavior_B_T):
        if logp is not None:
            assert (logp[r.completion_mask_B_T == 0] == 0).all()
            assert (logp[r.completion_mask_B_T == 1] <= 0).all()


CACHE_POLICIES = [
    StudentPolicy(),
    TeacherPolicy(),
    SpectrumPolicy(0.5),
    SpectrumPolicy(1.5),
    MixturePolicy(0.5),
    InterleavePolicy(top_k=2),
]


@pytest.mark.parametrize("policy", CACHE_POLICIES, ids=lambda p: p.name)
def test_kv_cache_path_matches_no_cache_reference(policy, models, prompts):
    # Seed 2 gives every policy rows that end early next to rows that keep going.
    cached = _sample(policy, models, prompts, teacher_prompt=True, seed=2)
    plain = _sample(policy, models, prompts, teacher_prompt=True, use_cache=False, seed=2)
    # The batch must exercise early EOS next to rows that keep going (or are truncated).
    assert (~cached.truncated_B & (cached.lengths_B < MAX_NEW)).any()
    assert cached.lengths_B.min() < cached.completion_B_T.shape[1]
    assert torch.equal(cached.completion_B_T, plain.completion_B_T)
    assert torch.equal(cached.completion_mask_B_T, plain.completion_mask_B_T)
    assert torch.equal(cached.truncated_B, plain.truncated_B)
    for name in ("logp_student_B_T", "logp_teacher_B_T", "logp_behavior_B_T"):
        a, b = getattr(cached, name), getattr(plain, name)
        assert (a is None) == (b is None)
        if a is not None:  # the same forward with and without the KV cache: other fp32 orders
            tol = logprob_tol(b, models[0].config)
            torch.testing.assert_close(a, b, atol=tol, rtol=0)
    _assert_layout_consistent(cached)


def test_spectrum_endpoints_sample_exactly_like_the_pure_policies(models, prompts):
    for lam, pure in ((-1.0, TeacherPolicy(temperature=1.0)), (1.0, StudentPolicy(1.0))):
        spectrum = _sample(SpectrumPolicy(lam), models, prompts, seed=3)
        reference = _sample(pure, models, prompts, seed=3)
        assert torch.equal(spectrum.completion_B_T, reference.completion_B_T)
        model = models[0] if lam > 0 else models[1]  # the pure policy's model
        tol = logprob_tol(reference.logp_behavior_B_T, model.config)
        torch.testing.assert_close(
            spectrum.logp_behavior_B_T, reference.logp_behavior_B_T, atol=tol, rtol=0
        )
    assert spectrum.source == "spectrum(lam=1)" and (spectrum.source_B == SOURCE_STUDENT).all()


def test_recorded_logprobs_equal_an_independent_forward(models, prompts):
    student, teacher = models
    policy = SpectrumPolicy(0.3, student_temperature=0.8, teacher_temperature=0.5)
    r = _sample(policy, models, prompts, teacher_prompt=True)
    _assert_layout_consistent(r)
    for i in range(r.batch_size):
        n = int(r.lengths_B[i])
        completion = r.completion_B_T[i, :n]
        want_s = _row_logprobs(student, r.prompt_ids_B_P[i], r.prompt_mask_B_P[i], completion, 0.8)
        t_ids, t_mask = prompts["teacher_ids"][i], prompts["teacher_mask"][i]
        want_t = _row_logprobs(teacher, t_ids, t_mask, completion, 0.5)
        # batched vs one unpadded row: the same fp32 forward in other reduction orders
        tol_s, tol_t = logprob_tol(want_s, student.config), logprob_tol(want_t, teacher.config)
        torch.testing.assert_close(r.logp_student_B_T[i, :n], want_s, atol=tol_s, rtol=0)
        torch.testing.assert_close(r.logp_teacher_B_T[i, :n], want_t, atol=tol_t, rtol=0)
    # The teacher really read its own (flagged) prompt: the plain one gives other numbers.
    assert torch.equal(r.teacher_prompt_ids_B_Q, prompts["teacher_ids"])
    last = r.batch_size - 1
    plain_t = _row_logprobs(
        teacher, r.prompt_ids_B_P[last], r.prompt_mask_B_P[last], completion, 0.5
    )
    assert not torch.allclose(plain_t, r.logp_teacher_B_T[last, :n], atol=1e-3)


def test_only_the_needed_model_runs_and_scoring_fills_the_rest(models, prompts):
    student, teacher = models
    student.train()  # a training loop samples between steps: mode must come back
    r = sample_rollouts(
        StudentPolicy(),
        student,
        None,  # the teacher is not needed for on-policy sampling
        PromptBatch(prompts["ids"], prompts["mask"]),
        SamplingSpec(MAX_NEW, stop_ids=EOS, pad_id=PAD),
        torch.Generator().manual_seed(0),
    )
    assert student.training
    student.eval()
    assert r.logp_teacher_B_T is None and r.logp_student_B_T is not None
    assert r.source == "student" and (r.source_B == SOURCE_STUDENT).all()
    scored = score_rollouts(r, student, teacher, student_temperature=1.0, teacher_temperature=0.5)
    assert scored.logp_student_B_T is r.logp_student_B_T  # recorded values are kept
    for i in range(r.batch_size):
        n = int(r.lengths_B[i])
        want = _row_logprobs(
            teacher, r.prompt_ids_B_P[i], r.prompt_mask_B_P[i], r.completion_B_T[i, :n], 0.5
        )
        tol = logprob_tol(want, teacher.config)  # batched vs one row: other fp32 orders
        torch.testing.assert_close(scored.logp_teacher_B_T[i, :n], want, atol=tol, rtol=0)
    _assert_layout_consistent(scored)
    # Ordinary tensors: usable as constants in a training step's autograd graph.
    assert not any(t.is_inference() for t in (r.completion_B_T, r.logp_behavior_B_T))
    assert not scored.logp_teacher_B_T.is_inference()


def test_mixture_extremes_reduce_to_the_pure_policies(models, prompts):
    for p, pure, code in (
        (0.0, TeacherPolicy(), SOURCE_TEACHER),
        (1.0, StudentPolicy(), SOURCE_STUDENT),
    ):
        mixed = _sample(MixturePolicy(p), models, prompts, seed=5)
        reference = _sample(pure, models, prompts, seed=5)
        assert torch.equal(mixed.completion_B_T, reference.completion_B_T)
        assert (mixed.source_B == code).all()
        assert (mixed.logp_student_B_T is None) == (p == 0.0)


def test_mixture_rows_follow_their_own_writer(models, prompts):
    r = _sample(MixturePolicy(0.5, teacher=TeacherPolicy(0.7)), models, prompts, seed=1)
    assert set(r.source_B.tolist()) == {SOURCE_STUDENT, SOURCE_TEACHER}
    is_student = r.source_B == SOURCE_STUDENT
    # Each row's behaviour log-prob is its writer's log-prob (top-p 1: no renormalisation),
    # from the sampler's forward and the scorer's: one model in two reduction orders
    for rows, logp, model in (
        (is_student, r.logp_student_B_T, models[0]),
        (~is_student, r.logp_teacher_B_T, models[1]),
    ):
        tol = logprob_tol(logp[rows], model.config)
        torch.testing.assert_close(r.logp_behavior_B_T[rows], logp[rows], atol=tol, rtol=0)


def test_interleave_with_full_top_k_is_the_student(models, prompts):
    interleaved = _sample(InterleavePolicy(top_k=VOCAB), models, prompts, seed=2)
    student = _sample(StudentPolicy(), models, prompts, seed=2)
    assert torch.equal(interleaved.completion_B_T, student.completion_B_T)
    assert interleaved.source == f"interleave(k={VOCAB})"


def _full_probs(model, r: Rollouts, role: str, temperature: float) -> torch.Tensor:
    ids_B_S, mask_B_S, pos_B_S = r.sequence(role)
    with torch.no_grad():
        logits = model(input_ids=ids_B_S, attention_mask=mask_B_S, position_ids=pos_B_S).logits
    return F.softmax(logits[:, r.completion_logits_slice(role)].float() / temperature, dim=-1)


def test_interleave_behaviour_probability_is_exact(models, prompts):
    student, teacher = models
    r = _sample(InterleavePolicy(top_k=2), models, prompts, teacher_prompt=True, seed=4)
    _assert_layout_consistent(r)
    p_s_B_T_V = _full_probs(student, r, "student", 1.0)
    p_t_B_T_V = _full_probs(teacher, r, "teacher", 0.5)
    in_top_B_T_V = torch.zeros_like(p_t_B_T_V, dtype=torch.bool)
    in_top_B_T_V.scatter_(-1, p_t_B_T_V.topk(2, dim=-1).indices, True)
    reject_mass_B_T = (p_s_B_T_V * ~in_top_B_T_V).sum(-1)
    y = r.completion_B_T[..., None]
    # ρ(y) = π_S(y)·1[y ∈ top-k_T] + (Σ_{u ∉ top-k_T} π_S(u))·π_T(y)
    want_B_T = (p_s_B_T_V * in_top_B_T_V).gather(-1, y).squeeze(-1)
    want_B_T = want_B_T + reject_mass_B_T * p_t_B_T_V.gather(-1, y).squeeze(-1)
    mask = r.completion_mask_B_T.bool()
    # a probability ≤ 1 moves by at most its log-prob's error (both models' forwards)
    tol = sum(logprob_tol(r.logp_behavior_B_T[mask], m.config) for m in models)
    torch.testing.assert_close(r.logp_behavior_B_T.exp()[mask], want_B_T[mask], atol=tol, rtol=0)
    # Some proposals were replaced (tokens outside the student's nucleus of acceptance exist).
    assert (reject_mass_B_T[mask] > 0.05).any()


def test_same_seed_same_rollouts_and_other_seed_differs(models, prompts):
    policy = MixturePolicy(0.5)
    a = _sample(policy, models, prompts, seed=11)
    b = _sample(policy, models, prompts, seed=11)
    c = _sample(policy, models, prompts, seed=12)
    for name in ("completion_B_T", "source_B", "logp_behavior_B_T", "lengths_B", "truncated_B"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    assert not torch.equal(a.completion_B_T, c.completion_B_T)


def test_top_p_never_samples_outside_the_nucleus(models, prompts):
    student, _ = models
    top_p = 0.6
    r = _sample(StudentPolicy(top_p=top_p), models, prompts, seed=7)
    ids_B_S, mask_B_S, pos_B_S = r.sequence("student")
    with torch.no_grad():
        logits = student(input_ids=ids_B_S, attention_mask=mask_B_S, position_ids=pos_B_S).logits
    probs_B_T_V = F.softmax(logits[:, r.completion_logits_slice("student")].float(), dim=-1)
    p_token_B_T = probs_B_T_V.gather(-1, r.completion_B_T[..., None])
    # A token is in the nucleus iff the mass of strictly more likely tokens is below top_p.
    mass_above_B_T = (probs_B_T_V * (probs_B_T_V > p_token_B_T)).sum(-1)
    assert (mass_above_B_T[r.completion_mask_B_T.bool()] < top_p).all()
    # Behaviour log-prob is renormalised over the nucleus: never below the model's.
    gain = (r.logp_behavior_B_T - r.logp_student_B_T)[r.completion_mask_B_T.bool()]
    assert (gain >= -1e-5).all() and (gain > 1e-3).any()


def test_decoding_stops_once_every_row_has_ended(models, prompts):
    r = _sample(TeacherPolicy(), models, prompts, max_new_tokens=40, seed=2)
    assert not r.truncated_B.any()
    assert r.completion_B_T.shape[1] == int(r.lengths_B.max()) < 40
