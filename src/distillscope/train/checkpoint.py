"""Torch checkpoints of a run: student weights and optimizer state, swapped in atomically.

The rest of the run directory (config, status, metrics, evaluation) is :mod:`distillscope.store`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from distillscope.store import checkpoint_dir


def save_checkpoint(
    run_dir: Path, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> None:
    """Student weights (safetensors) and optimizer state, swapped in atomically as one directory."""
    final = checkpoint_dir(run_dir)
    tmp = run_dir / ".checkpoint.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # Clones give tied weights their own storage, which safetensors requires.
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    save_file(state, tmp / "model.safetensors")
    opt_tensors, opt_meta = _flatten_optimizer(optimizer.state_dict())
    save_file(opt_tensors, tmp / "optimizer.safetensors")
    (tmp / "meta.json").write_text(json.dumps({"step": step, "optimizer": opt_meta}))
    old = run_dir / ".checkpoint.old"
    shutil.rmtree(old, ignore_errors=True)  # left behind by a crash between the two renames
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(run_dir: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Restore the last checkpoint; returns the number of steps already done (0 when none)."""
    ckpt = checkpoint_dir(run_dir)
    if not (ckpt / "meta.json").is_file():  # a crash between save_checkpoint's two renames
        ckpt = run_dir / ".checkpoint.old"
    if not (ckpt / "meta.json").is_file():
        return 0
    meta = json.loads((ckpt / "meta.json").read_text())
    model.load_state_dict(load_file(ckpt / "model.safetensors"), strict=False)
    optimizer.load_state_dict(
        _unflatten_optimizer(load_file(ckpt / "optimizer.safetensors"), meta["optimizer"])
    )
    return int(meta["step"])


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
