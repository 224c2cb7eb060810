"""Cross-tokenizer objectives (objectives/token_alignment.py) against hand-computed cases, on a
hand-built tokenizer pair: the character-level testbed tokenizer and a BPE tokenizer trained
here on a tiny arithmetic corpus; and equal to the exact objective when the tokenizer is shared.
"""

from __future__ import annotations

import math

import pytest
import torch
from tests.numerics import reorder_tol

from distillscope.objectives import DivergenceOptions
from distillscope.objectives.divergences import DIVERGENCES, divergence_loss
from distillscope.objectives.token_alignment import (
    align_spans,
    cross_tokenizer_loss,
    shared_kl,
    spans_from_ends,
    uld_distance,
)
from distillscope.teacher.cross_tokenizer import retokenise, shared_pairs
from distillscope.testbed.tokenizer import build_tokenizer

pytestmark = pytest.mark.numerics  # re-run under other kernels and threads (Makefile)

#: the BPE's end-of-completion token
BPE_EOS = "<|end|>"


def arithmetic_bpe():
    """A byte-level BPE tokenizer of 320 tokens trained on a tiny arithmetic corpus (digits pair
    up: "12", "15"; a space joins the digits after it: " 3")."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [f"{a}+{b}={a + b}, {a}*{b}={a * b}" for a in range(30) for b in range(10)]
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=[BPE_EOS],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=BPE_EOS)


def logits_of(*probs: list[float]) -> torch.Tensor:
    """Logits ``[1, N, V]`` whose softmax is each of ``probs``."""
    return torch.tensor(probs, dtype=torch.float64).log()[None]


def test_uld_is_the_l1_distance_of_sorted_probabilities_padded_with_zeros():
    # sorted: student (.5 .3 .2 0), teacher (.6 .2 .1 .1): |.1| + |.1| + |.1| + |.1| = 0.4
    p_s, p_t = [0.5, 0.3, 0.2], [0.1, 0.6, 0.2, 0.1]
    got = uld_distance(logits_of(p_s)[0].log_softmax(-1), logits_of(p_t)[0].log_softmax(-1))
    assert got.item() == pytest.approx(0.4, abs=1e-12)
    # a permutation of the same probabilities is at distance 0; the sum of two vocabularies at
    # most 2 (disjoint mass), reached by two point masses of one token each
    perm = uld_distance(logits_of(p_s)[0], logits_of([0.2, 0.5, 0.3])[0])
    assert perm.item() == pytest.approx(0.0, abs=1e-12)


def test_uld_gradient_matches_finite_differences():
    torch.manual_seed(0)
    z_s = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    lp_t = torch.randn(3, 7, dtype=torch.float64).log_softmax(-1)
    assert torch.autograd.gradcheck(lambda z: uld_distance(z.log_softmax(-1), lp_t), (z_s,))


def test_shared_kl_restricts_and_renormalises_both_distributions():
    # pairs s0↔t1, s1↔t0: student (.5, .3)/.8, teacher (.2, .2)/.4
    p_s, p_t = [0.5, 0.3, 0.2], [0.2, 0.2, 0.6]
    lp_s, lp_t = logits_of(p_s)[0], logits_of(p_t)[0]
    pairs_s, pairs_t = torch.tensor([0, 1]), torch.tensor([1, 0])
    q_s, q_t = [0.625, 0.375], [0.5, 0.5]
    forward = sum(t * math.log(t / s) for s, t in zip(q_s, q_t, strict=True))
    reverse = sum(s * math.log(s / t) for s, t in zip(q_s, q_t, strict=True))
    assert shared_kl(lp_s, lp_t, pairs_s, pairs_t, "forward").item() == pytest.approx(forward)
    assert shared_kl(lp_s, lp_t, pairs_s, pairs_t, "reverse").item() == pytest.approx(reverse)


def test_loss_is_the_shared_kl_where_exact_and_uld_elsewhere():
    p_s, p_t = [0.5, 0.3, 0.2], [0.2, 0.2, 0.6]
    student, teacher = logits_of(p_s, p_s), logits_of(p_t, [0.1, 0.6, 0.3])
    exact = torch.tensor([[True, False]])
    pairs = torch.tensor([[0, 1], [1, 0]])
    options = DivergenceOptions(1.0, 1.0, "token_mean")
    kl = 0.5 * math.log(0.5 / 0.625) + 0.5 * math.log(0.5 / 0.375)
    uld = 0.1 + 0.0 + 0.1  # sorted (.5 .3 .2) against (.6 .3 .1)
    mask = torch.ones(1, 2)
    loss, metrics = cross_tokenizer_loss(
        student, teacher, exact, pairs, mask, form="forward", options=options
    )
    assert loss.item() == pytest.approx((kl + uld) / 2)
    assert metrics["objective/aligned_exact_share"] == 0.5
    assert metrics["objective/tokens"] == 2.0
    uld_0 = 0.1 + 0.1 + 0.0  # sorted (.5 .3 .2) against (.6 .2 .2)
    assert metrics["objective/uld_distance"] == pytest.approx((uld_0 + uld) / 2)
    loss, _ = cross_tokenizer_loss(
        student, teacher, exact, pairs, mask, form="uld", options=options
    )
    assert loss.item() == pytest.approx((uld_0 + uld) / 2)


@pytest.mark.parametrize(("form", "kind"), [("forward", "forward_kl"), ("reverse", "reverse_kl")])
def test_one_shared_tokenizer_gives_the_exact_objective_and_gradient(form, kind):
    torch.manual_seed(1)
    vocab = 40
    z_s = (3 * torch.randn(2, 6, vocab)).requires_grad_()
    z_t = 3 * torch.randn(2, 6, vocab)
    mask = torch.ones(2, 6)
    mask[1, 4:] = 0
    options = DivergenceOptions(1.0, 0.5, "seq_mean")
    pairs = torch.arange(vocab)[:, None].expand(-1, 2)
    exact = torch.ones(2, 6, dtype=torch.bool)
    got, _ = cross_tokenizer_loss(z_s, z_t, exact, pairs, mask, form=form, options=options)
    (grad_got,) = torch.autograd.grad(got, z_s)
    want, _ = divergence_loss(z_s, z_t, mask, divergence=DIVERGENCES[kind], options=options)
    (grad_want,) = torch.autograd.grad(want, z_s)
    # the only difference: renormalising by logsumexp over the full vocabulary (≈ 0 ± V·u)
    magnitude = float(z_s.detach().abs().max() + z_t.abs().max() / 0.5)
    assert abs(got.item() - want.item()) <= reorder_tol(magnitude, vocab)
    assert torch.allclose(grad_got, grad_want, rtol=0, atol=reorder_tol(1.0, vocab))


def test_spans_come_from_decoded_prefix_lengths():
    assert spans_from_ends([2, 3, 3, 7]) == [(0, 2), (2, 3), (3, 3), (3, 7)]
    assert spans_from_ends([2, 1, 4]) == [(0, 2), (2, 2), (2, 4)]  # a partial byte: empty


def test_character_tokens_align_to_bpe_tokens_by_their_spans():
    chars, bpe = build_tokenizer(), arithmetic_bpe()
    ids = chars("12+3=15", add_special_tokens=False)["input_ids"] + [chars.eos_token_id]
    done = retokenise(ids, True, chars, bpe)
    assert bpe.convert_ids_to_tokens(done.ids) == ["12", "+", "3", "=", "15", BPE_EOS]
    assert done.spans_from == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 7)]
    assert done.spans_to == [(0, 2), (2, 3), (3, 4), (4, 5), (5, 7), (7, 7)]
    a = align_spans(done.spans_from, done.spans_to)
    # "1" and "2" read the teacher's "12" (it holds their first character), "+" "3" "=" match,
    # "1" "5" read "15", and the two ends of completion meet
    assert a.teacher_position == [0, 0, 1, 2, 3, 4, 4, 5]
    assert a.same_span == [False, False, True, True, True, False, False, True]
    # each teacher token's log-prob goes to the student token holding its last character
    assert a.owner == [1, 2, 3, 4, 6, 7]


def test_spaces_joined_to_digits_align_to_the_token_that_holds_them():
    chars, bpe = build_tokenizer(), arithmetic_bpe()
    ids = chars("12 + 3", add_special_tokens=False)["input_ids"]
    done = retokenise(ids, False, chars, bpe)  # truncated: no end-of-completion token
    assert [bpe.decode([i]) for i in done.ids] == ["12", " ", "+", " 3"]
    a = align_spans(done.spans_from, done.spans_to)
    assert a.teacher_position == [0, 0, 1, 2, 3, 3]  # "1" "2" " " "+" " " "3"
    assert a.same_span == [False, False, True, True, False, False]
    assert a.owner == [1, 2, 3, 5]


def test_shared_pairs_hold_the_strings_both_vocabularies_hold_and_the_two_eos():
    chars, bpe = build_tokenizer(), arithmetic_bpe()
    pairs = shared_pairs(chars, bpe).tolist()
    as_text = {(chars.decode([s]), bpe.decode([t])) for s, t in pairs if s != chars.eos_token_id}
    assert all(a == b for a, b in as_text)
    assert [chars.eos_token_id, bpe.eos_token_id] in pairs
    assert ("+", "+") in as_text and ("7", "7") in as_text
    # one tokenizer on both sides: every id is its own pair
    same = shared_pairs(chars, build_tokenizer())
    assert same.tolist() == [[i, i] for i in range(len(chars))]
