"""``write_report(study_dir)``: the study's report as self-contained HTML and as Markdown.

    distillscope report STUDY_DIR     # → STUDY_DIR/report/{report.html, report.md, figures/*.png}

The HTML embeds its figures as base64 PNG and its CSS inline, so it opens offline and can be
mailed as one file. Every string that comes from the store (study name, run ids, configs,
reasons, evidence built from them) is escaped: ``html.escape`` for HTML, entity- and
backslash-escaping for Markdown. Markup is only ever produced by this module.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from distillscope import __version__
from distillscope.report import teachers
from distillscope.report.analysis_views import analysis_figures, analysis_tables, split_analysis
from distillscope.report.curves import training_figures
from distillscope.report.figures import (
    FigureInfo,
    likelihood_figure,
    lr_sweep_figure,
    main_bars_figure,
    pass_at_k_figure,
    spectrum_figure,
)
from distillscope.report.profile_figures import profile_figures
from distillscope.report.rlvr_figures import rlvr_figure
from distillscope.report.scope import Scope, shown_frames, study_scope
from distillscope.report.summary import (
    UNTESTED,
    SummaryGroup,
    calibration_sentence,
    checks_sentence,
    noise_table,
    summary_groups,
    summary_sentence,
)
from distillscope.report.tables import (
    REGIME_COLUMN,
    Table,
    experiment_tables,
    main_table,
    problem_runs_table,
    scorecard_table,
    status_table,
    verdict_counts,
)
from distillscope.report.teachers import teacher_table
from distillscope.results.reader import Study, load_study
from distillscope.scorecard import decide
from distillscope.scorecard.runner import (
    ClaimResult,
    instrument_checks,
    published,
    score_study,
)

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
_NOWRAP = ("Rollout", "Objective", "LR", "Status", "Run")
#: The figure a reader looks at first, shown in the summary: ``figures.main_bars_figure`` writes
#: it (the main grid's accuracy by rollout × KL direction × LR, forgetting and sparsity beside).
MAIN_FIGURE = "main_bars"
MAIN_FIGURE_LEAD = (
    "Main figure: the main grid's in-distribution accuracy (first panel) for each rollout "
    "policy × KL direction, one bar per learning rate, mean over seeds ± SEM; forgetting and "
    "update sparsity beside it when the study measured them."
)
#: Scorecard columns the HTML folds into one <details> cell; the Markdown table keeps them.
FOLDED = ("Quote", "Evidence", "Rule")
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

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;font-size:15px;
 line-height:1.45;color:#1a1a1a;max-width:1200px;margin:2em auto;padding:0 1.2em}
h1{font-size:1.7em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ccc;
 padding-bottom:.2em}.muted{color:#555}code{background:#f3f3f3;padding:.1em .3em;border-radius:3px;
 word-break:break-all}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}th,td{border:1px solid #cfcfcf;
 padding:.3em .55em;vertical-align:top;text-align:left}th{background:#f0f0f0}
td.label{white-space:nowrap}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
dl.prov{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}
dl.prov dt{font-weight:600}
dl.prov dd{margin:0}
.verdict{font-weight:700;white-space:nowrap;padding:.1em .45em;border-radius:4px}
.verdict-supported .verdict{background:#d4ecf9;color:#00456e}
.verdict-contradicted .verdict{background:#fbe0cc;color:#8a3300}
.verdict-inconclusive .verdict{background:#fff3c4;color:#5c4a00}
.verdict-not-tested .verdict{background:#ececec;color:#444}
.verdict-not-applicable .verdict{background:#ececec;color:#444}
tr.verdict-not-tested td{color:#666}td.small{font-size:.85em;color:#333}
.verdict-not-implemented .verdict{background:#ececec;color:#444}
.verdict-error .verdict{background:#f6c6c6;color:#7a0000}
ul.findings{list-style:none;padding:0}ul.findings>li{margin:.5em 0}
ul.findings ul{list-style:none;margin:.3em 0 0;padding-left:1.2em;display:grid;
 grid-template-columns:2em minmax(14em,34em) minmax(14em,1fr);gap:.15em 1.2em}
ul.findings ul li{display:contents}
.cid{display:inline-block;min-width:1.6em;color:#555;font-variant-numeric:tabular-nums}
.headline{font-variant-numeric:tabular-nums;color:#00456e}
td.headline{min-width:12em}
table.scorecard{width:100%}table.scorecard th:nth-child(2){width:22%}
table.scorecard th:nth-child(3){width:1%}table.scorecard th:nth-child(4){width:8%}
table.scorecard th:nth-child(5){width:18%}table.scorecard th:nth-child(6){width:20%}
table.scorecard th:nth-child(7){width:22%}
td details{margin:0}td details summary{font-weight:400;color:#1d5a85}
td details p{margin:.3em 0}
figure{margin:1.2em 0}figure img{max-width:100%;border:1px solid #e2e2e2}
figcaption{font-size:.9em;color:#444;margin-top:.3em}.counts span{margin-right:1.2em}
details{margin:.6em 0}summary{cursor:pointer;font-weight:600}
"""


