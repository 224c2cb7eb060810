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
    "claim04-b-drop-2.3pp-vs-margin-10": SIZE,
    "claim04-d-main-only-as-lr_sweep": NO_FALLBACK,
    "claim04-f-one-seed-cell": ONE_SEED,
    "claim04-g-nan-metric": MISSING_METRIC,
    "claim04-null-flat-sparsity": BOTH_SIDES,
    "claim05-f-one-seed-cell": ONE_SEED,
    "claim05-g-nan-metric": MISSING_METRIC,
    "claim06-a-reverse-flat-at-the-high-lr": STRATA,
    "claim06-b-reverse-slope-worth-1.6pp": SIZE,
    "claim06-d-spectrum-only-as-other": NO_FALLBACK,
    "claim06-f-one-seed-cell": ONE_SEED,
    "claim06-g-nan-metric": MISSING_METRIC,
    "claim06-null-flat": BOTH_SIDES,
    "claim07-d-spectrum-only-as-other": NO_FALLBACK,
    "claim07-f-one-seed-cell": ONE_SEED,
    "claim07-g-nan-metric": MISSING_METRIC,
    "claim08-d-spectrum-only-as-other": NO_FALLBACK,
    "claim08-f-one-seed-cell": ONE_SEED,
    "claim08-g-nan-metric": MISSING_METRIC,
    "claim09-b-pass10-gain-1pp": SIZE,
    "claim09-c-equal-pass10-lower-pass1": PREMISE,
    "claim09-d-main-only-as-no_clip": NO_FALLBACK,
    "claim09-e-duplicate-configs": DUPLICATES,
    "claim09-e-duplicate-run-ids": DUPLICATES,
    "claim09-f-one-seed-cell": ONE_SEED,
    "claim09-g-nan-metric": MISSING_METRIC,
    "claim10-a-forward-only": STRATA,
    "claim10-a-plus16-low-minus4-high": STRATA,
    "claim10-b-plus-2.5pp": SIZE,
    "claim10-d-main-only-as-no_clip": NO_FALLBACK,
    "claim10-f-one-seed-cell": ONE_SEED,
    "claim10-g-nan-metric": MISSING_METRIC,
    "claim11-c-no-advantage-before-rlvr": PREMISE,
    "claim11-d-rlvr-runs-only-in-another-experiment": NO_FALLBACK,
    "claim11-e-duplicate-configs": DUPLICATES,
    "claim11-e-duplicate-run-ids": DUPLICATES,
    "claim11-f-one-seed-cell": ONE_SEED,
    "claim11-g-nan-metric": MISSING_METRIC,
    "claim12-a-second-configuration-resists": STRATA,
    "claim12-b-gap-10pp-below-margin-20": SIZE,
    "claim12-d-style-only-as-other": NO_FALLBACK,
    "claim12-f-one-seed-cell": ONE_SEED,
    "claim12-h-onpd-reverse-adopts": BOTH_SIDES,
    "claim13-d-main-only-as-style": NO_FALLBACK,
    "claim13-f-one-seed-cell": ONE_SEED,
    "claim13-g-nan-metric": MISSING_METRIC,
    "claim14-f-one-seed-cell": ONE_SEED,
    "claim14-g-nan-metric": MISSING_METRIC,
    "claim15-f-one-seed-cell": ONE_SEED,
    "claim15-g-nan-metric": MISSING_METRIC,
}
