"""Scorecard rule on the RLVR follow-up: docs/method.md §9 claim 11 (claim 20 is specified in
``report.claims.c20_rlvr_starts``).

Both read the RLVR stage's runs (``parent_run`` set): each carries the distillation cell it
started from (rollout, KL, LR, seed — its parent's config) and, on held-out items, the accuracy
before and after RLVR on the RLVR task (``rlvr/eval_accuracy``) and, when it is another task,
on the harder variant (``rlvr/harder_accuracy``). Before and after are measured on the same
items with the same draws, so a run's change is paired. Margins are named constants;
``claimkit`` says what "beyond" and "within" mean.
"""

from __future__ import annotations

import math

import pandas as pd

from distillscope.report.aggregate import done, with_labels
from distillscope.report.claimkit import (
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    has,
    is_rlvr,
)
from distillscope.report.matching import ON_VS_OFF, paired
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    interval,
    pooled_pair,
    pp,
    within,
)

POLICY = "rollout.policy"
#: The RLVR measures (``rlvr/<name>`` after, ``rlvr/<name>_before`` before) and their names.
MEASURES = {"eval_accuracy": "RLVR task", "harder_accuracy": "harder variant"}
RLVR_ACCURACY = "rlvr/eval_accuracy"


def rlvr_rows(s: Scoring) -> pd.DataFrame:
    """The finished RLVR runs, labelled, with ``_change/<name>`` = 100 · (after − before) pp."""
    return s.cached(_rlvr_rows)


def _rlvr_rows(s: Scoring) -> pd.DataFrame:
    rows = done(s.df)
    rows = rows[is_rlvr(rows)]
    extra = {}
    for name in MEASURES:
        after, before = f"rlvr/{name}", f"rlvr/{name}_before"
        if after in rows.columns and before in rows.columns:
            extra[change_column(name)] = 100.0 * (
                pd.to_numeric(rows[after], errors="coerce")
                - pd.to_numeric(rows[before], errors="coerce")
            )
    return with_labels(rows.assign(**extra))


def change_column(name: str) -> str:
    """The per-run change column of measure ``name`` (pp, not a registered metric: unscaled)."""
    return f"_change/{name}"


def measured(rows: pd.DataFrame) -> list[str]:
    """The measures with both the before and the after value on some RLVR run."""
    return [n for n in MEASURES if has(rows, f"rlvr/{n}", f"rlvr/{n}_before")]


# 11 -----------------------------------------------------------------------------------------
CLAIM_11_MARGIN_PP = 2.0  # the on − off gap after RLVR, equivalence: docs/method.md §9
CLAIM_11_ROUTES = 3  # within ±margin, reversed, or smaller than before: level split over them
CLAIM_11_RULE = (
    "The RLVR stage's runs, each with its distillation cell (rollout × KL × LR, seeds as "
    "replicates). Premise: an on-policy advantage before RLVR (the OnPD − OffPD gap on the "
    "RLVR task's held-out accuracy before RLVR > 0 beyond its one-sided "
    f"{1 - ALPHA:.1%} interval), else not applicable. Per measure (held-out accuracy on the "
    "RLVR task and, when it is another task, "
    "on the harder variant): the OnPD − OffPD gap before RLVR, after RLVR, and its change "
    "(after − before, from each run's paired change), pooled over matched cells. Power first: "
    "RLVR must have moved the RLVR task (the mean change over every run > 0 beyond its one-sided "
    f"{1 - ALPHA:.1%} t-interval), else inconclusive. Supported: on every measure, the gap after "
    f"RLVR lies within ±{CLAIM_11_MARGIN_PP:g} pp (TOST), or is below 0, or is smaller than "
    f"before, each beyond its one-sided {1 - ALPHA / CLAIM_11_ROUTES:.2%} interval (level "
    f"{ALPHA:g} split over the {CLAIM_11_ROUTES} routes). Contradicted: on every measure the "
    f"gap after RLVR is > {CLAIM_11_MARGIN_PP:g} pp beyond its {1 - ALPHA:.1%} interval and not "
    "smaller than before beyond uncertainty. Else inconclusive."
)


