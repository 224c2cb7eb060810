"""Tiny random-weight copies of a user's checkpoints, for trying a pipeline before renting GPUs.

    distillscope testbed build --like /models/Qwen2.5-7B-Instruct --out /tmp/like/teacher

:func:`shrink_like` reads ``SOURCE/config.json`` and writes a model of the same architecture
(``model_type``, attention kind, tied or untied embeddings, rope settings) with ``layers``
decoder layers, hidden size ``hidden`` (MLP 2 × hidden, 4 query heads and 2 key-value heads when
the source groups its queries, else 4 and 4) and random weights drawn with ``seed`` — and
everything a run reads besides the weights copied verbatim: the tokenizer files, the chat
template, ``generation_config.json`` (its stop ids), and the logit width ``vocab_size`` (padded
vocabularies stay padded). A run on the copy therefore tokenizes, templates, stops and slices
logits exactly as on the source; only what the weights compute differs. Nothing is downloaded.

Sizes: the embedding dominates (151,936 × 64 fp32 ≈ 39 MB per matrix for Qwen2.5), so a pair
is ~80–160 MB and a step on a laptop CPU takes well under a second.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from distillscope.models.locate import SAFE_WEIGHTS, check_model_dir, resolve_model_path

#: Files never copied: the source's weights (and pickled ones), and the config rewritten here.
SKIPPED = {*SAFE_WEIGHTS, "pytorch_model.bin", "pytorch_model.bin.index.json", "config.json"}
#: Config fields listed per layer, fitted to the copy's layers.
PER_LAYER = ("layer_types",)


def shrink_like(
    source: str | Path, out: Path, *, layers: int = 2, hidden: int = 64, seed: int = 0
) -> Path:
    """Write the tiny random copy of ``source`` (a model directory or ``testbed:NAME``) into
    ``out`` (module doc); returns ``out``. Refuses an existing non-empty ``out``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    root = check_model_dir(resolve_model_path(str(source)), allow_pickle=True)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; choose another --out")
    if layers < 1 or hidden < 8 or hidden % 4:
        raise ValueError(f"--layers {layers} / --hidden {hidden}: need layers ≥ 1, hidden ≥ 8, ÷ 4")
    cfg = AutoConfig.from_pretrained(root)
    if getattr(cfg, "text_config", None) is not None:
        raise ValueError(f"{root}: a multimodal config (text_config) is not a causal LM to shrink")
    shrink_config(cfg, layers, hidden)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    out.mkdir(parents=True, exist_ok=True)
    for path in root.iterdir():  # tokenizer, chat template, generation config, …
        if path.is_file() and path.name not in SKIPPED and not path.name.endswith(".safetensors"):
            shutil.copy2(path, out / path.name)
    generation = out / "generation_config.json"
    kept = generation.read_bytes() if generation.is_file() else None
    with _quiet_hub():
        model.save_pretrained(out)
    if kept is not None:  # the source's stop ids and sampling defaults, byte for byte
        generation.write_bytes(kept)
    return out


@contextmanager
def _quiet_hub() -> Iterator[None]:
    """No "Writing model shards" progress bar while saving (a rehearsal prints its own lines)."""
    from huggingface_hub.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )
    from transformers.utils import logging

    hub_off, transformers_on = are_progress_bars_disabled(), logging.is_progress_bar_enabled()
    disable_progress_bars()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if transformers_on:
            logging.enable_progress_bar()
        if not hub_off:
            enable_progress_bars()


def shrink_config(cfg, layers: int, hidden: int) -> None:
    """``cfg`` (a transformers config) cut to ``layers`` layers of width ``hidden``, in place."""
    heads = getattr(cfg, "num_attention_heads", None) or 4
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    cfg.num_hidden_layers = layers
    cfg.hidden_size = hidden
    cfg.num_attention_heads = 4
    cfg.num_key_value_heads = 1 if kv == 1 else 2 if kv < heads else 4
    if hasattr(cfg, "intermediate_size"):
        cfg.intermediate_size = 2 * hidden
    if getattr(cfg, "head_dim", None) is not None:
        cfg.head_dim = hidden // 4
    if getattr(cfg, "max_window_layers", None) is not None:
        cfg.max_window_layers = min(cfg.max_window_layers, layers)
    for name in PER_LAYER:
        value = getattr(cfg, name, None)
        if isinstance(value, list) and value:  # cut, or extended by its last entry
            setattr(cfg, name, (value + value[-1:] * layers)[:layers])


def tiny_copies(root: Path, *, layers: int = 2, hidden: int = 64) -> Callable[[str], str]:
    """``tiny(spec)``: the directory of the tiny copy of model ``spec`` under ``root``, built on
    its first request (a rehearsal builds only the copies its configurations reach)."""
    built: dict[str, str] = {}

    def tiny(spec: str) -> str:
        if spec not in built:
            out = root / f"{len(built)}-{resolve_model_path(spec).name}"
            built[spec] = str(shrink_like(spec, out, layers=layers, hidden=hidden, seed=len(built)))
        return built[spec]

    return tiny
