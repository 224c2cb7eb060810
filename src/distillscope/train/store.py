"""Run-directory I/O: resolved config, per-step metrics, status and checkpoints — all atomic.

A run directory holds ``config.yaml``, ``metrics.jsonl`` (one JSON object per optimizer step),
``eval.json``, ``status.json`` and ``checkpoint/`` (student weights + optimizer state).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

STATUSES = ("pending", "running", "done", "failed", "diverged")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` via a temp file and ``os.replace`` (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_status(run_dir: Path, status: str, reason: str = "", **extra: Any) -> None:
    assert status in STATUSES, status
    payload = {"status": status, "reason": reason, "time": time.time(), **extra}
    atomic_write_text(run_dir / "status.json", json.dumps(payload) + "\n")


def read_status(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "status.json"
    if not path.is_file():
        return {"status": "pending", "reason": ""}
    return json.loads(path.read_text())


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """All complete lines of ``metrics.jsonl`` (a torn last line from a crash is ignored)."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rows


class MetricsLog:
    """Appends one JSON line per step; on resume keeps exactly the steps before the checkpoint."""

    def __init__(self, run_dir: Path, keep_steps: int) -> None:
        self.path = run_dir / "metrics.jsonl"
        kept = [r for r in read_metrics(run_dir) if r["step"] < keep_steps]
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def append(self, row: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())


def save_checkpoint(
    run_dir: Path, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> None:
    """Student weights (safetensors) and optimizer state, swapped in atomically as one directory."""
    final = run_dir / "checkpoint"
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
    ckpt = run_dir / "checkpoint"
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