def claim_11_lacking(s: Scoring) -> list[str]:
    """What claim 11 lacks: RLVR runs from both rollouts, with before and after accuracy."""
    rows = rlvr_rows(s)
    if rows.empty:
        return ["RLVR runs (a study's rlvr stage)"]
    out = []
    if not {"student", "teacher"} <= set(rows.get(POLICY, pd.Series(dtype=object)).map(str)):
        out.append("RLVR runs from both OnPD and OffPD checkpoints")
    if "eval_accuracy" not in measured(rows):
        out.append("rlvr/eval_accuracy before and after RLVR")
    return out


def gap(rows: pd.DataFrame, metric: str, key: str) -> Pair:
    """OnPD − OffPD of ``metric``, pooled over the matched cells (display units)."""
    return pooled_pair(paired(rows, metric, ON_VS_OFF), key)


def rlvr_moved(rows: pd.DataFrame) -> Pair:
    """The mean per-run change of the RLVR task's accuracy against 0 (cells as one sample)."""
    x = pd.to_numeric(rows[change_column("eval_accuracy")], errors="coerce").dropna()
    n = len(x)
    sem = float(x.std(ddof=1) / math.sqrt(n)) if n >= 2 else math.nan
    return Pair("RLVR change", float(x.mean()) if n else math.nan, sem, 0.0, 0.0, n - 1.0, math.inf)


def claim_11_does_not_survive(s: Scoring) -> Verdict:
    """Claim 11's verdict (``CLAIM_11_RULE``)."""
    rows = rlvr_rows(s)
    alpha = ALPHA / CLAIM_11_ROUTES
    moved = rlvr_moved(rows)
    parts, fades, survives = [], [], []
    for name in measured(rows):
        before = gap(rows, f"rlvr/{name}_before", "before")
        after = gap(rows, f"rlvr/{name}", "after")
        change = gap(rows, change_column(name), "change")
        fades.append(
            within(after, CLAIM_11_MARGIN_PP, alpha)
            or beyond(after, 0.0, alpha) == -1
            or beyond(change, 0.0, alpha) == -1
        )
        survives.append(beyond(after, CLAIM_11_MARGIN_PP) == 1 and beyond(change, 0.0) != -1)
        parts.append(
            f"{MEASURES[name]}: gap before {pp(before.diff)} pp {interval(before)}, after "
            f"{pp(after.diff)} pp {interval(after, alpha)}, change {pp(change.diff)} pp "
            f"{interval(change, alpha)}"
        )
    head = parts[0].split(": ", 1)[1].split(", change")[0] if parts else ""
    evidence = "; ".join(parts) + f"; RLVR changed the RLVR task by {pp(moved.diff)} pp "
    evidence += f"{interval(moved)} on average"
    premise = gap(rows, "rlvr/eval_accuracy_before", "before")
    if beyond(premise, 0.0) != 1:  # "that advantage": no on-policy advantage, nothing to survive
        return Verdict(
            "not applicable",
            "the premise is absent: before RLVR, no on-policy advantage on the RLVR task "
            f"(gap {pp(premise.diff)} pp {interval(premise)}, not above 0 beyond uncertainty). "
            + evidence,
            CLAIM_11_RULE,
            "premise absent",
        )
    if beyond(moved, 0.0) != 1:
        return Verdict(
            "inconclusive",
            f"no power: RLVR did not move the RLVR task. {evidence}",
            CLAIM_11_RULE,
            "no power",
        )
    return decide(CLAIM_11_RULE, evidence, all(survives), all(fades), head)


RULES_RLVR = [
    ClaimRule(
        11,
        "That advantage does not reliably survive a later RLVR stage.",
        "an RLVR stage (a study's rlvr: section) from OnPD and OffPD checkpoints, with "
        "rlvr/eval_accuracy (and rlvr/harder_accuracy) before and after",
        lambda s: True,
        claim_11_does_not_survive,
        lacking=claim_11_lacking,
    ),
]
