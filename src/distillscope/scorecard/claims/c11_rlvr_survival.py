"""Claim 11 ([P] abstract, §5.3): the on-policy advantage does not reliably survive a later RLVR
stage.

Reads only the RLVR stage's runs (`rlvr`, ``parent_run`` set), each carrying the distillation
configuration it started from; before and after RLVR are measured on the same held-out items,
so a run's change (after − before) is paired. On seed-blocked fits over those configurations:

- premise: OnPD − OffPD on the RLVR task before RLVR above 2 pp (an advantage to survive;
  absent → "not applicable");
- per measure (held-out accuracy on the RLVR task and, when measured, on the harder variant),
  the advantage fades by any one route: the OnPD − OffPD gap after RLVR within ±2 pp, or
  reversed (below 0), or smaller than before by more than 2 pp (the gap's change, after −
  before, below −2 pp). Contradicted on a measure when every route is: the gap after is above
  2 pp and shrank by less than 2 pp, beyond uncertainty.

Its planted world (``plant``) is also claim 20's: OnPD starts RLVR ahead, OffPD ends ahead.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.results.aggregate import is_rlvr
from distillscope.scorecard.claim_columns import POLICY, STUDENT, TEACHER
from distillscope.scorecard.claim_spec import (
    ABOVE,
    BELOW,
    EVERY,
    POOLED,
    WITHIN,
    Claim,
    MarginCase,
    Offsets,
    Part,
    Quote,
    Routes,
)
from distillscope.scorecard.claims.c20_rlvr_starts import AFTER, BEFORE, RLVR, rlvr_fit
from distillscope.scorecard.contrasts import blocks, matched
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence, missing_metric
from distillscope.scorecard.planting import in_pp, rows_mask

#: The measures (``rlvr/<name>`` after RLVR, ``rlvr/<name>_before`` before) and their names.
MEASURES = {"eval_accuracy": "RLVR task", "harder_accuracy": "harder variant"}
BAND_PP = 2.0  # the gap after RLVR within ±2 pp: the advantage is gone
#: The planted picture ([P] §5.3, fractions): OnPD starts 10 pp ahead, RLVR lifts every run
#: 10 pp, and OffPD ends 10 pp ahead — claim 11's "reversed" route and claim 20.
PLANT_GAP_BEFORE, PLANT_RLVR_GAIN, PLANT_GAP_AFTER = 0.10, 0.10, -0.10


def _measured(view: ClaimEvidence) -> list[str]:
    """The RLVR task, and the harder variant when some RLVR run measured it before and after."""
    rows = view.rows(RLVR, rlvr=True)
    out = ["eval_accuracy"]
    for name in list(MEASURES)[1:]:
        cols = (f"rlvr/{name}", f"rlvr/{name}_before")
        if all(c in rows and pd.to_numeric(rows[c], errors="coerce").notna().any() for c in cols):
            out.append(name)
    return out


def _gap(view: ClaimEvidence, metric: str, label: str) -> Estimate:
    """OnPD − OffPD of ``metric`` pooled over matched configurations, labelled ``label``."""
    b = rlvr_fit(view, metric)
    if isinstance(b, str):
        return not_tested(label, b)
    return matched(b, POLICY, STUDENT, TEACHER, (), label)[0]


def gap_before_rlvr_task(view: ClaimEvidence) -> list[Estimate]:
    """The premise: OnPD − OffPD on the RLVR task before RLVR."""
    return [_gap(view, BEFORE, "gap before")]


def gap_after(view: ClaimEvidence) -> list[Estimate]:
    """OnPD − OffPD after RLVR, one estimate per measure."""
    return [_gap(view, f"rlvr/{n}", MEASURES[n]) for n in _measured(view)]


def gap_change(view: ClaimEvidence) -> list[Estimate]:
    """OnPD − OffPD of each run's change (after − before, pp), one estimate per measure."""
    rows = view.rows(RLVR, rlvr=True)
    out = []
    for n in _measured(view):
        after, before, label = f"rlvr/{n}", f"rlvr/{n}_before", MEASURES[n]
        fit = rlvr_fit(view, after)
        lack = fit if isinstance(fit, str) else missing_metric(rows, before, f"the `{RLVR}` runs")
        if lack:
            out.append(not_tested(label, lack))
            continue
        change = f"_change/{n}"  # pp: not a registered metric, so taken as display units
        diff = _num(rows[after]) - _num(rows[before])
        b = blocks(view, f"{RLVR} (change)", rows.assign(**{change: 100.0 * diff}), change)
        if isinstance(b, str):
            out.append(not_tested(label, b))
        else:
            out += matched(b, POLICY, STUDENT, TEACHER, (), label)
    return out


def _num(values: pd.Series) -> pd.Series:
    return pd.to_numeric(values, errors="coerce")


