"""The scorecard: the published claims (one module each, ``scorecard.claims``), the generic
runner that scores them on a study's results, their verdicts, the study's noise, power and the
calibration by simulation (docs/method.md §9).

    for r in score_claims(results_df, study_dir):
        print(r.id, r.verdict, r.reason)

It reads :mod:`distillscope.results` and never the report (tests/test_architecture.py).
"""

from __future__ import annotations

from distillscope.scorecard.claims import CLAIMS, Claim
from distillscope.scorecard.runner import ClaimResult, score_claims

__all__ = ["CLAIMS", "Claim", "ClaimResult", "score_claims"]
