"""Sample and score a student on a list of problems, with the distillscope sampler.

Common random numbers: a block's generator is seeded by the run's seed and the block's stream
alone (:class:`~distillscope.rollout.prompts.Stream`), and every batch leaves it where a batch
that ran to ``max_new_tokens`` would (:func:`skip_unused_draws`). So uniform u of row r at step t
of batch b is the same draw in every run of one seed whatever its weights, its training config
or where its completions stopped: cells of a seed share their evaluation noise on purpose
(docs/outputs.md, "Evaluation samples"), and two seeds draw different uniforms.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from distillscope.models.vocab import stop_token_ids
from distillscope.rollout.policies import StudentPolicy
from distillscope.rollout.prompts import PromptEncoder
from distillscope.rollout.rollouts import PromptBatch, SamplingSpec
from distillscope.rollout.sampler import sample_rollouts
from distillscope.tasks import Problem, Task


@dataclass
class Samples:
    """``n`` completions per problem: texts[i][j] is sample j of problem i."""

    texts: list[list[str]]
    scores: list[list[float]]
    lengths: list[list[int]]
    truncated: list[list[bool]]

    @property
    def correct_counts(self) -> list[int]:
        return [int(sum(s)) for s in self.scores]

    def accuracy(self) -> float:
        """Mean score over every sample (avg@n; the accuracy when n = 1)."""
        flat = [x for row in self.scores for x in row]
        return sum(flat) / len(flat) if flat else 0.0


#: Rows per evaluation batch at most (the budget decides below it).
MAX_EVAL_BATCH = 256


def eval_batch_size(
    model: PreTrainedModel, prompt_tokens: int, max_new_tokens: int, memory_budget_mb: float
) -> int:
    """Rows per evaluation batch whose KV cache and next-token logits fit ``memory_budget_mb``.

    Per row: keys and values of every layer for the whole sequence (2 · layers · kv_heads ·
    head_dim · (prompt + new tokens) values in the model's dtype) plus a few fp32 rows of
    vocabulary-wide logits/probabilities for the token being drawn. Between 1 and 256 rows.
    """
    cfg = model.config
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    value_bytes = next(model.parameters()).element_size()
    kv = 2 * cfg.num_hidden_layers * kv_heads * head_dim * (prompt_tokens + max_new_tokens)
    per_row = kv * value_bytes + 4 * cfg.vocab_size * 4
    return int(max(1, min(MAX_EVAL_BATCH, memory_budget_mb * 2**20 // per_row)))


@torch.no_grad()
def sample_and_score(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    task: Task,
    problems: list[Problem],
    *,
    n: int = 1,
    temperature: float,
    max_new_tokens: int,
    generator: torch.Generator,
    prompt_format: str = "testbed",
    memory_budget_mb: float | None = None,
) -> Samples:
    """Draw ``n`` samples per problem at ``temperature`` (top-p 1.0) and score each: one sampler
    pass over the problems × ``n`` rows (problem-major: row i·n + j is sample j of problem i).

    Batches hold :data:`MAX_EVAL_BATCH` rows, fewer when ``memory_budget_mb`` says so
    (:func:`eval_batch_size`, sized from the longest of the first batch's prompts).
    """
    encoder = PromptEncoder(task, tokenizer, prompt_format)
    policy = StudentPolicy(temperature=temperature)
    spec = SamplingSpec(
        max_new_tokens=max_new_tokens,
        stop_ids=stop_token_ids([tokenizer], [model]),
        pad_id=tokenizer.pad_token_id,
        vocab_size=len(tokenizer),
    )
    flat = [p for p in problems for _ in range(n)]
    texts, lengths, truncated = [], [], []
    batch_size = MAX_EVAL_BATCH
    if memory_budget_mb is not None and flat:
        longest = int(encoder.encode(flat[:MAX_EVAL_BATCH])[1].sum(dim=1).max())
        batch_size = eval_batch_size(model, longest, max_new_tokens, memory_budget_mb)
    for i in range(0, len(flat), batch_size):
        chunk = flat[i : i + batch_size]
        ids, mask = encoder.encode(chunk)
        prompts = PromptBatch(ids.to(model.device), mask.to(model.device))
        start = generator.get_state()
        r = sample_rollouts(policy, model, None, prompts, spec, generator)
        skip_unused_draws(generator, start, len(chunk), max_new_tokens)
        texts += tokenizer.batch_decode(r.completion_B_T, skip_special_tokens=True)
        lengths += r.lengths_B.tolist()
        truncated += r.truncated_B.tolist()
    scores = [task.score(p, t) for p, t in zip(flat, texts, strict=True)]

    def regroup(xs: list) -> list[list]:
        return [xs[i * n : (i + 1) * n] for i in range(len(problems))]

    return Samples(regroup(texts), regroup(scores), regroup(lengths), regroup(truncated))


def skip_unused_draws(
    generator: torch.Generator, start: torch.Tensor, rows: int, max_new_tokens: int
) -> None:
    """Leave ``generator`` where a batch of ``rows`` rows begun at state ``start`` leaves it when
    it decodes all ``max_new_tokens`` steps, however early its rows stopped.

    The sampler draws one float64 uniform per row per step and nothing else
    (:func:`~distillscope.rollout.policies.sample_token` through ``StudentPolicy``), so replaying
    ``max_new_tokens`` draws of shape ``[rows, 1]`` from ``start`` reaches that state on any
    device (tests/eval/test_common_random_numbers.py holds the sampler to it). A batch that ran
    to the limit is left exactly where it was.
    """
    generator.set_state(start)
    for _ in range(max_new_tokens):
        torch.rand((rows, 1), generator=generator, dtype=torch.float64, device=generator.device)
