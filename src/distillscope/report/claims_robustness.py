"""Scorecard rules on [P]'s robustness checks: docs/method.md §9 claims 14 and 15.

"The main conclusions hold without gradient clipping" (claim 14) and "… with sampled
estimators" (claim 15) are judged by re-running the rules of the main conclusions (claims 1–4,
resp. 1–2) on the ablation's runs as if they were the main grid (``claimkit.on_grid``): a
conclusion holds there when its rule reaches the verdict it reached on the main grid.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from distillscope.report.claimkit import (
    FINISHED,
    LEARNED_PP,
    MAIN,
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    experiment_rows,
    on_grid,
    plain_rows,
    where,
)
from distillscope.report.claims_grid import RULES_GRID

DECIDED = ("supported", "contradicted")
NOT_TESTED = "not tested"
_BY_ID = {r.id: r for r in RULES_GRID}


def judged(rule: ClaimRule, s: Scoring) -> Verdict | None:
    """``rule``'s verdict on ``s``, None when the scoring cannot test it (not applicable, or
    lacking a measurement); judged once per scoring, so claims 14 and 15 share the main
    grid's verdicts of claims 1–2."""
    return s.cached(_judged, rule.id)


def _judged(s: Scoring, claim: int) -> Verdict | None:
    rule = _BY_ID[claim]
    if not rule.applicable(s) or (rule.lacking is not None and rule.lacking(s)):
        return None
    return rule.judge(s)


def no_clip_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The finished runs without gradient clipping (``optim.grad_clip`` null) of the
    ``no_clip`` experiment: OnPD/OffPD × forward/reverse KL."""
    rows = experiment_rows(df, "no_clip")
    if "optim.grad_clip" not in rows.columns:
        return rows.iloc[0:0]
    rows = rows[rows["optim.grad_clip"].isna()]
    return where(where(rows, "rollout.policy", ["student", "teacher"]), "objective.kind", KL)


#: The sampled estimators renamed to the full-vocabulary kinds the main-grid rules compare.
SAMPLED_AS = {"forward_sampled": "forward_kl", "reverse_sampled": "reverse_kl"}
KL = ("forward_kl", "reverse_kl")


def sampled_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The plain finished runs of the ``sampled`` experiment with its estimators renamed to
    the kinds they estimate (so claim 1's and 2's rules compare them)."""
    rows = plain_rows(experiment_rows(df, "sampled"))
    if "objective.kind" not in rows.columns:
        return rows.iloc[0:0]
    rows = rows[rows["objective.kind"].isin(list(SAMPLED_AS))]
    rows = where(rows, "rollout.policy", ["student", "teacher"])
    return rows.assign(**{"objective.kind": rows["objective.kind"].map(SAMPLED_AS)})


def carried(
    s: Scoring, claim: int, ids: tuple[int, ...]
) -> list[tuple[int, Verdict, Verdict | None]]:
    """(id, verdict on the main grid, verdict on the ablation grid) of each of ``ids`` decided on
    the main grid."""
    return s.cached(_carried, claim, ids)


def _ablation(s: Scoring, claim: int) -> Scoring:
    rows = ROBUST[claim][0](s.grid(FINISHED))
    return on_grid(s, MAIN, rows)


def _carried(
    s: Scoring, claim: int, ids: tuple[int, ...]
) -> list[tuple[int, Verdict, Verdict | None]]:
    sub = _ablation(s, claim)
    out = []
    for i in ids:
        main = judged(_BY_ID[i], s)
        if main is not None and main.verdict in DECIDED:
            out.append((i, main, judged(_BY_ID[i], sub)))
    return out


def robust_lacking(claim: int) -> Callable[[Scoring], list[str]]:
    """What the ablation grid lacks to re-test a conclusion decided on the main grid."""

    def lacking(s: Scoring) -> list[str]:
        name = ROBUST[claim][2]
        return [
            f"the runs to re-test claim {i} on the {name} grid ({_BY_ID[i].needs})"
            for i, _, sub in carried(s, claim, ROBUST[claim][1])
            if sub is None
        ]

    return lacking


def robust_verdict(claim: int) -> Callable[[Scoring], Verdict]:
    """The verdict of a robustness claim (``ROBUST_RULE``)."""

    def judge(s: Scoring) -> Verdict:
        _, ids, name = ROBUST[claim]
        got = carried(s, claim, ids)
        rule = ROBUST_RULE.format(ids=_ids(ids), name=name)
        if not got:
            text = f"none of claims {_ids(ids)} was decided on the main grid: nothing to re-test"
            return Verdict("inconclusive", text, rule, "no main-grid conclusion to re-test")
        parts = [
            f"claim {i}: main grid {main.verdict} ({main.headline}), {name} grid "
            f"{sub.verdict} ({sub.headline})"
            for i, main, sub in got
        ]
        head = f"{name} grid: " + ", ".join(
            f"claim {i} {'same' if sub.verdict == main.verdict else sub.verdict}"
            for i, main, sub in got
        )
        opposite = any(
            sub.verdict in DECIDED and sub.verdict != main.verdict for _, main, sub in got
        )
        same = all(sub.verdict == main.verdict for _, main, sub in got)
        power, text = _ablation(s, claim).learned(MAIN)
        ev = "; ".join(parts) + f"; {name} grid: {text}"
        return decide(rule, ev, opposite, same and power, head)

    return judge


def _ids(ids: tuple[int, ...]) -> str:
    return f"{ids[0]}–{ids[-1]}" if len(ids) > 2 else " and ".join(map(str, ids))


ROBUST_RULE = (
    "The rules of claims {ids} run on the {name} grid as if it were the main grid. Each "
    "conclusion decided (supported or contradicted) on the main grid must be re-testable "
    "there (else not tested). Supported: every such rule reaches the same verdict on the "
    "{name} grid and its students learned (≥ "
    f"{LEARNED_PP:g}"
    " pp over the untrained student beyond uncertainty). Contradicted: some rule reaches "
    "the opposite decided verdict. Else inconclusive."
)

#: claim → (its ablation grid from the finished runs, the conclusions re-tested, grid name)
ROBUST: dict[int, tuple[Callable[[pd.DataFrame], pd.DataFrame], tuple[int, ...], str]] = {
    14: (no_clip_rows, (1, 2, 3, 4), "no-clip"),
    15: (sampled_rows, (1, 2), "sampled-estimator"),
}


def robust_applicable(claim: int) -> Callable[[Scoring], bool]:
    """Whether the study has runs of the claim's ablation grid."""
    return lambda s: not ROBUST[claim][0](s.grid(FINISHED)).empty


RULES_ROBUSTNESS = [
    ClaimRule(
        14,
        "The main conclusions (claims 1–4) hold without gradient clipping.",
        "runs with optim.grad_clip off (experiment no_clip) over rollout × KL × LR",
        robust_applicable(14),
        robust_verdict(14),
        lacking=robust_lacking(14),
    ),
    ClaimRule(
        15,
        "The main conclusions (claims 1–2) hold with sampled estimators.",
        "runs with objective.kind forward_sampled and reverse_sampled over rollout × LR "
        "(experiment sampled)",
        robust_applicable(15),
        robust_verdict(15),
        lacking=robust_lacking(15),
    ),
]
