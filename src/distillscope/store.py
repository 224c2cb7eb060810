"""The results store, torch-free: where runs and studies live on disk, and atomic I/O for them.

This is the one place that knows the layout; training, evaluation, the study and the report all
read and write through it (torch checkpoints are written by :mod:`distillscope.train.checkpoint`
into :func:`checkpoint_dir`)::

    STUDY_DIR/study.yaml, results.parquet, provenance.json, rollout-cache/
    STUDY_DIR/runs/<run_id>/config.yaml      resolved RunConfig
                            metrics.jsonl    one JSON object per optimizer step
                            eval.json        evaluation metrics
                            status.json      pending | running | done | failed | diverged
                            checkpoint/      student weights + optimizer state

Every write is atomic (temp file + ``os.replace``), and every reader tolerates what a killed or
still-running process leaves behind: missing files, a torn last line of ``metrics.jsonl``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

STATUSES = ("pending", "running", "done", "failed", "diverged")

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
EVAL_FILE = "eval.json"
STATUS_FILE = "status.json"
CHECKPOINT_DIR = "checkpoint"

STUDY_SPEC_FILE = "study.yaml"
RESULTS_FILE = "results.parquet"
PROVENANCE_FILE = "provenance.json"
RUNS_DIR = "runs"
ROLLOUT_CACHE_DIR = "rollout-cache"


# ---------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------


def run_dir(study_dir: Path, run_id: object) -> Path | None:
    """``study_dir/runs/<run_id>``, or None when ``run_id`` could step outside ``runs/``.

    Run ids come from the results table; one with a path separator or ``..`` is shown in the
    report but never used to read files.
    """
    name = str(run_id)
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        return None
    return Path(study_dir) / RUNS_DIR / name


def checkpoint_dir(run: Path) -> Path:
    """Where a run's checkpoint (``model.safetensors``, optimizer state) lives."""
    return run / CHECKPOINT_DIR


# ---------------------------------------------------------------------------------------------
# Atomic writes and tolerant reads
# ---------------------------------------------------------------------------------------------


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` via a temp file and ``os.replace`` (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; ``{}`` when it is missing, unparsable or not an object."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(errors="replace"))
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


# ---------------------------------------------------------------------------------------------
# One run: config, status, metrics log, evaluation results
# ---------------------------------------------------------------------------------------------


def write_config(run: Path, yaml_text: str) -> None:
    """Write the run's resolved config (YAML text from ``dump_run_config``)."""
    atomic_write_text(run / CONFIG_FILE, yaml_text)


def write_status(run: Path, status: str, reason: str = "", **extra: Any) -> None:
    """Record the run's status (one of :data:`STATUSES`), a reason and extra fields."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    payload = {"status": status, "reason": reason, "time": time.time(), **extra}
    atomic_write_text(run / STATUS_FILE, json.dumps(payload) + "\n")


def read_status(run: Path | None) -> dict[str, Any]:
    """``status.json`` of a run; ``{"status": "pending", "reason": ""}`` when there is none."""
    status = read_json(run / STATUS_FILE) if run is not None else {}
    return status if "status" in status else {"status": "pending", "reason": ""}


def read_metrics(run: Path | None) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl``, one per logged step (``[]`` when absent).

    Blank lines are skipped; reading stops at the first unparsable line (a crash can leave a
    torn last line).
    """
    path = run / METRICS_FILE if run is not None else None
    if path is None or not path.is_file():
        return []
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            break
        if isinstance(row, dict):
            rows.append(row)
    return rows


class MetricsLog:
    """Appends one JSON line per step; on resume keeps exactly the steps before the checkpoint."""

    def __init__(self, run: Path, keep_steps: int) -> None:
        self.path = run / METRICS_FILE
        kept = [r for r in read_metrics(run) if r["step"] < keep_steps]
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def append(self, row: dict[str, Any]) -> None:
        """Append ``row`` and fsync, so a crash loses at most the step in progress."""
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())


def write_eval(run: Path, metrics: dict[str, float]) -> None:
    """Write the run's evaluation metrics to ``eval.json`` (sorted keys)."""
    atomic_write_text(run / EVAL_FILE, json.dumps(metrics, indent=1, sort_keys=True) + "\n")


def read_eval(run: Path | None) -> dict[str, Any]:
    """The run's evaluation metrics (``{}`` before evaluation finished)."""
    return read_json(run / EVAL_FILE) if run is not None else {}
