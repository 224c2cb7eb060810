"""Claim 29 ([P] §5.3): the best distilled checkpoint is not the best RLVR start.

Reads only the RLVR stage's runs. Each run carries its distillation configuration and the
held-out RLVR-task accuracy before RLVR (``rlvr/eval_accuracy_before``: the distilled
checkpoint) and after (``rlvr/eval_accuracy``). The configuration best before RLVR (highest
fitted mean before) is compared, after RLVR, with the best of the others: that one − it above
2 pp.
"""

from __future__ import annotations

import numpy as np

from distillscope.scorecard.claim_spec import ABOVE, POOLED, Claim, Part, Quote
from distillscope.scorecard.claims.c20_rlvr_starts import AFTER, BEFORE, RLVR, best, name, rlvr_fit
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence

MARGIN_PP = 2.0


def best_start_overtaken(view: ClaimEvidence) -> list[Estimate]:
    """After RLVR: the best other configuration − the configuration best before RLVR."""
    label = "Δ after"
    before, after = rlvr_fit(view, BEFORE), rlvr_fit(view, AFTER)
    lack = next((x for x in (before, after) if isinstance(x, str)), "")
    if lack:
        return [not_tested(label, lack)]
    thin = after.thin or before.thin
    if thin:
        fit = after if after.thin else before
        return [not_tested(label, f"{fit.cell_names(thin)} has fewer than 2 seeds")]
    start = best(before, np.ones(len(before.cells), dtype=bool))
    key = before.cells.iloc[start][before.by].map(str).tolist()
    same = (after.cells[after.by].apply(lambda c: c.map(str)) == key).all(axis=1).to_numpy()
    if not same.any() or len(after.cells) < 2:
        return [not_tested(label, "the best start's runs after RLVR, and another configuration")]
    i = int(np.flatnonzero(same)[0])
    j = best(after, ~same)
    w = np.zeros(len(after.cells))
    w[j], w[i] = 1.0, -1.0
    note = f"best before RLVR: {name(before, start)}; best other after RLVR: {name(after, j)}"
    return [after.contrast(w, label).selected(int((~same).sum()), note)]


CLAIMS = (
    Claim(
        id=29,
        title="The best distilled checkpoint is not the best RLVR start.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                46,
                "los mejores checkpoints iniciales no son los mejores puntos de partida para RLVR",
                "the best initial checkpoints are not the best starting points for RLVR",
                "§5.3",
            ),
            Quote(
                "002_c8062276978be7ba.txt",
                47,
                "El mejor estudiante destilado no es necesariamente el mejor candidato a "
                "ser entrenado con RL.",
                "The best distilled student is not necessarily the best candidate to be "
                "trained with RL.",
            ),
        ),
        experiments=(RLVR,),
        parts=(
            Part(
                "Δ after",
                "held-out RLVR-task accuracy after RLVR: the best configuration other than the "
                "one best before RLVR − that one, on the `rlvr` runs' cell + seed fit",
                best_start_overtaken,
                POOLED,
                ABOVE,
                MARGIN_PP,
                "as claim 11's band (±2 pp): an overtaking smaller than that is not a "
                "different best start.",
                published=10.0,
                sized=False,
            ),
        ),
        needs=f"an RLVR stage (`{RLVR}`) with {BEFORE} and {AFTER} from several distillation "
        "configurations",
    ),
)
