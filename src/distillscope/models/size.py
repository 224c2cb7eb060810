"""A model directory's parameter count, read from its safetensors headers (no torch, no
weights loaded): what a run records as ``model/teacher_params`` to size its teacher."""

from __future__ import annotations

import json
import math
import os
import struct
from functools import lru_cache
from pathlib import Path

from distillscope.models.locate import SAFE_WEIGHTS

_HEADER_LIMIT = 100 * 2**20  # a safetensors header larger than this is not one


def _tensor_sizes(file: Path) -> dict[str, int]:
    """Element count of each tensor in one ``.safetensors`` file (its JSON header)."""
    with file.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        if length > _HEADER_LIMIT:
            raise ValueError(f"{file}: not a safetensors file (header of {length} bytes)")
        header = json.loads(f.read(length))
    return {k: math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__"}


@lru_cache(maxsize=64)
def _count(root: str, mtime_ns: int) -> int:
    path = Path(root)
    single, index = (path / name for name in SAFE_WEIGHTS)
    if single.is_file():
        files = [single]
    elif index.is_file():
        shards = json.loads(index.read_text())["weight_map"].values()
        files = [path / s for s in sorted(set(shards))]
    else:
        raise FileNotFoundError(f"{path} has no safetensors weights to count")
    sizes: dict[str, int] = {}
    for file in files:
        sizes.update(_tensor_sizes(file))
    return sum(sizes.values())


def parameter_count(model_dir: str | os.PathLike) -> int:
    """Parameters stored in ``model_dir`` (``model.safetensors`` or its sharded index).

    A tied LM head is stored once, so this equals ``sum(p.numel() for p in
    model.parameters())`` of the loaded model. Cached per directory and modification time.
    """
    root = Path(model_dir)
    return _count(str(root.resolve()), root.stat().st_mtime_ns)
