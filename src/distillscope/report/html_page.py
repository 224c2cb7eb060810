"""The report as one self-contained HTML document (:func:`render_html`).

Figures are embedded as base64 PNG and the CSS inline, so the page opens offline and can be
mailed as one file. Every string that comes from the store (study name, run ids, configs,
reasons, evidence built from them) is escaped with ``html.escape``; row and verdict classes come
from a fixed vocabulary.
"""

from __future__ import annotations

import base64
import html
import re

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
from distillscope.report.tables import REGIME_COLUMN, Table, verdict_counts
from distillscope.scorecard import decide
from distillscope.scorecard.runner import instrument_checks, published

_NOWRAP = ("Rollout", "Objective", "LR", "Status", "Run")
#: Scorecard columns the HTML folds into one <details> cell; the Markdown table keeps them.
FOLDED = ("Quote", "Evidence", "Rule")

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
    for key, value in provenance(study):
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
