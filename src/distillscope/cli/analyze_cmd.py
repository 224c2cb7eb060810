"""``distillscope analyze``: gradient and estimator analyses of a run (docs/analysis.md).

distillscope analyze gradients RUN_DIR --lams -1,0,1     # → RUN_DIR/analysis/gradients.json
distillscope analyze estimators RUN_DIR --samples 32     # → RUN_DIR/analysis/estimators.json
distillscope analyze gradients run.yaml --out DIR        # a config: its untrained student

Each command checks its options and target (a run directory with ``config.yaml``, or a run
config) before loading anything, writes its JSON and PNG figures, and prints its table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from distillscope.cli.errors import friendly_errors
from distillscope.cli.output import console, print_table

if TYPE_CHECKING:  # the commands import these when they run: torch loads only then
    from distillscope.eval.analysis import AnalysisSpec, Target
    from distillscope.report.figures import FigureInfo
    from distillscope.report.tables import Table

_TARGET = typer.Argument(..., help="a run directory (config.yaml inside) or a run-config YAML")
_LAMS = typer.Option("-1,0,1", help="comma-separated λ of the spectrum rollouts, each in [-2, 2]")
_PROMPTS = typer.Option(16, help="rollouts per λ (the run's step-0 training prompts)")
_BINS = typer.Option(6, help="completion-position bins of the profiles")
_STUDENT_T = typer.Option(None, help="student loss temperature (default: the config's)")
_TEACHER_T = typer.Option(None, help="teacher loss temperature (default: the config's)")
_OUT = typer.Option(None, help="output directory (default RUN_DIR/analysis)")


def _prepare(target: Path, out: Path | None, **options):
    """The spec and the resolved target, checked before anything is loaded or written."""
    from distillscope.config import check_machine
    from distillscope.eval.analysis import AnalysisSpec, parse_lams, resolve_target

    spec = AnalysisSpec(lams=parse_lams(options.pop("lams")), **options)
    resolved = resolve_target(target, out)
    check_machine(resolved.cfg)
    return spec, resolved


def analyze_app() -> typer.Typer:
    """The ``analyze`` sub-app, each command wrapped in ``friendly_errors``."""
    app = typer.Typer(
        no_args_is_help=True,
        help="Gradient bounds and KL-estimator bias of a run (docs/analysis.md).",
    )
    app.command("gradients")(friendly_errors(gradients_cmd))
    app.command("estimators")(friendly_errors(estimators_cmd))
    return app


def _analyse(
    status: str,
    spec: AnalysisSpec,
    resolved: Target,
    analyse: Callable[[Target, AnalysisSpec], dict],
    file_name: str,
    draw: Callable[[dict, Path], list[FigureInfo]],
    show: Callable[[dict], tuple[Table, str, str]],
) -> None:
    """Run one analysis under ``status``, write its JSON (``file_name``) and figures (``draw``),
    then print its table and where it wrote them; ``show(data)`` gives the table, its title and
    what to say before "wrote PATH"."""
    from distillscope.eval.analysis import write_analysis

    with console.status(status):
        data = analyse(resolved, spec)
        path = write_analysis(resolved.out_dir, file_name, data)
        figures = draw(data, resolved.out_dir)
    table, title, said = show(data)
    # every cell whole, at any width or piped; a row the report marks is red on a terminal (its
    # Holds / Unbiased / Sample agrees cells say why)
    styles = ["red" if cls else None for cls in table.row_classes]
    print_table(console, title, table.columns, table.rows, numeric=table.numeric, styles=styles)
    console.print(f"{said}wrote {path}")
    for f in figures:
        console.print(f"figure: {f.path}")


def gradients_cmd(
    target: Path = _TARGET,
    lams: str = _LAMS,
    prompts: int = _PROMPTS,
    bins: int = _BINS,
    probes: int = typer.Option(32, help="Jacobian probes per λ for the empirical B"),
    student_temperature: float = _STUDENT_T,
    teacher_temperature: float = _TEACHER_T,
    out: Path = _OUT,
) -> None:
    """Check the gradient bounds of docs/method.md §5 on rollouts at several λ."""
    from distillscope.eval.gradient_analysis import gradient_analysis
    from distillscope.report.analysis_views import GRADIENTS_FILE, gradient_figures, gradient_table

    spec, resolved = _prepare(
        target,
        out,
        lams=lams,
        prompts=prompts,
        n_bins=bins,
        probes=probes,
        student_temperature=student_temperature,
        teacher_temperature=teacher_temperature,
    )

    def show(data: dict) -> tuple[Table, str, str]:
        held = sum(c["holds"] for c in data["checks"])
        title = f"gradient bounds, empirical B = {data['empirical_B']['value']:.4g}"
        return gradient_table(data), title, f"{held} of {len(data['checks'])} bounds hold; "

    _analyse(
        f"gradients of {target} at λ = {lams}",
        spec,
        resolved,
        gradient_analysis,
        GRADIENTS_FILE,
        gradient_figures,
        show,
    )


def estimators_cmd(
    target: Path = _TARGET,
    lams: str = _LAMS,
    prompts: int = _PROMPTS,
    bins: int = _BINS,
    samples: int = typer.Option(32, help="draws per position from π_S and from π_T"),
    topk: int = typer.Option(8, help="k of the top-k + tail objective; 0 = leave it out"),
    student_temperature: float = _STUDENT_T,
    teacher_temperature: float = _TEACHER_T,
    out: Path = _OUT,
) -> None:
    """Bias and std of k1/k2/k3, the sampled forward estimator and top-k + tail vs exact KL."""
    from distillscope.eval.analysis import estimator_analysis
    from distillscope.report.analysis_views import (
        ESTIMATORS_FILE,
        estimator_figures,
        estimator_table,
    )

    if topk < 0:
        raise ValueError(f"--topk must be ≥ 0, got {topk}")
    spec, resolved = _prepare(
        target,
        out,
        lams=lams,
        prompts=prompts,
        n_bins=bins,
        samples=samples,
        topk=topk,
        student_temperature=student_temperature,
        teacher_temperature=teacher_temperature,
    )
    _analyse(
        f"estimators of {target} at λ = {lams}",
        spec,
        resolved,
        estimator_analysis,
        ESTIMATORS_FILE,
        estimator_figures,
        lambda data: (
            estimator_table(data),
            f"KL estimators, {spec.samples} draws per position",
            "",
        ),
    )