def write_report(study_dir: Path) -> dict[str, Path]:
    """Write ``STUDY_DIR/report/`` from the results store and return the paths written.

    Returns:
        ``{"html": report.html, "markdown": report.md, "figures": figures/ directory}`` plus one
        ``"figure:<name>"`` entry per PNG.
    """
    study = load_study(Path(study_dir))  # read once: every part below receives this one
    out = study.root / "report"
    fig_dir = out / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    for old in fig_dir.glob("*.png"):  # a re-report must not show figures whose data is gone
        old.unlink()
    claims = score_study(study, alpha=decide.level(study.root))
    figures = _figures(study, fig_dir) + analysis_figures(study, fig_dir)
    contents = gather(study, claims, figures)
    html_path, md_path = out / "report.html", out / "report.md"
    html_path.write_text(render_html(contents), encoding="utf-8")
    md_path.write_text(render_markdown(contents, out), encoding="utf-8")
    paths = {"html": html_path, "markdown": md_path, "figures": fig_dir}
    paths.update({f"figure:{f.path.stem}": f.path for f in figures})
    return paths


@dataclass
class Contents:
    """What both renderings show, computed once from the study and its scored claims."""

    study: Study
    claims: list[ClaimResult]
    scope: Scope
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
    return Contents(
        study=study,
        claims=claims,
        scope=study_scope(study),
        tables=_sections(study, claims),
        experiments=experiment_tables(shown_frames(study)[0]),
        decided=decide.paragraphs(study, claims),
        analysis=analysis_tables(study),
        main_figure=main_figure,
        figures=figures,
        analysis_figures=analysis_figs,
    )


def _figures(study: Study, fig_dir: Path) -> list[FigureInfo]:
    finished = study.finished
    made = [
        f(finished, fig_dir)
        for f in (
            main_bars_figure,
            lr_sweep_figure,
            spectrum_figure,
            likelihood_figure,
            pass_at_k_figure,
        )
    ]
    made.append(rlvr_figure(study, fig_dir))
    made = [f for f in made if f is not None] + training_figures(study, fig_dir)
    return made + profile_figures(study, fig_dir)


# ---------------------------------------------------------------------------------------------
# Shared content


def _provenance(study: Study) -> list[tuple[str, str]]:
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


def _sections(study: Study, claims: list[ClaimResult]) -> dict[str, Table | None]:
    return {
        "status": status_table(study.results, study.baselines),
        "problems": problem_runs_table(study.results),
        "scorecard": scorecard_table(published(claims), study.calibration),
        "checks": scorecard_table(instrument_checks(claims), study.calibration)
        if instrument_checks(claims)
        else None,
        "main": main_table(*shown_frames(study)),
        # two teachers or more (report/teachers.py)
        "teachers": teacher_table(study.finished, study.spec),
    }


# ---------------------------------------------------------------------------------------------
# HTML


def esc(value: object) -> str:
    """HTML-escape any value (quotes included) for text and attribute positions."""
    return html.escape(str(value), quote=True)


