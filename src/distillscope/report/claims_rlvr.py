"""Scorecard rules on the RLVR follow-up: docs/method.md §9 claims 11 and 20.

Both read the RLVR stage's runs (``parent_run`` set): each carries the distillation cell it
started from (rollout, KL, LR, seed — its parent's config) and, on held-out items, the accuracy
before and after RLVR on the RLVR task (``rlvr/eval_accuracy``) and, when it is another task,
on the harder variant (``rlvr/harder_accuracy``). Before and after are measured on the same
items with the same draws, so a run's change is paired. Margins are named constants;
``claimkit`` says what "beyond" and "within" mean.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from distillscope.report.aggregate import cell_columns, done, with_labels
from distillscope.report.claimkit import (
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    has,
    is_rlvr,
)
from distillscope.report.matching import ON_VS_OFF, cell_key, cell_means, cell_pair, paired
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    interval,
    num,
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
    "replicates). Per measure (held-out accuracy on the RLVR task and, when it is another task, "
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
    if beyond(moved, 0.0) != 1:
        return Verdict(
            "inconclusive",
            f"no power: RLVR did not move the RLVR task. {evidence}",
            CLAIM_11_RULE,
            "no power",
        )
    return decide(CLAIM_11_RULE, evidence, all(survives), all(fades), head)


# 20 -----------------------------------------------------------------------------------------
CLAIM_20_RULE = (
    "The RLVR stage's runs. Per distillation configuration (rollout × KL × LR, seeds as "
    "replicates), the mean held-out RLVR-task accuracy after RLVR. Supported: the best "
    "configuration is OffPD and the best OffPD − the best OnPD configuration > 0 beyond its "
    f"one-sided {1 - ALPHA:.1%} t-interval. Contradicted: the best OnPD − the best OffPD > 0 "
    "beyond its interval. Else inconclusive. The evidence gives the best OffPD configuration's "
    'accuracy before RLVR ("even near 0% at the start").'
)


def claim_20_lacking(s: Scoring) -> list[str]:
    """What claim 20 lacks: RLVR runs from both rollouts with the RLVR task's accuracy after."""
    rows = rlvr_rows(s)
    if rows.empty or not has(rows, RLVR_ACCURACY):
        return [f"RLVR runs with {RLVR_ACCURACY} (a study's rlvr stage)"]
    if not {"student", "teacher"} <= set(rows.get(POLICY, pd.Series(dtype=object)).map(str)):
        return ["RLVR runs from both OnPD and OffPD checkpoints"]
    return []


def best_cells(rows: pd.DataFrame, metric: str) -> dict[str, pd.Series]:
    """The best cell (highest mean of ``metric``) per rollout policy, with its key and the
    cell's mean of ``metric`` before RLVR (``before``, NaN when unmeasured)."""
    cols = [c for c in cell_columns(rows) if c != "experiment" and not rows[c].isna().all()]
    cells = cell_means(rows, metric, cols).assign(before=math.nan)
    if has(rows, f"{metric}_before"):
        before = cell_means(rows, f"{metric}_before", cols)[[*cols, "mean"]]
        cells = cells.drop(columns="before").merge(
            before.rename(columns={"mean": "before"}), on=cols, how="left"
        )
    varying = [c for c in cols if c != POLICY and rows[c].map(str).nunique() > 1]
    out = {}
    for policy in ("student", "teacher"):
        side = cells[cells[POLICY].map(str) == policy]
        if not side.empty:
            best = side.loc[side["mean"].idxmax()].copy()
            best["key"] = cell_key(best, varying) or "the only configuration"
            out[policy] = best
    return out


def claim_20_offpd_starts(s: Scoring) -> Verdict:
    """Claim 20's verdict (``CLAIM_20_RULE``)."""
    rows = rlvr_rows(s)
    best = best_cells(rows, RLVR_ACCURACY)
    off, on = best["teacher"], best["student"]
    pair = cell_pair("best OffPD − best OnPD", off, on)
    evidence = (
        f"best OffPD ({off['key']}) {num(off['mean'])}% vs best OnPD ({on['key']}) "
        f"{num(on['mean'])}%: {pp(pair.diff)} pp {interval(pair)}"
    )
    start = off["before"]
    if not np.isnan(start):
        evidence += f"; that OffPD configuration scored {num(start)}% on the RLVR task before RLVR"
    head = f"best OffPD − best OnPD {pp(pair.diff)} pp {interval(pair)}"
    supported = off["mean"] > on["mean"] and beyond(pair, 0.0) == 1
    return decide(CLAIM_20_RULE, evidence, beyond(pair, 0.0) == -1, supported, head)


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
    ClaimRule(
        20,
        "[P] The best sustained RLVR starts are off-policy checkpoints, even near 0% at the start.",
        f"an RLVR stage from OnPD and OffPD checkpoints with {RLVR_ACCURACY} (held-out RLVR-task "
        "accuracy after RLVR)",
        lambda s: True,
        claim_20_offpd_starts,
        lacking=claim_20_lacking,
    ),
]
