"""Per-token log-probs and draws from hidden states, chunk by chunk, against the logits forms."""

from __future__ import annotations

import pytest
import torch

from distillscope.objectives import ChunkSpec
from distillscope.objectives.estimators import REVERSE_SAMPLED, sampled_kl
from distillscope.objectives.fused_tokens import (
    draw_from_hidden,
    inverse_cdf_draw,
    token_logprobs_at_temperatures,
    token_logprobs_from_hidden,
)


def _inputs(seed: int = 0, b: int = 3, t: int = 5, h: int = 6, v: int = 11):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(b, t, h, generator=g, dtype=torch.float64, requires_grad=True)
    head = torch.randn(v + 2, h, generator=g, dtype=torch.float64, requires_grad=True)  # padded
    mask = torch.rand(b, t, generator=g) > 0.3
    tokens = torch.randint(0, v, (b, t), generator=g) * mask
    return hidden, head, mask, tokens, v


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("chunk_size", [1, 3, None])
def test_token_logprobs_and_gradients_equal_autograd_on_logits(temperature, chunk_size):
    hidden, head, mask, tokens, v = _inputs()
    weights = torch.randn(mask.shape, dtype=torch.float64)
    got = token_logprobs_from_hidden(
        hidden,
        head,
        tokens,
        mask,
        temperature=temperature,
        vocab_size=v,
        chunks=ChunkSpec(chunk_size=chunk_size),
    )
    (got * weights).sum().backward()
    got_grads = hidden.grad.clone(), head.grad.clone()
    hidden.grad = head.grad = None

    logp = torch.log_softmax(hidden @ head[:v].T / temperature, dim=-1)
    want = logp.gather(-1, tokens[..., None]).squeeze(-1) * mask
    (want * weights).sum().backward()
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(got_grads[0], hidden.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(got_grads[1], head.grad, rtol=0, atol=1e-12)
    assert got_grads[1][v:].abs().max() == 0  # padded head rows get no gradient


def test_token_outside_the_vocabulary_is_refused():
    hidden, head, mask, tokens, v = _inputs()
    tokens = tokens.masked_fill(mask, v)
    with pytest.raises(ValueError, match="outside the vocabulary of 11"):
        token_logprobs_from_hidden(hidden, head, tokens, mask, vocab_size=v)


def test_inverse_cdf_draw_follows_the_distribution_and_never_draws_zero_probability():
    probs = torch.tensor([0.1, 0.0, 0.2, 0.7])
    n = 40_000
    u = torch.rand(n, generator=torch.Generator().manual_seed(1))
    tokens = inverse_cdf_draw(probs.log().expand(n, 4), u)
    freq = torch.bincount(tokens, minlength=4).double() / n
    assert freq[1] == 0
    torch.testing.assert_close(freq, probs.double(), rtol=0, atol=0.01)


@pytest.mark.parametrize("chunk_size", [1, 2, None])
def test_draws_from_hidden_equal_draws_from_logits_and_ignore_the_chunking(chunk_size):
    hidden, head, mask, _, v = _inputs(seed=3)
    u = torch.rand(mask.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    got = draw_from_hidden(
        hidden,
        head,
        mask,
        u,
        temperature=0.7,
        vocab_size=v,
        chunks=ChunkSpec(chunk_size=chunk_size),
    )
    logp = torch.log_softmax(hidden.detach() @ head.detach()[:v].T / 0.7, dim=-1)
    want = inverse_cdf_draw(logp.reshape(-1, v), u.reshape(-1)).view(mask.shape) * mask
    assert torch.equal(got, want)


def test_sampled_estimator_draws_from_the_given_uniforms():
    hidden, head, mask, _, v = _inputs(seed=4)
    logits = (hidden @ head[:v].T).detach()
    u = torch.rand(mask.shape, dtype=torch.float64)
    a = sampled_kl(logits, logits.flip(-1), mask, REVERSE_SAMPLED, uniforms_B_T=u)
    b = sampled_kl(logits, logits.flip(-1), mask, REVERSE_SAMPLED, uniforms_B_T=u)
    assert a[1] == b[1]
    gen = torch.Generator().manual_seed(9)
    c = sampled_kl(logits, logits.flip(-1), mask, REVERSE_SAMPLED, generator=gen)
    d = sampled_kl(
        logits,
        logits.flip(-1),
        mask,
        REVERSE_SAMPLED,
        uniforms_B_T=torch.rand(mask.shape, generator=gen.manual_seed(9)),
    )
    assert c[1] == d[1]


def test_several_temperatures_from_one_pass_equal_one_at_a_time():
    hidden, head, mask, tokens, v = _inputs(seed=5)
    got = token_logprobs_at_temperatures(
        hidden, head, tokens, mask, (0.5, 1.0), chunks=ChunkSpec(chunk_size=2)
    )
    for tau, logp in zip((0.5, 1.0), got, strict=True):
        want = token_logprobs_from_hidden(hidden, head, tokens, mask, temperature=tau).detach()
        torch.testing.assert_close(logp, want, rtol=0, atol=1e-12)
