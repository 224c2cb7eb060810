"""Torch checkpoints of a run: student weights and optimizer state, swapped in atomically; and
the final student as a Hugging Face directory (``RUN/student/``) that ``from_pretrained`` loads.

The rest of the run directory (config, status, metrics, evaluation) is :mod:`distillscope.store`.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from distillscope.models.load import load_weights
from distillscope.store import CHECKPOINT_META, StoreError, checkpoint_dir, read_json_strict
from distillscope.train import fsdp
from distillscope.train.lora import trainable_parameters

STUDENT_DIR = "student"
#: end-of-turn tokens that stop generation when the tokenizer knows them (ChatML, Llama 3)
STOP_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>")


def save_checkpoint(
    run_dir: Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    fingerprint: str = "",
    write: bool = True,
) -> dict[str, torch.Tensor] | None:
    """Student weights (safetensors) and optimizer state, swapped in atomically as one directory,
    written where ``write`` (rank 0 of several processes).

    ``meta.json`` records the step and the fingerprint of the config that trained them. An
    FSDP-sharded ``model`` is a collective: every rank calls this, the shards are gathered into
    one process's state dicts (:func:`.fsdp.full_state`) and the writer gets the full model
    state dict back (in CPU memory; the other ranks an empty one). Unsharded: None.
    """
    if not any(fsdp.is_sharded(p) for p in model.parameters()):
        if write:
            write_checkpoint(run_dir, step, model.state_dict(), optimizer.state_dict(), fingerprint)
        return None
    params = trainable_parameters(model)
    model_sd, optimizer_sd = fsdp.full_state(model, optimizer, params, keep=write)
    if write:
        write_checkpoint(run_dir, step, model_sd, optimizer_sd, fingerprint)
    return model_sd


def write_checkpoint(
    run_dir: Path,
    step: int,
    model_state: dict[str, torch.Tensor],
    optimizer_state: dict[str, Any],
    fingerprint: str = "",
) -> None:
    """:func:`save_checkpoint` of the state dicts themselves (FSDP's gathered ones,
    :func:`.fsdp.full_state`)."""
    final = checkpoint_dir(run_dir)
    tmp = run_dir / ".checkpoint.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # Clones give tied weights their own storage, which safetensors requires.
    state = {k: v.detach().contiguous().clone() for k, v in model_state.items()}
    save_file(state, tmp / "model.safetensors")
    opt_tensors, opt_meta = _flatten_optimizer(optimizer_state)
    save_file(opt_tensors, tmp / "optimizer.safetensors")
    meta = {"step": step, "fingerprint": fingerprint, "optimizer": opt_meta}
    (tmp / CHECKPOINT_META).write_text(json.dumps(meta))
    old = run_dir / ".checkpoint.old"
    shutil.rmtree(old, ignore_errors=True)  # left behind by a crash between the two renames
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(
    run_dir: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    fingerprint: str = "",
) -> int:
    """Restore the last checkpoint; returns the number of steps already done (0 when none).

    Loads strictly (every tensor, every shape) and refuses a checkpoint written under another
    config fingerprint; a corrupt file raises one line naming it. An FSDP-sharded ``model`` (and
    its ``optimizer``) takes each rank's shards of the full tensors (:mod:`.fsdp`).
    """
    ckpt = checkpoint_dir(run_dir)
    if not (ckpt / CHECKPOINT_META).is_file():  # a crash between save_checkpoint's two renames
        ckpt = run_dir / ".checkpoint.old"
    if not (ckpt / CHECKPOINT_META).is_file():
        return 0
    meta = read_json_strict(ckpt / CHECKPOINT_META)
    check_checkpoint_meta(ckpt / CHECKPOINT_META, meta, fingerprint)
    sharded = any(fsdp.is_sharded(p) for p in model.parameters())
    place = functools.partial(fsdp.sharded_model_state, model) if sharded else None
    load_weights(model, ckpt / "model.safetensors", place)
    path = ckpt / "optimizer.safetensors"
    try:
        state = _unflatten_optimizer(load_file(path), meta["optimizer"])
        if sharded:
            state = fsdp.sharded_optimizer_state(optimizer, trainable_parameters(model), state)
        optimizer.load_state_dict(state)
    except Exception as err:  # safetensors, KeyError, shape errors: all mean a corrupt file
        raise StoreError(f"{path} is truncated or corrupt ({type(err).__name__})") from err
    return int(meta["step"])


def check_checkpoint_meta(path: Path, meta: dict[str, Any], fingerprint: str) -> None:
    """Refuse a checkpoint whose ``meta.json`` is malformed or names another config."""
    if not isinstance(meta.get("step"), int) or not isinstance(meta.get("optimizer"), dict):
        raise StoreError(f"{path} lacks the step or optimizer state; it is corrupt")
    if fingerprint and meta.get("fingerprint") != fingerprint:
        raise StoreError(
            f"{path} was written by another config than the run's; retrain with --overwrite"
        )


def _flatten_optimizer(sd: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Optimizer state → flat tensors + JSON metadata (safetensors holds tensors only)."""
    tensors: dict[str, torch.Tensor] = {}
    state_meta: dict[str, dict[str, Any]] = {}
    for pid, st in sd["state"].items():
        state_meta[str(pid)] = {}
        for key, val in st.items():
            if torch.is_tensor(val):
                tensors[f"{pid}.{key}"] = val.detach().contiguous().clone()
                state_meta[str(pid)][key] = None
            else:
                state_meta[str(pid)][key] = val
    return tensors, {"state": state_meta, "param_groups": sd["param_groups"]}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    state = {}
    for pid, keys in meta["state"].items():
        state[int(pid)] = {k: tensors[f"{pid}.{k}"] if v is None else v for k, v in keys.items()}
    return {"state": state, "param_groups": meta["param_groups"]}


def export_student(run_dir: Path, model, tokenizer, state_dict: dict | None = None) -> Path:
    """Write ``run_dir/student/``: config, safetensors weights, tokenizer, generation config.

    ``AutoModelForCausalLM.from_pretrained(run_dir / "student")`` and
    ``AutoTokenizer.from_pretrained(run_dir / "student")`` load it; its generation config stops
    at every end token the tokenizer knows (:func:`stop_token_ids`). Swapped in atomically.
    ``state_dict``: the weights to write instead of ``model``'s own (FSDP's gathered ones).
    """
    final = run_dir / STUDENT_DIR
    tmp = run_dir / ".student.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    # safetensors; tied embeddings are written once (save_pretrained drops the tied keys from
    # the dict it is given: a copy)
    model.save_pretrained(tmp, state_dict=None if state_dict is None else dict(state_dict))
    tokenizer.save_pretrained(tmp)
    gen = model.generation_config
    gen.eos_token_id = stop_token_ids(tokenizer, gen.eos_token_id)
    gen.pad_token_id = tokenizer.pad_token_id
    gen.save_pretrained(tmp)
    old = run_dir / ".student.old"
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def stop_token_ids(tokenizer, configured: int | list[int] | None = None) -> list[int]:
    """The tokenizer's EOS, the ids already ``configured``, and any known end-of-turn token."""
    ids = [] if configured is None else [configured] if isinstance(configured, int) else configured
    ids = [*ids, tokenizer.eos_token_id]
    vocab = tokenizer.get_vocab()
    ids += [vocab[t] for t in STOP_TOKENS if t in vocab]
    return sorted({int(i) for i in ids if i is not None})
