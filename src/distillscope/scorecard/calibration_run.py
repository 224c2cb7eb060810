"""The scorecard's calibration as the report runs it: on by default, cached per design, on two
processes, with a progress line when it takes longer than ``PROGRESS_AFTER_S``.

    from distillscope.scorecard.calibration_run import ensure_calibration
    path = ensure_calibration(study_dir)          # STUDY_DIR/calibration.json, reused if current

Only the rules the study's own table tests are calibrated (a claim "not tested" there is "not
tested" on every synthetic table of its design). The cache key is a SHA-256 of the design rows,
the noise components (with the per-item success rates), the typical values, the draws, the seed,
the claims and the code (the package version and the source of every scorecard and results
module): the same key reuses calibration.json. The claims are scored in ``GROUPS`` fixed
groups, each a ``calibrate`` call with the same seed, so the result does not depend on how many
processes run them. ``REPORT_DRAWS`` is chosen so that the quick preset's calibration stays
within 10% of the study's wall time on 2 cores (BENCHMARKS.md, "Calibration").
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

import distillscope
from distillscope.results.reader import CALIBRATION_FILE, load_study, read_calibration
from distillscope.scorecard.calibrate import Setup, calibrate, setup, tables
from distillscope.scorecard.claims import CLAIMS
from distillscope.scorecard.runner import add_features, score_claims
from distillscope.store import atomic_write_text
from distillscope.workers import watch_parent

REPORT_DRAWS = 40  # synthetic tables per scenario when the report calibrates by default
GROUPS = 4  # claim groups, shared out to the processes as each finishes (balances their cost)
IN_PROCESS_TABLES = 50  # fewer tables than this: scored here (starting a worker costs ~2 s)
PROGRESS_AFTER_S = 2.0  # a progress line when the calibration takes longer than this
UNSCORED = ("not tested", "not implemented", "error")
#: Keys of a calibration merged from the groups' results, per claim.
PER_CLAIM = ("false_support", "false_contradiction", "false_rate", "power")


def ensure_calibration(
    study_dir: Path,
    draws: int = REPORT_DRAWS,
    seed: int = 0,
    say: Callable[[str], None] | None = None,
    workers: int | None = None,
) -> Path:
    """Write ``study_dir``/calibration.json unless the one there has this design's key; returns
    its path. ``say`` receives the progress lines; ``workers`` processes (default: the CPUs, at
    most ``GROUPS``; 1 scores in this process, as for fewer than ``IN_PROCESS_TABLES`` tables).
    The workers are spawned: a script that calls this needs an ``if __name__ == "__main__"``
    guard, or ``workers=1``."""
    study = load_study(Path(study_dir))
    path = study.root / CALIBRATION_FILE
    # with the runs' trajectory features (claims 16, 19, 26): tested, and simulated, as reported
    df = add_features(study.scored, study.metrics, list(CLAIMS))  # axes hashable on load
    claims = [r.id for r in score_claims(df) if r.verdict not in UNSCORED]
    prepared = setup(df, study.root)
    key = calibration_key(prepared, draws, seed, claims)
    old = read_calibration(study.root)
    if old is not None and old.get("key") == key:
        return path
    start = time.monotonic()
    n_tables = tables(draws, claims)
    timer = threading.Timer(
        PROGRESS_AFTER_S,
        lambda: say and say(f"calibrating the scorecard: {n_tables} synthetic tables, {draws} "
                            f"draws per scenario, {len(claims)} claims (cached per design)"),
    )  # fmt: skip
    timer.start()
    try:
        result = _run(
            df, prepared, draws, seed, claims, 1 if n_tables < IN_PROCESS_TABLES else workers
        )
    finally:
        timer.cancel()
    seconds = time.monotonic() - start
    result |= {"key": key, "claims": claims, "tables": n_tables, "seconds": round(seconds, 2)}
    atomic_write_text(path, json.dumps(result, indent=1))
    if say is not None and seconds > PROGRESS_AFTER_S:
        say(f"calibration: {n_tables} tables in {seconds:.1f} s → {path}")
    return path


def calibration_key(prepared: Setup, draws: int, seed: int, claims: list[int]) -> str:
    """SHA-256 of what a calibration depends on (module docstring)."""
    d, metrics, noise, typical = prepared
    h = hashlib.sha256()
    h.update(d.astype(str).to_csv(index=False).encode())
    for m in metrics:
        c = noise[m]
        h.update(json.dumps([m, c.summary(), c.level, c.scale, typical[m]], default=str).encode())
        if c.p_items is not None:
            h.update(np.asarray(c.p_items, dtype=float).tobytes())
    h.update(json.dumps([draws, seed, claims, distillscope.__version__]).encode())
    h.update(code_digest().encode())
    return h.hexdigest()


def code_digest() -> str:
    """SHA-256 of the source of every module of the scorecard and results packages (the rules,
    the plants, the noise model, the aggregation and statistics they read): a change to any of
    them invalidates cached calibrations."""
    root = Path(__file__).parent.parent
    h = hashlib.sha256()
    for package in ("results", "scorecard"):
        for path in sorted((root / package).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _groups(claims: list[int]) -> list[list[int]]:
    """``GROUPS`` fixed groups of the claims (every GROUPS-th claim), the empty ones dropped."""
    return [g for g in (claims[i::GROUPS] for i in range(GROUPS)) if g]


def _run(
    df: Any, prepared: Setup, draws: int, seed: int, claims: list[int], workers: int | None
) -> dict[str, Any]:
    """``calibrate`` over the claim groups (in ``workers`` processes when more than one),
    merged: rates, false rates and power joined by claim."""
    groups = _groups(claims)
    workers = min(workers or os.cpu_count() or 1, len(groups))
    args = [(df, draws, seed, g, None, None, prepared) for g in groups]
    if workers > 1:
        # the workers die with this process: a killed report leaves none calibrating on
        with ProcessPoolExecutor(
            workers, get_context("spawn"), initializer=watch_parent, initargs=(os.getpid(),)
        ) as pool:
            parts = list(pool.map(_calibrate, args))
    else:
        parts = [_calibrate(a) for a in args]
    if not parts:  # nothing to calibrate: every claim untested
        parts = [calibrate(df, draws, seed, [], prepared=prepared)]
    merged = {k: v for k, v in parts[0].items() if k not in ("rates", *PER_CLAIM)}
    merged["rates"] = {s: {} for s in parts[0]["rates"]}
    for part in parts:
        for scenario, by_claim in part["rates"].items():
            merged["rates"][scenario].update(by_claim)
    for k in PER_CLAIM:
        merged[k] = {c: v for part in parts for c, v in part[k].items()}
    return merged


def _calibrate(args: tuple) -> dict[str, Any]:
    """``calibrate(*args)`` (a picklable entry point for the worker processes)."""
    return calibrate(*args)
