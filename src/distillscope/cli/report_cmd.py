"""``distillscope report``: (re)write a study's report from its results store.

distillscope report DIR [--no-calibrate] [--draws N]
"""

from __future__ import annotations

from pathlib import Path

import typer

from distillscope.cli.errors import friendly_errors
from distillscope.cli.output import console, err_console
from distillscope.cli.progress import ProgressLog
from distillscope.store import PROGRESS_FILE


@friendly_errors
def report(
    study_dir: Path = typer.Argument(..., help="a study directory"),
    calibrate: bool = typer.Option(
        True,
        help="first measure each scorecard rule's false-verdict rates and power by "
        "simulating the study's error structure (cached in calibration.json per design)",
    ),
    draws: int = typer.Option(None, min=1, help="synthetic tables per scenario (default 40)"),
) -> None:
    """Write STUDY_DIR/report/ (HTML, Markdown, figures, scorecard) from the results store."""
    write_report(study_dir, calibrate, draws)


def write_report(study_dir: Path, calibrate: bool = True, draws: int | None = None) -> None:
    """Write ``study_dir``'s report (``report``, and ``study`` when its runs end), calibrating
    its scorecard first unless ``calibrate`` is False."""
    from distillscope.report import write_report as write

    if not (study_dir / "results.parquet").is_file():
        raise FileNotFoundError(
            f"{study_dir} has no results.parquet; run `distillscope study` first"
        )
    warn_if_spec_replaced(study_dir)
    if calibrate:
        from distillscope.scorecard.calibration_run import REPORT_DRAWS, ensure_calibration

        log_file = study_dir / PROGRESS_FILE
        log = ProgressLog(
            "report", 1, "table", err_console, log_file if log_file.is_file() else None
        )
        ensure_calibration(study_dir, draws or REPORT_DRAWS, say=log.note)
    paths = write(study_dir)
    console.print(f"report: {paths['html']}")


def warn_if_spec_replaced(study_dir: Path) -> None:
    """Warn when study.yaml no longer plans the runs of results.parquet (the file was replaced)."""
    import pandas as pd

    from distillscope.study.baseline import plan_baselines
    from distillscope.study.spec import expand, load_spec

    if not (study_dir / "study.yaml").is_file():
        return
    spec = load_spec(study_dir / "study.yaml", stored=True)
    table_ids = set(pd.read_parquet(study_dir / "results.parquet", columns=["run_id"])["run_id"])
    runs = expand(spec)
    planned = {r.run_id for r in runs} | {b.run_id for b in plan_baselines(runs)}
    if table_ids != planned:
        err_console.print(
            f"[yellow]warning:[/yellow] {study_dir}/study.yaml (study {spec.name!r}) does not "
            f"plan the {len(table_ids)} runs of results.parquet ({len(table_ids - planned)} "
            "unplanned); it was replaced after the study ran, so names and claims may be wrong",
            highlight=False,
        )
