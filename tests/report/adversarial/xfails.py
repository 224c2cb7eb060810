"""The adversarial cases the scorecard does not yet score right, with issue 33's reason.

Each runs as ``pytest.mark.xfail(strict=True)``: the moment the scorecard gets it right the
suite fails until its line here is removed. Keys are case ids (``claimNN-name``).
"""

DUPLICATES = "Scorecard III: rows with the same run id or resolved config count once"
ONE_SEED = "Scorecard III: a cell with fewer than 2 seeds makes its part 'not tested'"
MISSING_METRIC = "Scorecard III: a missing metric makes its part 'not tested' by name"
NO_FALLBACK = "Scorecard III: a claim reads only its declared experiments (no fallback)"
SIZE = "Scorecard III: an effect smaller than its margin contradicts"
STRATA = "Scorecard III: every stratum of the quantifier is judged (no pooling away)"
PREMISE = "Scorecard III: a missing premise is 'not applicable'"
BOTH_SIDES = "Scorecard III: decided on both sides of the margin"

KNOWN: dict[str, str] = {
    "claim14-f-one-seed-cell": ONE_SEED,
    "claim14-g-nan-metric": MISSING_METRIC,
    "claim15-f-one-seed-cell": ONE_SEED,
    "claim15-g-nan-metric": MISSING_METRIC,
}
