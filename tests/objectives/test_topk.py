"""The top-k teacher: folded distributions, a lower bound of the full divergence, and the fused
student path against autograd."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from distillscope.objectives import OBJECTIVES, ChunkSpec
from distillscope.objectives.divergences import DIVERGENCES, divergence_loss, tempered_log_softmax
from distillscope.objectives.topk import (
    check_topk,
    fold,
    student_folded_from_hidden,
    student_folded_from_logits,
    teacher_topk_from_hidden,
    teacher_topk_from_logits,
)


def token_divergence(logp_student, logp_teacher, name):
    return DIVERGENCES[name].tokens(logp_student, logp_teacher)


def _logits(shape, seed, scale=3.0, dtype=torch.float64):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype) * scale


def test_fold_keeps_the_top_k_and_the_tail_of_an_independent_reference():
    logits_B_T_V = _logits((2, 3, 11), 0)
    ids, folded = teacher_topk_from_logits(logits_B_T_V, 4, temperature=0.5)
    p_B_T_V = torch.distributions.Categorical(logits=logits_B_T_V / 0.5).probs
    top = p_B_T_V.sort(dim=-1, descending=True)
    assert torch.equal(ids, top.indices[..., :4])
    torch.testing.assert_close(folded[..., :4].exp(), top.values[..., :4])
    torch.testing.assert_close(folded[..., 4].exp(), top.values[..., 4:].sum(-1))
    torch.testing.assert_close(folded.exp().sum(-1), torch.ones(2, 3, dtype=torch.float64))


def test_tiny_tails_keep_their_digits():
    logits = torch.tensor([[0.0, 1.0, -80.0, -90.0]], dtype=torch.float32)
    _, folded = teacher_topk_from_logits(logits, 2, temperature=1.0)
    expected = torch.logsumexp(torch.log_softmax(logits, -1)[:, 2:], -1)  # ≈ −81.3, not −inf
    torch.testing.assert_close(folded[:, 2], expected)


def test_padded_vocabulary_columns_are_never_chosen():
    logits = _logits((5, 12), 1)
    logits[:, 10:] = 100.0  # padded embedding rows beyond the tokenizer's 10 tokens
    ids, _ = teacher_topk_from_logits(logits, 3, 1.0, vocab_size=10)
    assert int(ids.max()) < 10


@pytest.mark.parametrize("divergence", list(DIVERGENCES))
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 9), tau_s=st.sampled_from([0.5, 1.0, 2.0]))
def test_the_folded_divergence_never_exceeds_the_full_one(divergence, seed, k, tau_s):
    """Coarse-graining never increases an f-divergence (data processing)."""
    student, teacher = _logits((4, 10), seed), _logits((4, 10), seed + 1)
    ids, t_fold = teacher_topk_from_logits(teacher, k, temperature=0.7)
    s_fold = student_folded_from_logits(student, ids, tau_s)
    folded = token_divergence(s_fold, t_fold, divergence)
    full = token_divergence(
        tempered_log_softmax(student, tau_s), tempered_log_softmax(teacher, 0.7), divergence
    )
    full = full.double()  # the fold is fp64 (fp64 logits stay fp64)
    assert bool((folded <= full * (1 + 1e-5) + 1e-6).all())
    assert bool((folded >= -1e-12).all())


@pytest.mark.parametrize("divergence", list(DIVERGENCES))
def test_it_equals_the_full_divergence_when_the_teacher_has_no_tail(divergence):
    student, teacher = _logits((3, 5, 12), 2), _logits((3, 5, 12), 3)
    teacher[..., 4:] = -1e4  # the teacher's mass lies on 4 tokens
    ids, t_fold = teacher_topk_from_logits(teacher, 4, temperature=1.0)
    s_fold = student_folded_from_logits(student, ids, 1.0)
    folded = token_divergence(s_fold, t_fold, divergence)
    full = token_divergence(
        tempered_log_softmax(student, 1.0), tempered_log_softmax(teacher, 1.0), divergence
    )
    full = full.double()  # the fold is fp64 (fp64 logits stay fp64)
    if divergence == "forward_kl":  # only the student's tail is coarsened, which F ignores
        torch.testing.assert_close(folded, full, rtol=1e-5, atol=1e-5)
    else:
        assert bool((folded <= full * (1 + 1e-5) + 1e-6).all())


def test_fold_gradients_match_autograd_through_the_full_distribution():
    logits = _logits((6, 9), 4).requires_grad_()
    ids = teacher_topk_from_logits(_logits((6, 9), 5), 3, 1.0)[0]
    torch.autograd.gradcheck(lambda z: fold(torch.log_softmax(z / 1.3, -1), ids), (logits,))


@pytest.mark.parametrize("tau", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("chunk_size", [None, 1, 4])
def test_fused_student_fold_matches_the_plain_one_in_value_and_gradient(tau, chunk_size):
    B, T, H, V, k = 3, 4, 6, 13, 5
    hidden = _logits((B, T, H), 6, scale=1.0).requires_grad_()
    head = _logits((V + 2, H), 7, scale=1.0).requires_grad_()  # 2 padded rows
    mask = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 0, 0]])
    ids = teacher_topk_from_logits(_logits((B, T, V), 8), k, 1.0)[0]
    upstream = _logits((B, T, k + 1), 9, scale=1.0)

    plain = student_folded_from_logits(hidden @ head.T, ids, tau, vocab_size=V)
    fused = student_folded_from_hidden(
        hidden, head, ids, mask, tau, vocab_size=V, chunks=ChunkSpec(chunk_size=chunk_size)
    )
    keep = mask.bool()
    torch.testing.assert_close(fused[keep], plain[keep])
    g_plain = torch.autograd.grad((plain[keep] * upstream[keep]).sum(), (hidden, head))
    g_fused = torch.autograd.grad((fused[keep] * upstream[keep]).sum(), (hidden, head))
    for a, b in zip(g_fused, g_plain, strict=True):
        torch.testing.assert_close(a, b)
    assert torch.isfinite(fused).all()  # unmasked rows hold a finite uniform fold


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_teacher_topk_from_hidden_equals_the_logits_path(chunk_size):
    hidden, head = _logits((2, 5, 6), 10, scale=1.0), _logits((15, 6), 11, scale=1.0)
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 0, 0, 0, 0]])
    ids_h, fold_h = teacher_topk_from_hidden(
        hidden, head, mask, 4, 0.5, vocab_size=13, chunks=ChunkSpec(chunk_size=chunk_size)
    )
    ids_l, fold_l = teacher_topk_from_logits(hidden @ head.T, 4, 0.5, vocab_size=13)
    keep = mask.bool()
    assert torch.equal(ids_h[keep], ids_l[keep])
    torch.testing.assert_close(fold_h[keep], fold_l[keep])
    assert torch.isfinite(fold_h).all()


@pytest.mark.parametrize("k,vocab", [(0, 10), (10, 10), (11, 10), (-1, 10)])
def test_k_outside_1_to_v_minus_1_is_refused(k, vocab):
    with pytest.raises(ValueError, match="objective.teacher_topk"):
        check_topk(k, vocab)


def test_every_full_vocabulary_kind_takes_folded_inputs():
    """The loop feeds folded log-probs to the plain divergences at temperature 1."""
    student, teacher = _logits((2, 3, 9), 12), _logits((2, 3, 9), 13)
    ids, t_fold = teacher_topk_from_logits(teacher, 3, 1.0)
    s_fold = student_folded_from_logits(student, ids, 1.0)
    mask = torch.ones(2, 3)
    for name, kind in OBJECTIVES.items():
        if kind.full_vocabulary:
            loss, _ = divergence_loss(s_fold, t_fold, mask, divergence=kind.load())
            direct = token_divergence(s_fold, t_fold, name).mean()
            torch.testing.assert_close(loss.double(), direct, rtol=1e-5, atol=1e-6)


def test_teacher_topk_from_hidden_also_gives_the_completion_log_probs():
    from distillscope.objectives.fused_tokens import token_logprobs_at_temperatures

    hidden, head = _logits((2, 5, 6), 14, scale=1.0), _logits((15, 6), 15, scale=1.0)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    tokens = torch.randint(0, 13, (2, 5), generator=torch.Generator().manual_seed(0)) * mask
    ids, folded, at_tau, at_one = teacher_topk_from_hidden(
        hidden, head, mask, 3, 0.5, vocab_size=13, chunks=ChunkSpec(chunk_size=3), tokens_B_T=tokens
    )
    ref_tau, ref_one = token_logprobs_at_temperatures(
        hidden, head, tokens, mask, (0.5, 1.0), vocab_size=13
    )
    torch.testing.assert_close(at_tau, ref_tau)
    torch.testing.assert_close(at_one, ref_one)
    assert torch.equal(ids, teacher_topk_from_hidden(hidden, head, mask, 3, 0.5, vocab_size=13)[0])
