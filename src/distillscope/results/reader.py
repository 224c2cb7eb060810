"""Read a study's results store — and nothing else: the report never re-runs or imports training.

The layout and the per-run readers are :mod:`distillscope.store`; this module assembles them
into the :class:`Study` the report shows. Every reader tolerates what a killed or still-running
study leaves behind: missing files, a torn last line of ``metrics.jsonl``, runs that have a
directory but no row in ``results.parquet`` yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from distillscope.results.aggregate import done, hashable_axes, with_labels
from distillscope.results.items import ItemTable, load_items
from distillscope.safeyaml import YamlError, load_yaml
from distillscope.store import (
    PROVENANCE_FILE,
    RESULTS_FILE,
    RUNS_DIR,
    SEQUENTIAL_FILE,
    STUDY_SPEC_FILE,
    read_json,
    read_metrics,
    read_status,
    run_dir,
)


@dataclass(eq=False)
class Study:
    """Everything the report shows, read from one study directory — once.

    What several readers need is computed on first use and kept: the finished runs with their
    reader labels (``finished``), each run's ``metrics.jsonl`` (``metrics``) and the runs'
    per-item outcomes (``items``), so that a report's figures, tables and claims all read the
    same objects instead of each re-reading the store and re-labelling the runs.
    """

    root: Path
    results: pd.DataFrame  # one row per run (results.parquet, completed from runs/*/status.json)
    spec: dict[str, Any] = field(default_factory=dict)  # study.yaml
    provenance: dict[str, Any] = field(default_factory=dict)  # provenance.json
    # the untrained student's rows (experiment "baseline", distillscope.study.table): not cells
    baselines: pd.DataFrame = field(default_factory=pd.DataFrame)
    calibration: dict[str, Any] | None = None  # calibration.json (scorecard.calibrate), if run
    looks: dict[str, Any] | None = None  # sequential.json: the looks of --until-decided, if any
    _metrics: dict[str, pd.DataFrame] = field(default_factory=dict, init=False, repr=False)

    @property
    def scored(self) -> pd.DataFrame:
        """The runs with the baseline rows: what the scorecard reads (students vs untrained)."""
        if self.baselines.empty:
            return self.results
        return pd.concat([self.results, self.baselines], ignore_index=True)

    @cached_property
    def finished(self) -> pd.DataFrame:
        """The finished runs (not the baseline rows) with their reader labels
        (``finished_runs``): what every table and figure of the report starts from."""
        return finished_runs(self.results)

    @cached_property
    def items(self) -> ItemTable | None:
        """The per-item outcomes of the scored runs (``items.load_items``), read once."""
        return load_items(self.root, self.scored)

    def metrics(self, run_id: str) -> pd.DataFrame:
        """``metrics.jsonl`` of run ``run_id`` as a table (``metrics_frame``), read once."""
        if run_id not in self._metrics:
            self._metrics[run_id] = metrics_frame(self.run_dir(run_id))
        return self._metrics[run_id]

    @property
    def name(self) -> str:
        """The study's name from study.yaml, else its directory name."""
        name = self.spec.get("name") if isinstance(self.spec, dict) else None
        return str(name) if name else self.root.resolve().name

    @property
    def description(self) -> str:
        """The study's free-form description from study.yaml ("" when absent)."""
        text = self.spec.get("description") if isinstance(self.spec, dict) else None
        return str(text) if text else ""

    def run_dir(self, run_id: str) -> Path | None:
        """``STUDY_DIR/runs/<run_id>``; None for an id that is not a plain directory name."""
        return run_dir(self.root, run_id)


def load_study(study_dir: Path) -> Study:
    """Read ``study_dir``; FileNotFoundError (saying what to do) when it has no results table."""
    study_dir = Path(study_dir)
    table = study_dir / RESULTS_FILE
    if not table.is_file():
        raise FileNotFoundError(
            f"{study_dir} has no results.parquet; run `distillscope study` to create it first"
        )
    results = pd.read_parquet(table)
    if "run_id" not in results.columns:
        raise ValueError(
            f"{table} has no run_id column; it was not written by `distillscope study`"
        )
    results["run_id"] = results["run_id"].astype(str)
    results = hashable_axes(_complete_statuses(study_dir, results))
    is_baseline = results["run_id"].str.fullmatch(r"baseline(-\d+)?")
    return Study(
        root=study_dir,
        results=results[~is_baseline].reset_index(drop=True),
        baselines=results[is_baseline].reset_index(drop=True),
        spec=_read_yaml(study_dir / STUDY_SPEC_FILE),
        provenance=read_json(study_dir / PROVENANCE_FILE),
        looks=read_json(study_dir / SEQUENTIAL_FILE) or None,
        calibration=read_calibration(study_dir),
    )


CALIBRATION_FILE = "calibration.json"


def read_calibration(study_dir: Path) -> dict[str, Any] | None:
    """The study's ``calibration.json`` (written by ``report --calibrate``), else None."""
    data = read_json(Path(study_dir) / CALIBRATION_FILE)
    return data if isinstance(data, dict) and "false_rate" in data else None


def finished_runs(results: pd.DataFrame) -> pd.DataFrame:
    """The finished runs of a results table with their reader labels (``with_labels``)."""
    return with_labels(done(results))


def metrics_frame(run: Path | None) -> pd.DataFrame:
    """``metrics.jsonl`` of a run as a table, one row per optimizer step (empty when absent)."""
    return pd.DataFrame(read_metrics(run))


def _complete_statuses(study_dir: Path, results: pd.DataFrame) -> pd.DataFrame:
    """Fill missing ``status``/``reason`` from status.json and add runs the table lacks."""
    results = results.copy()
    for col in ("status", "reason"):
        if col not in results.columns:
            results[col] = None
        results[col] = results[col].astype(object)
    for i, run_id in zip(results.index, results["run_id"], strict=True):
        if pd.isna(results.at[i, "status"]) or results.at[i, "status"] in ("", None):
            st = read_status(run_dir(study_dir, run_id))
            results.at[i, "status"] = st.get("status", "pending")
            results.at[i, "reason"] = st.get("reason", "")
    runs = study_dir / RUNS_DIR
    known = set(results["run_id"])
    extra = []
    if runs.is_dir():
        for path in sorted(p for p in runs.iterdir() if p.is_dir() and p.name not in known):
            st = read_status(path)
            extra.append(
                {
                    "run_id": path.name,
                    "status": st.get("status", "pending"),
                    "reason": st.get("reason", ""),
                }
            )
    if extra:
        results = pd.concat([results, pd.DataFrame(extra)], ignore_index=True)
    results["status"] = results["status"].fillna("pending").astype(str)
    results["reason"] = results["reason"].fillna("").astype(str)
    return results


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = load_yaml(path.read_text(errors="replace"), str(path))
    except (OSError, YamlError):  # the report shows what it can; bounded against YAML bombs
        return {}
    return data if isinstance(data, dict) else {}
