"""Generators live on the model's device; the same seed gives the same draws on CPU."""

import torch

from distillscope.rollout import model_generator, step_generator
from distillscope.rollout import prompts as prompts_module


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
