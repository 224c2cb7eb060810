"""LoRA students (``model.lora``): peft adapters injected into the student, merged for export.

    model: {lora: {r: 8, alpha: 16, target_modules: [q_proj, v_proj]}}

:func:`attach_lora` injects the adapters in place (the student stays its own class, e.g.
``LlamaForCausalLM``, so every forward, sampler and checkpoint path is the same code) and
freezes every base weight: the optimizer sees only the adapters (``lora_A``, ``lora_B``).
A LoRA layer is not an ``nn.Linear``, so the lean decoder and the gathered scoring forward
(:mod:`distillscope.rollout.fast_decode`) step aside and the model's own forward runs.
Checkpoints hold the unmerged state (base + adapters), so a killed run resumes exactly;
:func:`merged_student` folds each adapter into its base weight, W + (alpha / r)·B·A, for
``RUN/student/``, which then loads with ``AutoModelForCausalLM`` alone and is what evaluation
(sparsity, forgetting) reads. :func:`plain_weights` gives the same merged weights without touching
the model, under the plain model's names: what a vLLM engine samples from
(``rollout.engine: vllm``), pushed before each on-policy batch.
"""

from __future__ import annotations

import torch
from torch import nn

from distillscope.config import LORA_MISSING, LoraConfig, ModelConfig
from distillscope.rollout.vllm_engine import own_weights


class LoraSetupError(ValueError):
    """``model.lora`` cannot be applied: peft is missing or a target module is not there."""


def attach_lora(student: nn.Module, cfg: LoraConfig) -> nn.Module:
    """Inject ``cfg``'s adapters into ``student`` in place and freeze everything else.

    The adapters' initial ``lora_A`` is drawn from torch's global generator (seeded by the
    run), ``lora_B`` is zero, so the student's outputs are unchanged at step 0. Raises
    :class:`LoraSetupError` naming ``model.lora.target_modules`` and the modules present when a
    target matches no layer, and naming ``pip install 'distillscope[lora]'`` without peft.
    """
    try:
        import peft
    except ImportError:
        raise LoraSetupError(LORA_MISSING) from None
    present = adaptable_modules(student)
    missing = [name for name in cfg.target_modules if name not in present]
    if missing:
        raise LoraSetupError(
            f"model.lora.target_modules: {missing[0]!r} is not a linear layer of the student; "
            f"it has {', '.join(sorted(present))}"
        )
    tied = _tied_embeddings(student) & set(cfg.target_modules)
    if tied:
        raise LoraSetupError(
            f"model.lora.target_modules: {sorted(tied)[0]!r} shares its weight with the other "
            "embedding (tie_word_embeddings), so merging its adapter would change both; remove it"
        )
    config = peft.LoraConfig(
        r=cfg.r,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=list(cfg.target_modules),
    )
    student = peft.inject_adapter_in_model(config, student)
    for name, param in student.named_parameters():
        param.requires_grad_(".lora_" in name)
    return student


def adaptable_modules(model: nn.Module) -> set[str]:
    """The last name components of ``model``'s layers that LoRA can adapt (linear, embedding)."""
    kinds = (nn.Linear, nn.Embedding)
    return {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, kinds)}


def _tied_embeddings(model: nn.Module) -> set[str]:
    """The last name components of the input and output embeddings when their weights are tied."""
    inp, out = model.get_input_embeddings(), model.get_output_embeddings()
    if inp is None or out is None or inp.weight is not out.weight:
        return set()
    names = {id(m): name.rsplit(".", 1)[-1] for name, m in model.named_modules()}
    return {names[id(inp)], names[id(out)]}


def merged_student(cfg: ModelConfig, student: nn.Module) -> nn.Module:
    """``student`` without ``model.lora``; with it, the same module with each adapter merged into
    its base weight and removed, in place (no second copy of a large model): a plain Hugging
    Face model of the student's class. Call it once training and its last checkpoint are done."""
    if cfg.lora is None:
        return student
    from peft.tuners.lora import LoraLayer

    for name, module in list(student.named_modules()):
        if isinstance(module, LoraLayer):
            module.merge()  # W ← W + (alpha / r)·B·A, in the base layer
            parent_name, _, child = name.rpartition(".")
            setattr(student.get_submodule(parent_name), child, module.get_base_layer())
    for attr in ("peft_config", "_hf_peft_config_loaded"):  # set by peft's injection
        if attr in student.__dict__:
            delattr(student, attr)
    student.requires_grad_(True)
    return student


@torch.no_grad()
def plain_weights(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """``model``'s weights as the plain model of its class names them, adapters merged.

    Without adapters: its ``state_dict``. With them: each adapted layer's base weight plus its
    active adapters' W + (alpha / r)·B·A (peft's own delta), under the layer's name
    (``…q_proj.weight``, not ``…q_proj.base_layer.weight``), and no ``lora_A``/``lora_B``
    entries. The model is left as it is (training goes on), and only adapted weights are new
    tensors. A tied head keeps its entry (the embeddings' tensor), as ``state_dict`` gives it.
    """
    state = model.state_dict()
    if not any(".lora_" in name for name in state):
        return own_weights(model)
    from peft.tuners.lora import LoraLayer

    deltas = {
        f"{name}.base_layer.weight": sum(m.get_delta_weight(a) for a in m.active_adapters)
        for name, m in model.named_modules()
        if isinstance(m, LoraLayer) and not m.merged
    }
    weights = []
    for name, tensor in state.items():
        if ".lora_" in name:
            continue
        if name in deltas:
            tensor = tensor + deltas[name].to(tensor.dtype)
        weights.append((name.replace(".base_layer.", "."), tensor.detach()))
    return weights


def trainable_parameters(model: nn.Module) -> list[torch.nn.Parameter]:
    """The parameters an optimizer steps: all of a full fine-tune, the adapters of a LoRA one."""
    return [p for p in model.parameters() if p.requires_grad]
