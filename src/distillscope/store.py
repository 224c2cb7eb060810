"""The results store, torch-free: where runs and studies live on disk, and atomic I/O for them.

This is the one place that knows the layout; training, evaluation, the study and the report all
read and write through it (torch checkpoints are written by :mod:`distillscope.train.checkpoint`
into :func:`checkpoint_dir`)::

    STUDY_DIR/study.yaml, results.parquet, provenance.json, rollout-cache/, progress.log
    STUDY_DIR/.lock                          held by the study process (PID, host, start)
    STUDY_DIR/runs/<run_id>/config.yaml      resolved RunConfig
                            fingerprint.json the config's fingerprint (a run belongs to one
                                             config) and the schema version it was written with
                            metrics.jsonl    one JSON object per optimizer step
                            profiles.jsonl   per-position profiles at eval.profile_steps
                            eval.json        evaluation metrics
                            eval_items.parquet  per-item evaluation outcomes (one row a sample)
                            status.json      pending | running | trained | done | failed | diverged
                            progress.log     `distillscope train`'s progress lines
                            checkpoint/      student weights + optimizer state

How this version reads the directories of older ones is :mod:`distillscope.store_versions`'s
business only. Every write is atomic (temp file + ``os.replace``), and every reader tolerates
what a killed or still-running process leaves behind: missing files, a torn last line of
``metrics.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from distillscope.store_versions import (
    SCHEMA_VERSION,
    SchemaVersionError,
    as_recorded_paths,
    flatten,
    schema_version,
    skipped_fields,
)

STATUSES = ("pending", "running", "trained", "done", "failed", "diverged")

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
PROFILES_FILE = "profiles.jsonl"
EVAL_FILE = "eval.json"
STATUS_FILE = "status.json"
CHECKPOINT_DIR = "checkpoint"
FINGERPRINT_FILE = "fingerprint.json"
PROGRESS_FILE = "progress.log"  # the CLI's progress lines (distillscope.cli.progress)
CHECKPOINT_META = "meta.json"

LOCK_FILE = ".lock"
STUDY_SPEC_FILE = "study.yaml"
RESULTS_FILE = "results.parquet"
PROVENANCE_FILE = "provenance.json"
SEQUENTIAL_FILE = "sequential.json"  # the looks of study --until-decided (study.sequential)
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


class StoreError(ValueError):
    """A run directory holds something else than asked for, or a file in it is corrupt."""


class RunMismatchError(StoreError):
    """A run directory belongs to another config (nothing in it was touched)."""


def read_json_strict(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; :class:`StoreError` naming the file when it is not one."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise StoreError(f"{path} is unreadable ({type(err).__name__}); it is corrupt") from None
    if not isinstance(data, dict):
        raise StoreError(f"{path} is not a JSON object; it is corrupt")
    return data


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


#: Fields that label a run or schedule its checkpoints without changing its results; a run
#: directory accepts a config that differs from its own only in these.
UNFINGERPRINTED = ("name", "checkpoint_every")


def config_fingerprint(
    config: dict[str, Any],
    version: int = SCHEMA_VERSION,
    recorded: dict[str, Any] | None = None,
    cwd: Path | None = None,
) -> tuple[str, dict[str, Any]]:
    """``(sha256 hex, fingerprinted fields)`` of a resolved config (``model_dump(mode="json")``)
    as a run directory of schema ``version`` records it (``recorded``: the fields its
    ``fingerprint.json`` records, when it has one; ``cwd``: the directory it records).

    The hash covers every field except :data:`UNFINGERPRINTED` and, for a directory of an older
    version, the fields it may lack at their default and does not record
    (:func:`~.store_versions.skipped_fields`), in canonical JSON; a path such a directory holds
    as typed counts in that form when it names the config's (resolved) path
    (:func:`~.store_versions.as_recorded_paths`).
    """
    skip = {*UNFINGERPRINTED, *skipped_fields(config, version, recorded)}
    fields = {k: v for k, v in flatten(config).items() if k not in skip}
    fields = as_recorded_paths(fields, version, recorded, cwd)
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest(), fields


def _differences(old: dict[str, Any], new: dict[str, Any], limit: int = 3) -> str:
    keys = sorted(set(old) | set(new))
    diff = [k for k in keys if old.get(k, "(absent)") != new.get(k, "(absent)")]

    def show(v: Any) -> str:
        text = json.dumps(v)
        return text if len(text) <= 40 else text[:39] + "…"

    parts = [f"{k}: {show(old.get(k, '(absent)'))} → {show(new.get(k, '(absent)'))}" for k in diff]
    more = f" and {len(diff) - limit} more" if len(diff) > limit else ""
    return ", ".join(parts[:limit]) + more


def read_fingerprint(run: Path) -> dict[str, Any]:
    """``fingerprint.json`` of a run (``{}`` when it has none); StoreError when corrupt."""
    path = run / FINGERPRINT_FILE
    return read_json_strict(path) if path.is_file() else {}


def _recorded(run: Path) -> tuple[dict[str, Any], int]:
    """A run's ``fingerprint.json`` and the schema version it was written with (this one's when
    there is none yet); StoreError when it is corrupt or of a newer version."""
    recorded = read_fingerprint(run)
    if not recorded:
        return recorded, SCHEMA_VERSION
    try:
        return recorded, schema_version(recorded, run / FINGERPRINT_FILE)
    except SchemaVersionError as err:
        raise StoreError(str(err)) from None


def _as_recorded(run: Path, config: dict[str, Any]) -> tuple[dict[str, Any], str, dict]:
    """``run``'s ``fingerprint.json`` and ``(fingerprint, fields)`` of ``config`` as that file
    records them (the schema version it was written with and the fields it holds)."""
    recorded, version = _recorded(run)
    cwd = recorded.get("cwd")
    cwd = Path(cwd) if isinstance(cwd, str) and cwd else None
    return recorded, *config_fingerprint(config, version, recorded.get("fields"), cwd)


def claim_run(run: Path, config: dict[str, Any], overwrite: bool = False) -> str:
    """Make ``run`` the directory of ``config``; returns its fingerprint.

    A run directory holding another config's results (metrics or a checkpoint; or results
    without a fingerprint) is refused with one line naming the differing fields, unless
    ``overwrite`` — which first deletes the run's files (only a directory that looks like a run:
    anything else is refused, never deleted). Another config's run that wrote no results (it
    failed before its first step) is deleted the same way and the directory taken over.
    """
    if overwrite and run.is_dir():
        clear_run(run)
    elif _stale(run, config):
        clear_run(run)
    recorded, fingerprint, fields = _as_recorded(run, config)
    if recorded and recorded.get("fingerprint") != fingerprint:
        diff = _differences(recorded.get("fields", {}), fields)
        raise RunMismatchError(
            f"{run} holds a run of another config ({diff}); pass --overwrite to replace it "
            "or choose another directory"
        )
    if not recorded and _has_results(run):
        raise RunMismatchError(
            f"{run} holds results of an unknown config (no {FINGERPRINT_FILE}); pass "
            "--overwrite to replace it or choose another directory"
        )
    if not recorded:
        payload = {
            "schema_version": SCHEMA_VERSION,
            "fingerprint": fingerprint,
            "fields": fields,
            "cwd": str(Path.cwd()),  # where a version-3 config's relative paths were typed
        }
        atomic_write_text(run / FINGERPRINT_FILE, json.dumps(payload, indent=1) + "\n")
    return fingerprint


def recorded_cwd(run: Path) -> Path | None:
    """The directory the command that made ``run`` ran in — where a config of schema version 3
    held its relative paths from (``config.paths.rebased``; version 4 stores them absolute) —
    or None for a directory that does not record it (the command's own directory is used)."""
    cwd = read_fingerprint(run).get("cwd")
    return Path(cwd) if isinstance(cwd, str) and cwd else None


def check_run_config(run: Path, config: dict[str, Any]) -> str:
    """The fingerprint of ``config`` after checking that ``run`` was trained with it."""
    recorded, fingerprint, fields = _as_recorded(run, config)
    if recorded.get("fingerprint") != fingerprint:
        what = _differences(recorded.get("fields", {}), fields) if recorded else "no fingerprint"
        raise StoreError(
            f"{run / CONFIG_FILE} does not match the config the run was trained with ({what}); "
            "restore it or retrain with --overwrite"
        )
    return fingerprint


RUN_FILES = (CONFIG_FILE, METRICS_FILE, EVAL_FILE, STATUS_FILE, FINGERPRINT_FILE)


def _has_results(run: Path) -> bool:
    return (run / METRICS_FILE).is_file() or checkpoint_dir(run).exists()


def holds_other_config(run: Path, config: dict[str, Any]) -> bool:
    """Whether ``run``'s ``fingerprint.json`` records a config other than ``config`` (compared
    under the schema version it was written with)."""
    recorded, fingerprint, _ = _as_recorded(run, config)
    return recorded.get("fingerprint") not in (None, fingerprint)


def holds_finished(run: Path, config: dict[str, Any], status: str = "done") -> bool:
    """Whether ``run`` holds ``config``'s run (its recorded fingerprint) with ``status``
    (``done``: trained and evaluated; ``trained``): what ``train`` need not do again."""
    if read_status(run)["status"] != status:
        return False
    recorded, fingerprint, _ = _as_recorded(run, config)
    return recorded.get("fingerprint") == fingerprint


def _stale(run: Path, config: dict[str, Any]) -> bool:
    """Whether ``run`` holds another config's run that failed before its first step: nothing
    worth keeping, so a corrected config takes the directory over."""
    return holds_other_config(run, config) and not _has_steps(run)


def _has_steps(run: Path) -> bool:
    """Whether ``run`` trained a step (a metrics row or a checkpoint), unlike a run that failed
    while loading (its ``metrics.jsonl`` is created empty when training starts)."""
    return checkpoint_dir(run).exists() or bool(read_metrics(run))


def clear_run(run: Path) -> None:
    """Delete a run's files (``--overwrite``); refuses a directory holding anything else."""
    known = {
        *RUN_FILES,
        CHECKPOINT_DIR,
        ".checkpoint.tmp",
        ".checkpoint.old",
        "samples.jsonl",
        EVAL_ITEMS_FILE,
        PROFILES_FILE,
        PROGRESS_FILE,
        "student",
        "tensorboard",  # log.trackers (distillscope.train.trackers)
        "wandb",
    }
    # what a re-evaluation keeps of the evaluation it replaced (distillscope.study.reevaluate)
    kept = re.compile(r"(eval-\d+\.json|samples-\d+\.jsonl|eval_items-\d+\.parquet|evals\.jsonl)")
    foreign = [
        p.name
        for p in run.iterdir()
        if p.name not in known and not p.name.startswith(".") and not kept.fullmatch(p.name)
    ]
    if foreign:
        raise StoreError(
            f"--overwrite refused: {run} holds files that are not a run's ({foreign[0]!r}…)"
        )
    for p in run.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()


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
    """``status.json`` of a run; ``{"status": "pending", "reason": ""}`` when there is none.

    A corrupt file counts as not finished (the run is redone from its checkpoint), with the
    file named in ``reason`` and ``"corrupt": True``, so one bad file never blocks a study.
    """
    path = run / STATUS_FILE if run is not None else None
    if path is None or not path.is_file():
        return {"status": "pending", "reason": ""}
    try:
        status = read_json_strict(path)
    except StoreError as err:
        return {
            "status": "pending",
            "reason": f"{err}; the run counts as unfinished",
            "corrupt": True,
        }
    if status.get("status") not in STATUSES:
        reason = f"{path} names no known status; the run counts as unfinished"
        return {"status": "pending", "reason": reason, "corrupt": True}
    return status


def read_metrics(run: Path | None) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl``, one per logged step (``[]`` when absent).

    Blank lines are skipped; reading stops at the first unparsable line (a crash can leave a
    torn last line).
    """
    return _json_lines(run / METRICS_FILE if run is not None else None)


def _json_lines(path: Path | None) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file (``[]`` when absent): blank lines and lines that
    hold no object are skipped; reading stops at the first unparsable line (a torn last line)."""
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


#: What each position bin of a ``profiles.jsonl`` row holds besides its ``start``/``stop``/
#: ``count``: the mean over the bin's completion tokens (nats; ``null`` for an empty bin).
PROFILE_QUANTITIES = ("forward_kl", "teacher_entropy", "cross_entropy", "student_entropy")


class ProfileLog:
    """``profiles.jsonl``: one row per profiled step, ``{"step", "time_s", "tokens", "bins":
    [{"start", "stop", "count", <PROFILE_QUANTITIES>…}]}``; on resume keeps exactly the rows of
    the steps before the checkpoint, as :class:`MetricsLog` does. Nothing is written for a run
    that profiles no step."""

    def __init__(self, run: Path, keep_steps: int, enabled: bool = True) -> None:
        self.path = run / PROFILES_FILE
        if enabled:
            kept = [r for r in read_profiles(run) if r["step"] < keep_steps]
            atomic_write_text(self.path, "".join(_profile_line(r) for r in kept))

    def append(self, row: dict[str, Any]) -> None:
        """Append ``row`` (NaN means become ``null``) and fsync."""
        with self.path.open("a") as f:
            f.write(_profile_line(row))
            f.flush()
            os.fsync(f.fileno())


def _profile_line(row: dict[str, Any]) -> str:
    def finite(v: Any) -> Any:
        return None if isinstance(v, float) and v != v else v

    bins = [{k: finite(v) for k, v in b.items()} for b in row.get("bins", [])]
    return json.dumps({**row, "bins": bins}) + "\n"


def read_profiles(run: Path | None) -> list[dict[str, Any]]:
    """The rows of ``profiles.jsonl`` in step order (``[]`` when absent); a torn last line is
    dropped, rows without an integer ``step`` or a ``bins`` list are skipped, and an empty
    bin's ``null`` means read back as NaN."""
    rows = []
    for row in _json_lines(run / PROFILES_FILE if run is not None else None):
        if type(row.get("step")) is not int:
            continue
        if not isinstance(row.get("bins"), list):
            continue
        bins = [b for b in row["bins"] if isinstance(b, dict)]
        row["bins"] = [
            {k: float("nan") if v is None and k in PROFILE_QUANTITIES else v for k, v in b.items()}
            for b in bins
        ]
        rows.append(row)
    return sorted(rows, key=lambda r: r["step"])


def write_eval(run: Path, metrics: dict[str, float]) -> None:
    """Write the run's evaluation metrics to ``eval.json`` (sorted keys)."""
    atomic_write_text(run / EVAL_FILE, json.dumps(metrics, indent=1, sort_keys=True) + "\n")


def read_eval(run: Path | None) -> dict[str, Any]:
    """The run's evaluation metrics (``{}`` before evaluation finished)."""
    return read_json(run / EVAL_FILE) if run is not None else {}


# Per-item evaluation outcomes (``eval_items.parquet``), what the analysis of noise reads.

EVAL_ITEMS_FILE = "eval_items.parquet"
#: Its columns: the block (accuracy, harder, skill/NAME …), the task, the item's index in the
#: block and its canonical identity, the sample's index, its score, completion length (tokens)
#: and whether it hit the length limit.
EVAL_ITEM_COLUMNS = ("block", "task", "item", "item_id", "sample", "score", "length", "truncated")


def write_eval_items(run: Path, columns: dict[str, list]) -> Path:
    """Write ``columns`` (:data:`EVAL_ITEM_COLUMNS`, equal lengths) to ``eval_items.parquet``
    atomically (temp file + ``os.replace``); returns its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if set(columns) != set(EVAL_ITEM_COLUMNS):
        raise ValueError(f"eval items need the columns {EVAL_ITEM_COLUMNS}, got {sorted(columns)}")
    path = run / EVAL_ITEMS_FILE
    run.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=run, prefix=f".{EVAL_ITEMS_FILE}.")
    os.close(fd)
    pq.write_table(pa.table({c: columns[c] for c in EVAL_ITEM_COLUMNS}), tmp)
    os.replace(tmp, path)
    return path


def read_eval_items(run: Path | None) -> Any:
    """The run's per-item outcomes as a pandas DataFrame (:data:`EVAL_ITEM_COLUMNS`); None when
    the run has none (not evaluated yet, or evaluated before the file existed)."""
    import pandas as pd

    path = None if run is None else run / EVAL_ITEMS_FILE
    if path is None or not path.is_file():
        return None
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as err:
        raise StoreError(f"{path} is unreadable ({type(err).__name__}); it is corrupt") from None
