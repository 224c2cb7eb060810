"""The report as Markdown (:func:`render_markdown`); figures are linked as relative PNG paths.

Every string that comes from the store is entity- and backslash-escaped (:func:`md_escape`), so
no markup or raw HTML from it survives into the file.
"""

from __future__ import annotations

import re
from pathlib import Path

from distillscope.report import teachers
from distillscope.report.contents import (
    CHECKS_LEAD,
    CHECKS_TITLE,
    HOW_TO_READ,
    MAIN_FIGURE_LEAD,
    VERDICT_MARK,
    Contents,
    main_lead,
    provenance,
)
from distillscope.report.figures import FigureInfo
from distillscope.report.summary import (
    UNTESTED,
    SummaryGroup,
    calibration_sentence,
    checks_sentence,
    noise_table,
    summary_groups,
    summary_sentence,
)
from distillscope.report.tables import Table, verdict_counts
from distillscope.scorecard import decide
from distillscope.scorecard.runner import instrument_checks, published

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#<>])")


def md_escape(value: object) -> str:
    """Escape text for a Markdown table cell or paragraph: no markup, no raw HTML, one line.

    ``&``, ``<`` and ``>`` become entities (so no HTML survives a renderer that passes HTML
    through), Markdown specials and the pipe are backslash-escaped, and line breaks become
    spaces so a cell cannot end its table row.
    """
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = re.sub(r"[\r\n]+", " ", text)
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_table(table: Table) -> str:
    """A Table as a GitHub-flavoured Markdown pipe table (every cell escaped)."""
    lines = ["| " + " | ".join(md_escape(c) for c in table.columns) + " |"]
    lines.append(
        "|"
        + "|".join("---:" if j in table.numeric else "---" for j in range(len(table.columns)))
        + "|"
    )
    for row in table.rows:
        cells = [md_escape(c) for c in row]
        if "Verdict" in table.columns:
            j = table.columns.index("Verdict")
            cells[j] = f"**{VERDICT_MARK.get(row[j], '')} {md_escape(row[j])}**"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_markdown(c: Contents, out_dir: Path) -> str:
    """The report as Markdown; figures are linked as relative PNG paths under ``figures/``."""
    study, claims, t = c.study, c.claims, c.tables
    parts = [f"# Distillation study report: {md_escape(study.name)}", ""]
    if study.description:
        parts += [f"_{md_escape(study.description)}_", ""]
    for key, value in provenance(study):
        # Plain escaped text, not a code span: inside backticks entities would show literally
        # and a hostile command would stay raw in the file.
        shown = md_escape(value)
        parts.append(f"- **{md_escape(key)}**: {shown}")
    parts += ["", *_md_summary(c, out_dir)]
    parts += ["## How to read this report", "", md_escape(HOW_TO_READ), ""]
    parts += ["## Runs", "", md_table(t["status"]), ""]
    if t["problems"] is not None:
        parts += ["### Failed and diverged runs", "", md_table(t["problems"]), ""]
    summary = ", ".join(f"{v}: {n}" for v, n in verdict_counts(published(claims)).items())
    parts += ["## Scorecard of the published claims", "", summary, "", md_table(t["scorecard"]), ""]
    parts += ["### Calibration", "", md_escape(calibration_sentence(study.calibration)), ""]
    noise = noise_table(study.calibration)
    parts += [md_table(noise), ""] if noise is not None else []
    if t["checks"] is not None:
        parts += [f"## {CHECKS_TITLE}", "", md_escape(CHECKS_LEAD), "", md_table(t["checks"]), ""]
    parts += decide.markdown(c.decided, md_escape)
    if t["main"] is not None:
        parts += [
            "## Main grid: rollout × KL direction × learning rate",
            "",
            md_escape(main_lead(c.scope)),
            "",
            md_table(t["main"]),
            "",
        ]
    parts += teachers.markdown(t["teachers"], md_escape, md_table)  # two teachers or more
    if c.figures:
        parts += ["## Figures", ""]
        for f in c.figures:
            parts += _md_figure(f, out_dir)
    parts += _md_analysis(c, out_dir)
    if c.experiments:
        parts += ["## All cells by experiment", ""]
        for name, table in c.experiments.items():
            parts += [f"### {md_escape(name)}", "", md_table(table), ""]
    return "\n".join(parts)


def _md_analysis(c: Contents, out_dir: Path) -> list[str]:
    """The ``distillscope analyze`` section as Markdown (see :func:`_html_analysis`)."""
    tables, figures = c.analysis, c.analysis_figures
    if not tables and not figures:
        return []
    parts = ["## Gradient and estimator analysis", ""]
    for title, table in tables:
        parts += [f"### {md_escape(title)}", "", md_table(table), ""]
    return parts + [line for f in figures for line in _md_figure(f, out_dir)]


def _md_figure(f: FigureInfo, out_dir: Path) -> list[str]:
    rel = f.path.relative_to(out_dir).as_posix()
    return [
        f"![{md_escape(f.title)}]({rel})",
        "",
        f"**{md_escape(f.title)}.** {md_escape(f.caption)}",
        "",
    ]


def _md_summary(c: Contents, out_dir: Path) -> list[str]:
    """The summary as Markdown: what was studied, one bullet per verdict group (named with the
    scope), the instrument checks apart, then the main figure."""
    scope, claims, main_figure = c.scope, c.claims, c.main_figure
    calibration = c.study.calibration
    parts = ["## Summary of findings", "", md_escape(scope.sentence()), ""]
    parts += [f"- **{md_escape(k)}**: {md_escape(v)}" for k, v in scope.lines()]
    parts += ["", md_escape(summary_sentence(claims, scope.phrase())), ""]
    parts += _md_groups(summary_groups(published(claims), calibration, scope.phrase()))
    if instrument_checks(claims):
        parts += [f"### {CHECKS_TITLE}", "", md_escape(checks_sentence(claims)), ""]
        parts += _md_groups(summary_groups(instrument_checks(claims), calibration))
    if main_figure is not None:
        parts += [md_escape(MAIN_FIGURE_LEAD), "", *_md_figure(main_figure, out_dir)]
    return parts


def _md_groups(groups: list[SummaryGroup]) -> list[str]:
    """One bullet per verdict group, a sub-bullet per claim with its headline and, on its own
    line, the seed sentences it tests."""
    parts = []
    for group in groups:
        mark = VERDICT_MARK.get(group.verdict, "")
        head = f"**{mark} {md_escape(group.label)} ({len(group.items)}):**"
        if group.verdict in UNTESTED:  # compact: one line of numbered names
            names = "; ".join(f"{i.id} {md_escape(i.claim)}" for i in group.items)
            parts.append(f"- {head} {names}")
            continue
        parts.append(f"- {head}")
        for i in group.items:
            shown = f" — {md_escape(i.headline)}" if i.headline else ""
            parts.append(f"  - {i.id} {md_escape(i.claim)}{shown}")
            if i.quote:
                parts.append(f"    - seed: {md_escape(i.quote)}")
    parts.append("")
    return parts
