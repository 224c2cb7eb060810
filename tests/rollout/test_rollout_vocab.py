"""The sampler on a padded pair: one vocabulary V, several stop ids, last-position logits only.

The padded Qwen2-like pair (tests/conftest.py) has a 3,000-token tokenizer; the teacher's
logits are 3,072 wide, the tied student's 3,008. Their padded head rows are boosted here so
that any policy reading unsliced logits would draw padded ids almost surely.
"""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from tests.numerics import logprob_tol

from distillscope.models.load import load_pair
from distillscope.rollout.policies import (
    InterleavePolicy,
    MixturePolicy,
    SpectrumPolicy,
    StudentPolicy,
    TeacherPolicy,
)
from distillscope.rollout.prompts import PromptEncoder
from distillscope.rollout.rollouts import PromptBatch, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.tasks import resolve_task

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

V = 3000
POLICIES = [
    StudentPolicy(),
    TeacherPolicy(),
    SpectrumPolicy(lam=0.5),
    SpectrumPolicy(lam=1.5),
    SpectrumPolicy(lam=-1.5),
    MixturePolicy(p_student=0.5),
    InterleavePolicy(top_k=3),
]


@pytest.fixture(scope="module")
def pair(padded_qwen_pair):
    pair = load_pair(*padded_qwen_pair)
    with torch.no_grad():
        for model in (pair.student, pair.teacher):
            model.get_output_embeddings().weight[V:] *= 50.0  # padded rows dominate unsliced
    return pair


@pytest.fixture(scope="module")
def prompts(pair):
    task = resolve_task("countdown3", None)
    encoder = PromptEncoder(task, pair.tokenizer, "chat")
    problems = [task.sample(random.Random(i)) for i in range(4)]
    return encoder.encode(problems)


def sample(pair, prompts, policy, seed=0, **kw):
    spec = SamplingSpec(
        **{**dict(max_new_tokens=8, stop_ids=pair.stop_ids, pad_id=0, vocab_size=V), **kw}
    )
    generator = torch.Generator().manual_seed(seed)
    return sample_rollouts(
        policy, pair.student, pair.teacher, PromptBatch(*prompts), spec, generator
    )


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
def test_every_policy_draws_and_scores_only_tokenizer_ids(pair, prompts, policy):
    r = sample(pair, prompts, policy)
    assert int(r.completion_B_T.max()) < V
    # The recorded log-probs are those of the V-sliced tempered distributions.
    for role, model, logp in (
        ("student", pair.student, r.logp_student_B_T),
        ("teacher", pair.teacher, r.logp_teacher_B_T),
    ):
        if logp is None:
            continue
        ids, mask, pos = r.sequence(role)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        temperature = getattr(policy, f"{role}_temperature")
        full = F.log_softmax(logits[:, r.completion_logits_slice(role), :V] / temperature, -1)
        want = full.gather(-1, r.completion_B_T[..., None]).squeeze(-1)
        want = want.masked_fill(r.completion_mask_B_T == 0, 0.0)
        # the sampler's forward and this one: the same fp32 model in other reduction orders
        torch.testing.assert_close(logp, want, atol=logprob_tol(want, model.config), rtol=0)


def test_differing_logit_widths_need_the_vocabulary_size(pair, prompts):
    with pytest.raises(ValueError, match="pass vocab_size=len\\(tokenizer\\)"):
        sample(pair, prompts, SpectrumPolicy(lam=0.5), vocab_size=None)
    with pytest.raises(ValueError, match="the student has 3008 logit columns but vocab_size"):
        sample(pair, prompts, StudentPolicy(), vocab_size=3010)


def test_any_of_several_stop_ids_ends_a_row(pair, prompts):
    # Stop at any of 1,500 ids: rows end early, each at its first stop id.
    stops = list(range(0, V, 2))
    r = sample(pair, prompts, StudentPolicy(), stop_ids=stops, max_new_tokens=12)
    is_stop = torch.isin(r.completion_B_T, torch.tensor(stops)) & (r.completion_mask_B_T == 1)
    for b in range(r.batch_size):
        n = int(r.lengths_B[b])
        assert bool(is_stop[b, n - 1]) != bool(r.truncated_B[b])
        assert not bool(is_stop[b, : n - 1].any())
    assert not bool(r.truncated_B.all())
    one = sample(pair, prompts, StudentPolicy(), stop_ids=2)
    listed = sample(pair, prompts, StudentPolicy(), stop_ids=[2])
    assert torch.equal(one.completion_B_T, listed.completion_B_T)


@pytest.mark.parametrize("policy", POLICIES[:3] + POLICIES[-1:], ids=lambda p: p.name)
def test_draws_do_not_depend_on_how_often_stopping_is_checked(pair, prompts, policy):
    stops = list(range(0, V, 3))
    base = sample(pair, prompts, policy, stop_ids=stops, stop_check_every=1)
    for k in (4, 100):
        other = sample(pair, prompts, policy, stop_ids=stops, stop_check_every=k)
        assert torch.equal(base.completion_B_T, other.completion_B_T)
        assert torch.equal(base.completion_mask_B_T, other.completion_mask_B_T)
        assert torch.equal(base.logp_behavior_B_T, other.logp_behavior_B_T)
    reference = sample(pair, prompts, policy, stop_ids=stops, use_cache=False)
    assert torch.equal(base.completion_B_T, reference.completion_B_T)


def test_the_head_sees_only_the_last_position(pair, prompts):
    widths = []
    head = pair.teacher.get_output_embeddings()
    handle = head.register_forward_hook(lambda m, args, out: widths.append(args[0].shape[1]))
    try:
        sample(pair, prompts, TeacherPolicy(), use_cache=True)
        sample(pair, prompts, TeacherPolicy(), use_cache=False)
    finally:
        handle.remove()
    assert prompts[0].shape[1] > 20 and widths and set(widths) == {1}


def test_each_model_renders_its_own_chat_template(chat_llama_pair):
    pair = load_pair(*chat_llama_pair)
    task = resolve_task("countdown3", None)
    problems = [task.sample(random.Random(0))]
    encoder = PromptEncoder(task, pair.tokenizer, "chat", teacher_tokenizer=pair.teacher_tokenizer)
    assert encoder.teacher_prompt_differs
    student_text = encoder.texts(problems, "student")
    teacher_text = encoder.texts(problems, "teacher")
    assert teacher_text[0] == "<|im_start|>system\nYou are a teacher.<|im_end|>\n" + student_text[0]
    t_ids, _ = encoder.encode(problems, "teacher")
    assert pair.tokenizer.decode(t_ids[0]) == teacher_text[0]
    same = PromptEncoder(task, pair.tokenizer, "chat", teacher_tokenizer=pair.tokenizer)
    assert not same.teacher_prompt_differs
