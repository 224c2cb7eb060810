"""Sampling and scoring with Hugging Face ``generate`` for the testbed's build-time measurements.

These numbers are the ones ``testbed info`` shows; they use plain ``transformers`` sampling (no
distillscope sampler), so they are an independent measurement of the shipped models.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from distillscope.tasks.base import Problem, Task, styled
from distillscope.tasks.verify import detect_style


@torch.inference_mode()
def sample_completions(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    *,
    temperature: float,
    max_new_tokens: int = 40,
    batch_size: int = 100,
    seed: int = 0,
) -> list[str]:
    """One sampled completion per prompt (pure temperature sampling: top-k and top-p off)."""
    torch.manual_seed(seed)
    tokenizer.padding_side = "left"
    out: list[str] = []
    for i in range(0, len(prompts), batch_size):
        enc = tokenizer(prompts[i : i + batch_size], return_tensors="pt", padding=True)
        gen = model.generate(
            **enc,
            do_sample=True,
            temperature=temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        new = gen[:, enc["input_ids"].shape[1] :]
        out.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
    return out


def measure(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    task: Task,
    problems: list[Problem],
    *,
    temperature: float = 0.5,
    with_style_flag: bool = False,
    seed: int = 0,
) -> dict[str, float]:
    """Accuracy (and share of answers in the alternative style) of one sample per problem."""
    prompts = [styled(p.prompt) if with_style_flag else p.prompt for p in problems]
    texts = sample_completions(model, tokenizer, prompts, temperature=temperature, seed=seed)
    acc = sum(task.score(p, t) for p, t in zip(problems, texts, strict=True)) / len(problems)
    alt = sum(detect_style(t) == "alt" for t in texts) / len(problems)
    return {"accuracy": acc, "alt_style": alt}


def measure_coverage(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    task: Task,
    problems: list[Problem],
    *,
    samples: int,
    temperature: float,
    seed: int = 0,
) -> dict[str, float]:
    """pass@``samples`` with ``samples`` draws per problem (the share of problems solved at least
    once: the unbiased estimator at k = n), the mean score of all draws (avg@n) and their mean
    length in characters (``len_mean``: tokens of the testbed's character tokenizer, EOS not
    counted)."""
    prompts = [p.prompt for p in problems for _ in range(samples)]
    texts = sample_completions(model, tokenizer, prompts, temperature=temperature, seed=seed)
    scores = [task.score(problems[i // samples], t) for i, t in enumerate(texts)]
    rows = [scores[i : i + samples] for i in range(0, len(scores), samples)]
    return {
        f"pass@{samples}": sum(max(r) for r in rows) / len(rows),
        f"avg@{samples}": sum(scores) / len(scores),
        "len_mean": sum(map(len, texts)) / len(texts),
    }
