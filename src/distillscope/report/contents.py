"""What a report shows, made once from a study and its scored claims (:class:`Contents`): each
section's table and figures, the summary in words and counts (``summary.Summary``), the texts
both renderings share (how to read the report, the leads, the verdict marks) and the provenance
lines. The claims are split into published ones and instrument checks once, here.

Plain text only: ``html_page`` and ``markdown_page`` escape it and lay it out; ``render``
writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from distillscope import __version__
from distillscope.report.analysis_views import analysis_tables, split_analysis
from distillscope.report.figures import FigureInfo
from distillscope.report.scope import Scope, shown_frames, study_scope
from distillscope.report.summary import Summary, summarize
from distillscope.report.tables import (
    Table,
    experiment_tables,
    main_table,
    problem_runs_table,
    scorecard_table,
    status_table,
)
from distillscope.report.teachers import teacher_table
from distillscope.results.reader import Study
from distillscope.scorecard import decide
from distillscope.scorecard.runner import ClaimResult, instrument_checks, published

if TYPE_CHECKING:
    import pandas as pd

HOW_TO_READ = (
    "Each cell of a table is one configuration; its numbers are the mean over the seeds that "
    "finished, ± the standard error of that mean (SEM), with n the number of finished seeds. "
    "Accuracy, pass@k and sparsity are percentages; forgetting is the change of the skill-suite "
    "score in percentage points (after − before, so negative means the student forgot). OnPD = "
    "on-policy (the student writes the rollouts), OffPD = off-policy (the teacher writes them), "
    "λ = a mixture between the two (−1 teacher, +1 student). The scorecard tests each published "
    "claim (docs/method.md §9) part by part, each estimated with the seed as a block: a part is "
    "supported when its 95% interval lies wholly on the claimed side of its margin (a "
    "no-effect part: wholly inside its band, and the students learned), contradicted when it "
    "lies wholly on the other side; a claim is supported when every part in every stratum is, "
    "contradicted when any part is, 'not applicable' when a premise is absent — in particular "
    "when the regime the papers' findings presuppose (a base student with latent capability, a "
    "style it can produce, sparsity off its floor, an RLVR baseline that learns) is absent or not "
    "established in this study, each regime premise measured from the study's own runs and shown "
    "with its value in the scorecard; a regime the study did not measure makes the claim 'not "
    "tested' — and otherwise "
    "'inconclusive' with its reason (lacks power, with the smallest effect the design decides "
    "and the seeds that would decide it, or an effect near its margin). Beside each verdict are "
    "its rule's false-support and false-contradiction rates, measured by `distillscope report` on "
    "synthetic tables of this study's design and error structure (section 'Calibration'), and "
    "its power: how often it says 'supported' when the published effects are planted. "
    "'Not tested' "
    "means this study lacks the runs or measurements the claim needs; 'not implemented' that "
    "distillscope cannot yet measure them; 'error' that the rule failed (a bug). Only finished "
    "runs enter any number; failed and diverged runs are listed with their reasons."
)
#: The figure a reader looks at first, shown in the summary: ``figures.main_bars_figure`` writes
#: it (the main grid's accuracy by rollout × KL direction × LR, forgetting and sparsity beside).
MAIN_FIGURE = "main_bars"
MAIN_FIGURE_LEAD = (
    "Main figure: the main grid's in-distribution accuracy (first panel) for each rollout "
    "policy × KL direction, one bar per learning rate, mean over seeds ± SEM; forgetting and "
    "update sparsity beside it when the study measured them."
)
#: The section that reports the instrument checks (claims no seed states: docs/method.md §9
#: "Provenance"), apart from the published claims and never counted among them.
CHECKS_TITLE = "Checks of the instrument"
CHECKS_LEAD = (
    "Statements no seed makes: they check that the instrument works as designed (the "
    "λ-spectrum moves likelihoods as intended, clipping is active). Decided by the same rules, "
    "never counted among the published claims above."
)
VERDICT_MARK = {
    "supported": "✓",
    "contradicted": "✗",
    "inconclusive": "?",
    "not applicable": "∅",
    "not tested": "–",
    "not implemented": "–",
    "error": "!",
}


@dataclass
class Contents:
    """What both renderings show, computed once from the study and its scored claims."""

    study: Study
    claims: list[ClaimResult]
    scope: Scope
    summary: Summary  # the summary's sentences, verdict groups, counts, calibration and noise
    tables: dict[str, Table | None]  # status, problems, scorecard, checks, main, teachers
    experiments: dict[str, Table]  # one cell table per experiment
    decided: list[str]  # "What decides the claims": its title and paragraphs ([]: none)
    analysis: list[tuple[str, Table]]  # `distillscope analyze` tables
    main_figure: FigureInfo | None
    figures: list[FigureInfo]  # the others, analysis figures apart
    analysis_figures: list[FigureInfo]


def gather(study: Study, claims: list[ClaimResult], figures: list[FigureInfo]) -> Contents:
    """The report's contents: each section's table, text and figures, made once."""
    main_figure, figures = split_main_figure(figures)
    analysis_figs, figures = split_analysis(figures)
    shown, checks = published(claims), instrument_checks(claims)
    scope = study_scope(study)
    frames = shown_frames(study)  # the finished runs and the baselines, as the tables show them
    return Contents(
        study=study,
        claims=claims,
        scope=scope,
        summary=summarize(shown, checks, study.calibration, scope.phrase()),
        tables=_sections(study, shown, checks, frames),
        experiments=experiment_tables(frames[0]),
        decided=decide.paragraphs(study, claims),
        analysis=analysis_tables(study),
        main_figure=main_figure,
        figures=figures,
        analysis_figures=analysis_figs,
    )


def split_main_figure(figures: list[FigureInfo]) -> tuple[FigureInfo | None, list[FigureInfo]]:
    """The main figure (``MAIN_FIGURE``, picked by name) and the others, in their order."""
    main = next((f for f in figures if f.path.stem == MAIN_FIGURE), None)
    return main, [f for f in figures if f is not main]


def provenance(study: Study) -> list[tuple[str, str]]:
    """The report's provenance lines (command, version, times, machine), as (key, text)."""
    p = study.provenance
    command = p.get("command", "—")
    if isinstance(command, list):  # an argv list
        command = " ".join(map(str, command))
    items = [("Command", str(command)), ("distillscope version", str(p.get("version", "—")))]
    for key in ("started", "finished"):
        items.append((key.capitalize(), str(p.get(key, "—"))))
    took = _duration(p.get("started"), p.get("finished"))
    if took:
        items.append(("Duration", took))
    items.append(("Machine", str(p.get("machine", "—"))))
    items.append(("Report written", f"{_now()} by distillscope {__version__}"))
    return items


