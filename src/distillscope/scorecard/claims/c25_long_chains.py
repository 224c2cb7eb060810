"""Claim 25 ([P]): the conclusions hold for long reasoning chains (Numina-MATH, mean answer
≈ 622 tokens; OnPD + reverse KL best on MATH-500 at the low LR, "suggestive", one run per
condition).

Reads only the `long_chain` experiment, and of it only runs on a long-chain task with real
models: the student's mean answer (``eval/len_mean``) at least ``LONG_TOKENS`` tokens — a
24-token math file is not a long chain — and a teacher that is not a testbed model. Reported
as an observation (the cell means, the best cell named), never decided: [P] ran one seed per
condition and called its result suggestive.
"""

from __future__ import annotations

import pandas as pd

from distillscope.results.aggregate import percent_scale
from distillscope.scorecard.claim_columns import ACC, KIND, LR, POLICY
from distillscope.scorecard.claim_spec import ABOVE, POOLED, Claim, Part, Quote
from distillscope.scorecard.estimate import Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence, missing_metric
from distillscope.scorecard.exact import observation

LONG_CHAIN = "long_chain"
LENGTH = "eval/len_mean"
#: A long chain: a mean answer of at least this many tokens, half [P]'s ≈ 622 on Numina-MATH.
LONG_TOKENS = 300.0


def long_runs(view: ClaimEvidence) -> tuple[pd.DataFrame, str]:
    """The `long_chain` runs with real models and long answers, or what is missing."""
    rows = view.rows(LONG_CHAIN)
    lack = missing_metric(rows, LENGTH, f"the `{LONG_CHAIN}` runs")
    if lack:
        return rows, f"{lack} (the mean answer length that makes a chain long)"
    if "model.teacher" in rows.columns:
        rows = rows[~rows["model.teacher"].map(str).str.startswith("testbed:")]
    length = pd.to_numeric(rows[LENGTH], errors="coerce")
    if rows.empty or length.mean() < LONG_TOKENS:
        shown = f"{length.mean():.0f}" if len(length) else "no"
        return rows, (
            f"runs with real models whose mean answer is ≥ {LONG_TOKENS:g} tokens (this "
            f"study's: {shown} tokens)"
        )
    return rows, missing_metric(rows, ACC, f"the `{LONG_CHAIN}` runs")


def best_cell(view: ClaimEvidence) -> list[Estimate]:
    """The cell means of accuracy per rollout × KL × LR, the best one named (an observation)."""
    rows, lack = long_runs(view)
    if lack:
        return [not_tested("best cell", lack)]
    by = [c for c in (POLICY, KIND, LR) if c in rows.columns]
    acc = pd.to_numeric(rows[ACC], errors="coerce") * percent_scale(ACC)
    cells = rows.assign(_acc=acc).groupby(by, dropna=False)["_acc"]
    means, runs = cells.mean(), cells.count()
    top = means.idxmax()
    parts = [
        f"{_key(k, by)}: {means[k]:.1f}% ({runs[k]} run{'' if runs[k] == 1 else 's'})"
        for k in means.index
    ]
    length = pd.to_numeric(rows[LENGTH], errors="coerce").mean()
    note = (
        f"observation, not a test ({int(runs.max())} run(s) per condition; mean answer "
        f"{length:.0f} tokens): best {_key(top, by)}. {'; '.join(parts)}"
    )
    return [observation("best cell", float(means[top]), note)]


def _key(k: object, by: list[str]) -> str:
    values = k if isinstance(k, tuple) else (k,)
    return ", ".join(f"{c.split('.')[-1]}={v}" for c, v in zip(by, values, strict=True))


CLAIMS = (
    Claim(
        id=25,
        title="The conclusions hold for long reasoning chains (Numina-MATH, real models).",
        quotes=(
            Quote(
                "002_c8062276978be7ba.txt",
                43,
                "En Numina-MATH, con respuestas de 622 tokens de media frente a los "
                "94-135 de las tareas principales, OnPD con reverse KL logra la mejor "
                "MATH-500 a LR bajo.",
                "On Numina-MATH, with answers of 622 tokens on average against 94–135 in "
                "the main tasks, OnPD with reverse KL reaches the best MATH-500 at the "
                "low LR.",
            ),
            Quote(
                "002_c8062276978be7ba.txt",
                43,
                "Pero es 1 run por condición y los propios autores lo llaman “suggestive”.",
                "But it is 1 run per condition and the authors themselves call it “suggestive”.",
            ),
        ),
        experiments=(LONG_CHAIN,),
        parts=(
            Part(
                "best cell",
                f"accuracy per rollout × KL × LR of the `{LONG_CHAIN}` runs with real models "
                f"and a mean answer ≥ {LONG_TOKENS:g} tokens; the best cell named",
                best_cell,
                POOLED,
                ABOVE,
                0.0,
                "an observation: [P] ran one seed per condition and called it suggestive, so "
                "it is reported, never decided.",
                published=0.0,
                unit="%",
            ),
        ),
        needs=f"the `{LONG_CHAIN}` experiment on a long-chain task (mean answer ≥ "
        f"{LONG_TOKENS:g} tokens, e.g. Numina-MATH) with real teacher and student checkpoints",
    ),
)
