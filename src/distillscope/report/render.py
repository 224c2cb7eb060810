"""``write_report(study_dir)``: the study's report as self-contained HTML and as Markdown.

    distillscope report STUDY_DIR     # → STUDY_DIR/report/{report.html, report.md, figures/*.png}

It reads the study once, scores its claims, draws the figures, gathers what both renderings
show (:mod:`~distillscope.report.contents`) and writes them: :mod:`~distillscope.report.html_page`
(one HTML file, figures embedded, CSS inline, so it opens offline and can be mailed) and
:mod:`~distillscope.report.markdown_page`. Every string that comes from the store (study name,
run ids, configs, reasons, evidence built from them) is escaped: ``html.escape`` for HTML,
entity- and backslash-escaping for Markdown. Markup is only ever produced by those two modules.
"""

from __future__ import annotations

from pathlib import Path

from distillscope.report.analysis_views import analysis_figures
from distillscope.report.contents import gather
from distillscope.report.curves import training_figures
from distillscope.report.figures import (
    FigureInfo,
    likelihood_figure,
    lr_sweep_figure,
    main_bars_figure,
    pass_at_k_figure,
    spectrum_figure,
)
from distillscope.report.html_page import render_html
from distillscope.report.markdown_page import render_markdown
from distillscope.report.profile_figures import profile_figures
from distillscope.report.rlvr_figures import rlvr_figure
from distillscope.results.reader import Study, load_study
from distillscope.scorecard import decide
from distillscope.scorecard.runner import score_study


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
    claims = score_study(study, alpha=decide.level(study.looks))
    figures = _figures(study, fig_dir) + analysis_figures(study, fig_dir)
    contents = gather(study, claims, figures)
    html_path, md_path = out / "report.html", out / "report.md"
    html_path.write_text(render_html(contents), encoding="utf-8")
    md_path.write_text(render_markdown(contents, out), encoding="utf-8")
    paths = {"html": html_path, "markdown": md_path, "figures": fig_dir}
    paths.update({f"figure:{f.path.stem}": f.path for f in figures})
    return paths


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