def _duration(start: object, end: object) -> str:
    try:
        s = datetime.fromisoformat(str(start))
        e = datetime.fromisoformat(str(end))
        seconds = (e - s).total_seconds()
    except (TypeError, ValueError):
        return ""
    if seconds < 0:
        return ""
    h, rest = divmod(int(seconds), 3600)
    return f"{h} h {rest // 60:02d} min" if h else f"{rest // 60} min {rest % 60:02d} s"


def main_lead(scope: Scope) -> str:
    """The main table's lead: what its cells are and which models and task they are of."""
    return (
        f"Mean ± SEM over seeds; n = finished seeds. {scope.models_text()}; the last row is the "
        "untrained student, evaluated with the same seeds (the reference, not a cell)."
    )


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _sections(
    study: Study,
    shown: list[ClaimResult],
    checks: list[ClaimResult],
    frames: tuple[pd.DataFrame, pd.DataFrame],
) -> dict[str, Table | None]:
    return {
        "status": status_table(study.results, study.baselines),
        "problems": problem_runs_table(study.results),
        "scorecard": scorecard_table(shown, study.calibration),
        "checks": scorecard_table(checks, study.calibration) if checks else None,
        "main": main_table(*frames),
        # two teachers or more (report/teachers.py)
        "teachers": teacher_table(study.finished, study.spec),
    }
