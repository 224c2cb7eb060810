"""``distillscope eval RUN [eval.*=…]``: evaluate a trained run again, with other evaluation
settings, without touching its weights.

An evaluation-time error (too many items, a harness dataset, a language identifier) then costs an
evaluation, not a retraining. Only ``eval.*`` fields may change: ``config.yaml`` keeps the config
the run was trained with (its fingerprint still checks the checkpoint), and the evaluation
settings in force are recorded beside the metrics:

- ``eval.json``: the **latest** evaluation — what ``study``'s results table and the report read;
- ``eval-<n>.json`` / ``samples-<n>.jsonl`` / ``eval_items-<n>.parquet``: the evaluation it
  replaced, n = 1, 2, … in order (``eval-1.json`` is the evaluation made after training);
- ``evals.jsonl``: one line per re-evaluation: ``{"overrides", "replaced", "finished"}``
  (``replaced``: the ``eval-<n>.json`` the previous evaluation was kept as).

A re-evaluation that fails leaves ``eval.json`` as it was and the run's status ``done``.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from distillscope.config import ConfigError, load_run_config
from distillscope.config.paths import rebased
from distillscope.store import (
    CONFIG_FILE,
    EVAL_FILE,
    EVAL_ITEMS_FILE,
    read_status,
    recorded_cwd,
    write_status,
)

HISTORY_FILE = "evals.jsonl"
_KEPT = re.compile(r"eval-(\d+)\.json")


def evaluation_config(run_dir: Path, overrides: list[str]):
    """``(trained config, config to evaluate with)``; ConfigError for an override outside
    ``eval.*`` (the weights are fixed: retrain to change anything else)."""
    outside = [o for o in overrides if not o.split("=", 1)[0].startswith("eval.")]
    if outside:
        raise ConfigError(
            f"{outside[0]}: only eval.* settings change after training (the weights are "
            "fixed); retrain with `distillscope train --overwrite` to change the rest"
        )
    trained = load_run_config(run_dir / CONFIG_FILE, stored=True)
    cfg = load_run_config(run_dir / CONFIG_FILE, overrides, stored=True) if overrides else trained
    # an older run's relative paths are read from where it was trained, not from here; a moved
    # run's absolute ones where they moved to: its trained config keeps them as recorded
    return trained, rebased(cfg, recorded_cwd(run_dir), run_dir)


def reevaluate(
    run_dir: Path, overrides: list[str], on_eval: Callable[[str], None] | None = None
) -> dict:
    """Evaluate ``run_dir``'s checkpoint under ``overrides`` (module doc); returns the metrics."""
    trained, cfg = evaluation_config(run_dir, overrides)  # checked by the caller's preflight
    from distillscope.study.run_one import evaluate_run  # torch: once the inputs are checked

    was = read_status(run_dir)["status"]
    replaced = keep_previous(run_dir)
    try:
        metrics = evaluate_run(cfg, run_dir, on_eval=on_eval, trained=trained)
    except BaseException:  # Ctrl-C included
        if was == "done":  # the earlier evaluation stands
            write_status(run_dir, "done")
        raise
    line = {
        "overrides": overrides,
        "replaced": replaced,
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    with (run_dir / HISTORY_FILE).open("a") as fh:
        fh.write(json.dumps(line) + "\n")
    return metrics


def keep_previous(run_dir: Path) -> str | None:
    """Copy ``eval.json`` (``samples.jsonl``, ``eval_items.parquet``) to the next free
    ``eval-<n>.json`` (``samples-<n>.jsonl``, ``eval_items-<n>.parquet``); returns that name,
    None when there was no evaluation yet."""
    from distillscope.eval.samples_file import SAMPLES_FILE  # torch: after the preflight

    if not (run_dir / EVAL_FILE).is_file():
        return None
    taken = [int(m.group(1)) for p in run_dir.iterdir() if (m := _KEPT.fullmatch(p.name))]
    n = max(taken, default=0) + 1
    shutil.copy2(run_dir / EVAL_FILE, run_dir / f"eval-{n}.json")
    for name, kept in (
        (SAMPLES_FILE, f"samples-{n}.jsonl"),
        (EVAL_ITEMS_FILE, f"eval_items-{n}.parquet"),
    ):
        if (run_dir / name).is_file():
            shutil.copy2(run_dir / name, run_dir / kept)
    return f"eval-{n}.json"
