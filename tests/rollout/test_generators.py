"""Generators live on the model's device; the same seed gives the same draws on CPU."""

import random

import torch

from distillscope.rollout import prompts as prompts_module
from distillscope.rollout.prompts import (
    PROMPT_STREAM,
    Stream,
    model_generator,
    step_generator,
    step_rng,
)


def test_same_seed_same_draws_and_streams_differ():
    a = torch.rand(5, generator=step_generator(42, 3, stream=1))
    b = torch.rand(5, generator=step_generator(42, 3, stream=1))
    c = torch.rand(5, generator=step_generator(42, 3, stream=2))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_generator_is_created_on_the_models_device(monkeypatch):
    made = []

    class Recording:
        def __init__(self, device):
            made.append(torch.device(device))

        def manual_seed(self, seed):
            return self

    monkeypatch.setattr(prompts_module.torch, "Generator", Recording)
    model_generator(torch.nn.Linear(2, 2, device="meta"), 42, 0)
    step_generator(42, 0, device="cuda:1")
    assert made == [torch.device("meta"), torch.device("cuda:1")]


def test_cpu_model_gets_a_cpu_generator():
    assert model_generator(torch.nn.Linear(2, 2), 1, 2).device == torch.device("cpu")


def test_the_named_streams_keep_their_values_and_draws():
    # A stream's value seeds its draws: renaming may never renumber (same seed, same metrics).
    assert {s.name: int(s) for s in Stream} == {
        "ROLLOUT": 0,
        "ESTIMATOR": 1,
        "PROFILE": 2,
        "RLVR_PROMPTS": 20,
        "RLVR_ROLLOUT": 21,
        "EVAL_ACCURACY": 10_000,
        "EVAL_COVERAGE": 10_001,
        "EVAL_HARDER": 10_002,
        "EVAL_HARDER_COVERAGE": 10_003,
        "EVAL_SKILLS": 10_004,
        "EVAL_STYLE_SUPPORT": 10_005,  # added: a new stream takes a new number
    }
    named = torch.rand(5, generator=step_generator(42, 3, Stream.ESTIMATOR))
    assert torch.equal(named, torch.rand(5, generator=step_generator(42, 3, 1)))
    assert PROMPT_STREAM == 0
    assert step_rng(42, 3).random() == random.Random("42/3/0").random()
