"""Guards of the claim modules' ``specify(grid)`` (claims 1–3): a specification built now, on
the main grid, is the one the scorecard ships, documents and scores.

``CLAIMS`` is built once, when the module is imported; claims 14–15 build the same
specifications again on other grids. A spec built now must render the same docs lines, keep
the same margin cases and calibration flags, plant the same offsets and score every table the
same way as the shipped one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from distillscope.scorecard.claim_docs import _claim_text
from distillscope.scorecard.claims import c01_no_rollout_gain, c02_kl_direction, c03_lr_forgetting
from distillscope.scorecard.evidence import Evidence
from distillscope.scorecard.runner import score_spec

MODULES = (c01_no_rollout_gain, c02_kl_direction, c03_lr_forgetting)


def _tables(tb) -> list[pd.DataFrame]:
    """The published picture, a noisy one, and one without OffPD runs."""
    df = tb.paper_main()
    noisy = pd.DataFrame(tb.cells_table(tb.main_cells(), noise=0.05) + tb.baseline())
    return [df, noisy, df[df["rollout.policy"] != tb.OFF]]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_spec_built_now_is_the_shipped_one(module, tb):
    built, (shipped,) = module.specify(), module.CLAIMS
    assert _claim_text(built) == _claim_text(shipped)  # id, title, quote, parts, margins
    assert (built.needs, built.null_true, built.unmeasured) == (
        shipped.needs,
        shipped.null_true,
        shipped.unmeasured,
    )
    assert list(built.features) == list(shipped.features)
    assert (built.plant is None) == (shipped.plant is None)
    cases = [(c.name, c.on_planted) for c in built.margin_cases]
    assert cases == [(c.name, c.on_planted) for c in shipped.margin_cases]
    design = tb.paper_main()
    for a, b in zip(built.margin_cases, shipped.margin_cases, strict=True):
        got, want = a.offsets(design), b.offsets(design)
        assert got.keys() == want.keys()
        assert all(np.array_equal(got[k], want[k]) for k in want)
    for df in _tables(tb):
        ev = Evidence(df)
        assert score_spec(built, ev, strict=True) == score_spec(shipped, ev, strict=True)
