"""Claim 20 ([P] §5.3): the best sustained RLVR starts are off-policy checkpoints, even near 0%
task accuracy at the start.

Reads only the RLVR stage's runs (`rlvr`, ``parent_run`` set), each carrying the distillation
configuration it started from. On the seed-blocked fit of held-out RLVR-task accuracy after
RLVR (``rlvr/eval_accuracy``): the best OffPD configuration − the best OnPD configuration above
0. The evidence names both and the OffPD start's accuracy before RLVR. Its planted world is
claim 11's (one picture of the RLVR stage: OnPD starts ahead, OffPD ends ahead).
"""

from __future__ import annotations

import numpy as np

from distillscope.results.matching import cell_key
from distillscope.scorecard.claim_columns import POLICY, STUDENT, TEACHER
from distillscope.scorecard.claim_spec import ABOVE, POOLED, Claim, Part, Quote
from distillscope.scorecard.contrasts import blocks, cell_by
from distillscope.scorecard.estimate import Blocks, Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence, missing_metric

RLVR = "rlvr"
AFTER, BEFORE = "rlvr/eval_accuracy", "rlvr/eval_accuracy_before"


def rlvr_fit(view: ClaimEvidence, metric: str) -> Blocks | str:
    """The seed-blocked fit of ``metric`` over the RLVR stage's runs (their distillation
    configurations as cells), or what is missing."""
    rows = view.rows(RLVR, rlvr=True)
    if rows.empty:
        return f"RLVR runs (the `{RLVR}` stage)"
    if POLICY not in rows.columns or not {STUDENT, TEACHER} <= set(rows[POLICY].map(str)):
        return "RLVR runs from both OnPD and OffPD checkpoints"
    return missing_metric(rows, metric, f"the `{RLVR}` runs") or blocks(view, RLVR, rows, metric)


def name(b: Blocks, i: int) -> str:
    """A configuration's reader name (its varying distillation axes)."""
    varying = [c for c in cell_by(b.rows) if c in b.cells and b.cells[c].map(str).nunique() > 1]
    return cell_key(b.cells.iloc[i], varying) or "the only configuration"


def best(b: Blocks, among: np.ndarray) -> int:
    """The cell with the highest fitted effect among ``among``."""
    idx = np.flatnonzero(among)
    return int(idx[np.argmax(b.cells["mu"].to_numpy(dtype=float)[idx])])


def offpd_lead(view: ClaimEvidence) -> list[Estimate]:
    """Best OffPD configuration − best OnPD configuration, accuracy after RLVR."""
    b = rlvr_fit(view, AFTER)
    if isinstance(b, str):
        return [not_tested("Δ best", b)]
    if b.thin:
        return [not_tested("Δ best", f"{b.cell_names(b.thin)} has fewer than 2 seeds")]
    off, on = best(b, b.mask(**{POLICY: TEACHER})), best(b, b.mask(**{POLICY: STUDENT}))
    w = np.zeros(len(b.cells))
    w[off], w[on] = 1.0, -1.0
    x = b.contrast(w, "Δ best")
    family = int(b.mask(**{POLICY: TEACHER}).sum() * b.mask(**{POLICY: STUDENT}).sum())
    note = f"best OffPD: {name(b, off)}; best OnPD: {name(b, on)}"
    before = rlvr_fit(view, BEFORE)
    if not isinstance(before, str):
        key = b.cells.iloc[off][b.by].map(str).tolist()
        match = (before.cells[before.by].apply(lambda c: c.map(str)) == key).all(axis=1)
        if match.any():
            start = float(before.cells.loc[match.to_numpy(), "mean"].iloc[0])
            note += f"; that OffPD start scored {start:.1f}% before RLVR"
    return [x.selected(family, note)]


CLAIMS = (
    Claim(
        id=20,
        title="The best sustained RLVR starts are off-policy checkpoints, even near 0% task "
        "accuracy at the start.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                46,
                "Los checkpoints con mejor RLVR sostenido son OffPD (forward KL a 1e-5 o "
                "reverse KL a 5e-5), curiosamente partiendo de accuracy cercana a 0% en "
                "la tarea.",
                "The checkpoints with the best sustained RLVR are OffPD (forward KL at "
                "1e-5 or reverse KL at 5e-5), curiously starting from near-0% accuracy on "
                "the task.",
                "§5.3",
            ),
        ),
        experiments=(RLVR,),
        parts=(
            Part(
                "Δ best",
                "held-out RLVR-task accuracy after RLVR: the best OffPD distillation "
                "configuration − the best OnPD one, on the `rlvr` runs' cell + seed fit",
                offpd_lead,
                POOLED,
                ABOVE,
                0.0,
                "'the best starts are off-policy' is an order: the best OffPD configuration "
                "ahead of every OnPD one beyond uncertainty; [P] gives no size.",
                published=10.0,
                sized=False,
            ),
        ),
        needs=f"an RLVR stage (`{RLVR}`) from OnPD and OffPD checkpoints with {AFTER}",
    ),
)
