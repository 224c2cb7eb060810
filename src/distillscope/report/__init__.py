"""The study report: tables, figures, the scorecard's verdicts, HTML and Markdown.

    distillscope report STUDY_DIR      # writes STUDY_DIR/report/

It renders what :mod:`distillscope.results` reads from the store and what
:mod:`distillscope.scorecard` decides from it, so a study can be re-reported without
re-running, and a store from a GPU cluster can be reported on a laptop. It imports nothing from
training, rollouts, objectives, models or torch.
"""

from __future__ import annotations

from distillscope.report.render import write_report

__all__ = ["write_report"]