def _offsets(d: pd.DataFrame, before: float, gain: float, after: float) -> Offsets:
    """OnPD − OffPD ``before`` and ``after`` RLVR (fractions), every run of the `rlvr` stage
    ``gain`` higher after, on every measure (another RLVR stage, `grpo`, is claim 27's)."""
    rlvr = is_rlvr(d).to_numpy() & rows_mask(d, RLVR)
    policy = d[POLICY].map(str) if POLICY in d.columns else pd.Series("", index=d.index)
    on = rlvr & (policy == STUDENT).to_numpy()
    out: Offsets = {}
    for name in MEASURES:
        out[f"rlvr/{name}_before"] = np.where(on, before, 0.0)
        out[f"rlvr/{name}"] = np.where(rlvr, gain, 0.0) + np.where(on, after, 0.0)
    return out


def planted(d: pd.DataFrame) -> Offsets:
    """Claims 11 and 20 true: ``PLANT_GAP_BEFORE`` … ``PLANT_GAP_AFTER``."""
    return _offsets(d, PLANT_GAP_BEFORE, PLANT_RLVR_GAIN, PLANT_GAP_AFTER)


def survives_at_margin(d: pd.DataFrame) -> Offsets:
    """Every route at its margin: the gap after RLVR +2 pp (the band's edge, not reversed) and
    2 pp smaller than before (4 pp: the premise holds), while RLVR lifts every run."""
    band = in_pp(AFTER, BAND_PP)
    return _offsets(d, 2 * band, PLANT_RLVR_GAIN, band)


def _route(side: str, margin: float, estimate, name: str, estimand: str, why: str, published):
    return Part(name, estimand, estimate, EVERY, side, margin, why, published, over="measure")


_NO_SIZE = "[P] gives the gap after RLVR no size ('does not reliably persist'); "
CLAIMS = (
    Claim(
        id=11,
        title="The on-policy advantage does not reliably survive a later RLVR stage.",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                46,
                "this advantage does not reliably persist after subsequent RLVR",
                "this advantage does not reliably persist after subsequent RLVR",
                "abstract",
            ),
            Quote(
                "000_4fa7018284e9b536.txt",
                35,
                "Esse benefício inicial não persistiu de forma confiável após RLVR subsequente.",
                "This initial benefit did not reliably persist after subsequent RLVR.",
            ),
            Quote(
                "004_dad148f87bfbc925.txt",
                7,
                "L'avanzo della generalizzazione offerto dai dati on-policy su task "
                "aritmetici complessi scompare dopo un ulteriore ciclo di addestramento "
                "RLVR.",
                "The generalisation gain that on-policy data give on complex arithmetic "
                "tasks disappears after a further round of RLVR training.",
            ),
        ),
        experiments=(RLVR,),
        premises=(
            Part(
                "gap before",
                "OnPD − OffPD held-out RLVR-task accuracy before RLVR, pooled over matched "
                "distillation configurations of the `rlvr` runs' cell + seed fit",
                gap_before_rlvr_task,
                POOLED,
                ABOVE,
                BAND_PP,
                "'that advantage' must exist before RLVR: a gap inside the ±2 pp band the "
                "claim allows after RLVR is none to lose ([P]'s harder-variant advantage is "
                "+10–15 pp).",
                published=10.0,
            ),
        ),
        parts=(
            Routes(
                "fades",
                (
                    _route(
                        WITHIN,
                        BAND_PP,
                        gap_after,
                        "gap after",
                        "OnPD − OffPD held-out accuracy after RLVR per measure (RLVR task; "
                        "harder variant when measured), pooled over matched configurations",
                        _NO_SIZE + "±2 pp is a fifth of the +10 pp advantage it starts from.",
                        0.0,
                    ),
                    _route(
                        BELOW,
                        0.0,
                        gap_after,
                        "gap after",
                        "the same gap, reversed",
                        "'the best sustained RLVR starts are off-policy' (§5.3): OffPD ahead.",
                        -10.0,
                    ),
                    _route(
                        BELOW,
                        -BAND_PP,
                        gap_change,
                        "gap change",
                        "OnPD − OffPD of each run's paired change (after − before RLVR) per "
                        "measure",
                        "smaller than before by more than the ±2 pp band (a change inside it "
                        "is no change, so a gap that survives unchanged is decided).",
                        -20.0,
                    ),
                ),
                EVERY,
                over="measure",
            ),
        ),
        needs=f"an RLVR stage (`{RLVR}`) from OnPD and OffPD checkpoints with {BEFORE} and "
        f"{AFTER} (and rlvr/harder_accuracy before and after when measured)",
        plant=planted,
        margin_cases=(MarginCase("every route at its margin", survives_at_margin),),
    ),
)
