"""The study report: tables, figures, a scorecard of the published claims, HTML and Markdown.

    distillscope report STUDY_DIR      # writes STUDY_DIR/report/

It reads only the results store (``results.parquet``, ``runs/*/``, ``provenance.json``), so a
study can be re-reported without re-running, and a store from a GPU cluster can be reported on
a laptop. It imports nothing from training, rollouts, objectives, models or torch.
"""

from __future__ import annotations

from distillscope.report.aggregate import aggregate
from distillscope.report.claims import CLAIMS, Claim
from distillscope.report.load import Study, load_study
from distillscope.report.render import write_report
from distillscope.report.scorecard import ClaimResult, score_claims

__all__ = [
    "CLAIMS",
    "Claim",
    "ClaimResult",
    "Study",
    "aggregate",
    "load_study",
    "score_claims",
    "write_report",
]