def html_table(table: Table) -> str:
    """A Table as HTML; every cell is escaped, row classes come from a fixed vocabulary."""
    head = "".join(f"<th>{esc(c)}</th>" for c in table.columns)
    body = []
    for i, row in enumerate(table.rows):
        cells = "".join(_html_cell(table, j, text) for j, text in enumerate(row))
        body.append(f'<tr class="{_row_class(table, i)}">{cells}</tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def html_scorecard(table: Table) -> str:
    """The scorecard table with each claim's seed quotes, evidence and rule folded into one
    ``<details>`` cell, so that id, claim, verdict, false-verdict rate and headline read at a
    glance."""
    folded = [table.columns.index(c) for c in FOLDED]
    shown = [j for j in range(len(table.columns)) if j not in folded]
    head = "".join(f"<th>{esc(table.columns[j])}</th>" for j in shown)
    body = []
    for i, row in enumerate(table.rows):
        cells = "".join(_html_cell(table, j, row[j]) for j in shown)
        quote, evidence, rule = (row[j] for j in folded)
        inside = f"<p><b>Seed:</b> {esc(quote)}</p>" if quote.strip() else ""
        inside += f"<p>{esc(evidence)}</p>"
        if rule.strip() not in ("", "—"):
            inside += f"<p><b>Rule:</b> {esc(rule)}</p>"
        fold = f"<details><summary>show</summary>{inside}</details>"
        body.append(f'<tr class="{_row_class(table, i)}">{cells}<td class="small">{fold}</td></tr>')
    head += "<th>Quote, evidence and rule</th>"
    rows = "".join(body)
    return f'<table class="scorecard"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _row_class(table: Table, i: int) -> str:
    cls = table.row_classes[i] if i < len(table.row_classes) else ""
    return re.sub(r"[^a-z0-9-]", "", cls)  # defence in depth: class names are ours


def _html_cell(table: Table, j: int, text: str) -> str:
    column = table.columns[j]
    if column == "Verdict":
        mark = VERDICT_MARK.get(text, "")
        return f'<td><span class="verdict">{esc(mark)} {esc(text)}</span></td>'
    if j in table.numeric:
        return f'<td class="num">{esc(text)}</td>'
    if column in ("Evidence", "Rule", "Reason", REGIME_COLUMN):
        return f'<td class="small">{esc(text)}</td>'
    if column == "Headline":
        return f'<td class="headline">{esc(text)}</td>'
    if column in _NOWRAP:
        return f'<td class="label">{esc(text)}</td>'
    return f"<td>{esc(text)}</td>"


def split_main_figure(figures: list[FigureInfo]) -> tuple[FigureInfo | None, list[FigureInfo]]:
    """The main figure (``MAIN_FIGURE``, picked by name) and the others, in their order."""
    main = next((f for f in figures if f.path.stem == MAIN_FIGURE), None)
    return main, [f for f in figures if f is not main]


def _html_summary(c: Contents) -> list[str]:
    """The summary: what was studied (``report.scope``) before any verdict, then the verdicts
    in words (groups named with the scope, headline per decided claim with its calibrated
    rates) and the main figure."""
    scope, claims, study, main_figure = c.scope, c.claims, c.study, c.main_figure
    parts = ["<h2>Summary of findings</h2>", f"<p>{esc(scope.sentence())}</p>", '<dl class="prov">']
    parts += [f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in scope.lines()]
    parts += ["</dl>", f"<p>{esc(summary_sentence(claims, scope.phrase()))}</p>"]
    parts.append('<ul class="findings">')
    parts += [
        _html_group(g) for g in summary_groups(published(claims), study.calibration, scope.phrase())
    ]
    parts.append("</ul>")
    checks = instrument_checks(claims)
    if checks:
        parts += [f"<h3>{esc(CHECKS_TITLE)}</h3>", f"<p>{esc(checks_sentence(claims))}</p>"]
        parts.append('<ul class="findings">')
        parts += [_html_group(g) for g in summary_groups(checks, study.calibration)]
        parts.append("</ul>")
    if main_figure is not None:
        parts += [f"<p>{esc(MAIN_FIGURE_LEAD)}</p>", _html_figure(main_figure)]
    return parts


def _html_group(group: SummaryGroup) -> str:
    slug = re.sub(r"[^a-z0-9-]", "", group.verdict.replace(" ", "-"))
    mark = VERDICT_MARK.get(group.verdict, "")
    head = f'<span class="verdict">{esc(mark)} {esc(group.label)} ({len(group.items)})</span>'
    if group.verdict in UNTESTED:  # compact: one line of numbered names
        names = "; ".join(
            f'<span title="{esc(i.quote)}">{i.id} {esc(i.claim)}</span>' for i in group.items
        )
        return f'<li class="finding verdict-{slug}">{head} <span class="muted">{names}</span></li>'
    items = []
    for item in group.items:
        items.append(  # three grid cells: number, claim, headline (aligned in a column)
            f'<li><span class="cid">{item.id}</span> '
            f'<span title="{esc(item.quote)}">{esc(item.claim)}</span> '
            f'<span class="headline">{esc(item.headline)}</span></li>'
        )
    return f'<li class="finding verdict-{slug}">{head}<ul>{"".join(items)}</ul></li>'


def _html_analysis(c: Contents) -> list[str]:
    """The ``distillscope analyze`` section: each analysed run's tables, then the figures."""
    tables, figures = c.analysis, c.analysis_figures
    if not tables and not figures:
        return []
    parts = ["<h2>Gradient and estimator analysis</h2>"]
    parts += [f"<h3>{esc(title)}</h3>{html_table(table)}" for title, table in tables]
    return parts + [_html_figure(f) for f in figures]


def _html_figure(f: FigureInfo) -> str:
    data = base64.b64encode(f.path.read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{esc(f.title)}" src="data:image/png;base64,{data}">'
        f"<figcaption><b>{esc(f.title)}.</b> {esc(f.caption)}</figcaption></figure>"
    )


def render_html(c: Contents) -> str:
    """The whole report as one self-contained HTML document."""
    study, claims, t = c.study, c.claims, c.tables
    counts = verdict_counts(published(claims))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>distillscope report — {esc(study.name)}</title><style>{CSS}</style></head><body>",
        f"<h1>Distillation study report: {esc(study.name)}</h1>",
    ]
    if study.description:
        parts.append(f'<p class="muted">{esc(study.description)}</p>')
    parts.append('<dl class="prov">')
    for key, value in _provenance(study):
        shown = f"<code>{esc(value)}</code>" if key == "Command" else esc(value)
        parts.append(f"<dt>{esc(key)}</dt><dd>{shown}</dd>")
    parts.append("</dl>")
    parts += _html_summary(c)
    parts += ["<h2>How to read this report</h2>", f"<p>{esc(HOW_TO_READ)}</p>"]
    parts += ["<h2>Runs</h2>", html_table(t["status"])]
    if t["problems"] is not None:
        parts += ["<h3>Failed and diverged runs</h3>", html_table(t["problems"])]
    summary = "".join(
        f"<span>{esc(VERDICT_MARK[v])} {esc(v)}: <b>{n}</b></span>" for v, n in counts.items()
    )
    parts += [
        "<h2>Scorecard of the published claims</h2>",
        f'<p class="counts">{summary}</p>',
        html_scorecard(t["scorecard"]),
        "<h3>Calibration</h3>",
        f"<p>{esc(calibration_sentence(study.calibration))}</p>",
    ]
    noise = noise_table(study.calibration)
    if noise is not None:
        parts.append(
            f"<details><summary>noise components ({len(noise.rows)} metrics)</summary>"
            f"{html_table(noise)}</details>"
        )
    if t["checks"] is not None:
        parts += [f"<h2>{esc(CHECKS_TITLE)}</h2>", f"<p>{esc(CHECKS_LEAD)}</p>"]
        parts.append(html_scorecard(t["checks"]))
    parts += decide.html(c.decided, esc)
    if t["main"] is not None:
        parts += [
            "<h2>Main grid: rollout × KL direction × learning rate</h2>",
            f'<p class="muted">{esc(main_lead(c.scope))}</p>',
            html_table(t["main"]),
        ]
    parts += teachers.html(t["teachers"], esc, html_table)
    if c.figures:
        parts.append("<h2>Figures</h2>")
        parts += [_html_figure(f) for f in c.figures]
    parts += _html_analysis(c)
    if c.experiments:
        parts.append("<h2>All cells by experiment</h2>")
        for name, table in c.experiments.items():
            parts.append(
                f"<details><summary>{esc(name)} ({len(table.rows)} cells)</summary>"
                f"{html_table(table)}</details>"
            )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------------------------------------
# Markdown

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
    for key, value in _provenance(study):
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
