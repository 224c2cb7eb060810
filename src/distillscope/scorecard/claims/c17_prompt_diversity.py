"""Claim 17 ([D]): more distinct prompts beat more rollouts per prompt at a fixed budget.

The `diversity` experiment's cells (prompts per step × rollouts per prompt, at equal products:
the budget) on the seed-blocked fit of accuracy. Two parts, per budget: the most-prompts split
− the fewest-prompts split above 3 pp, and every adjacent pair of splits ordered (more prompts
− fewer prompts above 0): a middle split that beats the most-prompts one contradicts the claim
even when the extremes are ordered.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.scorecard.claim_columns import ACC
from distillscope.scorecard.claim_spec import ABOVE, EVERY, Claim, MarginCase, Part, Quote
from distillscope.scorecard.contrasts import blocks
from distillscope.scorecard.estimate import Blocks, Estimate, not_tested
from distillscope.scorecard.evidence import ClaimEvidence
from distillscope.scorecard.planting import in_pp, rows_mask

DIVERSITY = "diversity"
P_COL, G_COL = "rollout.prompts_per_step", "rollout.rollouts_per_prompt"
MARGIN_PP = 3.0


def _fit(view: ClaimEvidence) -> Blocks | str:
    rows = view.rows(DIVERSITY)
    if P_COL not in rows.columns or G_COL not in rows.columns:
        return f"{P_COL} × {G_COL} of the `{DIVERSITY}` runs"
    return blocks(view, DIVERSITY, rows, ACC)


def _budgets(b: Blocks) -> list[tuple[str, np.ndarray]]:
    """Per budget with ≥ 2 splits, its cells' indices sorted by prompts per step (fewest first)."""
    out = []
    prompts = pd.to_numeric(b.cells[P_COL], errors="coerce")
    budget = prompts * pd.to_numeric(b.cells[G_COL], errors="coerce")
    prompts = prompts.to_numpy()
    for value in sorted(budget.dropna().unique()):
        idx = np.flatnonzero((budget == value).to_numpy())
        if len(idx) >= 2:
            out.append((f"budget {value:g}", idx[np.argsort(prompts[idx], kind="stable")]))
    return out


def _split(b: Blocks, i: int) -> str:
    return f"{float(b.cells.at[i, P_COL]):g}×{float(b.cells.at[i, G_COL]):g}"


def _pairs(view: ClaimEvidence, label: str, adjacent: bool) -> list[Estimate]:
    b = _fit(view)
    if isinstance(b, str):
        return [not_tested(label, b)]
    budgets = _budgets(b)
    if not budgets:
        return [not_tested(label, f"two splits of one budget in `{DIVERSITY}`")]
    out = []
    for name, idx in budgets:
        pairs = zip(idx[1:], idx[:-1], strict=True) if adjacent else [(idx[-1], idx[0])]
        for more, fewer in pairs:
            w = np.zeros(len(b.cells))
            w[more], w[fewer] = 1.0, -1.0
            out.append(b.contrast(w, f"{name}: {_split(b, more)} − {_split(b, fewer)}"))
    return out


def extremes(view: ClaimEvidence) -> list[Estimate]:
    """Per budget, the most-prompts split − the fewest-prompts split."""
    return _pairs(view, "Δ most − fewest", adjacent=False)


def adjacent(view: ClaimEvidence) -> list[Estimate]:
    """Per budget, every split − the split with the next fewer prompts."""
    return _pairs(view, "Δ adjacent", adjacent=True)


def _prompt_gain(d: pd.DataFrame, size: float) -> dict[str, np.ndarray]:
    """Accuracy rising with log₂ prompts per step in `diversity`: ``size`` pp from the fewest
    to the most."""
    rows = rows_mask(d, DIVERSITY)
    p = np.log2(pd.to_numeric(d.get(P_COL, pd.Series(np.nan, index=d.index)), errors="coerce"))
    p = p.to_numpy(dtype=float)
    if not rows.any() or np.nanmax(p[rows]) == np.nanmin(p[rows]):
        return {ACC: np.zeros(len(d))}
    lo, hi = np.nanmin(p[rows]), np.nanmax(p[rows])
    return {ACC: np.where(rows, in_pp(ACC, size) * (p - lo) / (hi - lo), 0.0)}


def plant(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """[D]'s picture: the most-prompts split 6 pp above the fewest, linear in log₂ prompts."""
    return _prompt_gain(d, 6.0)


CLAIMS = (
    Claim(
        id=17,
        title="More distinct prompts beat more rollouts per prompt at a fixed budget.",
        quotes=(
            Quote(
                "001_836273fe8eeeb907.txt",
                31,
                "Sob um orçamento computacional fixo, aumentar a diversidade de prompts "
                "(mais problemas distintos) gera uma acurácia significamente maior do que "
                "aumentar a profundidade de rollout (mais amostras por problema).",
                "At a fixed compute budget, increasing prompt diversity (more distinct "
                "problems) yields significantly higher accuracy than increasing rollout "
                "depth (more samples per problem).",
            ),
        ),
        experiments=(DIVERSITY,),
        parts=(
            Part(
                "Δ most − fewest",
                "per budget (prompts × rollouts per step), accuracy of the most-prompts split "
                "− the fewest-prompts split of `diversity`, on its cell + seed fit",
                extremes,
                EVERY,
                ABOVE,
                MARGIN_PP,
                "[D] reports a clear gain for prompt diversity without a size; 3 pp is a gain "
                "a reader would act on and about one evaluation SE of 200 items.",
                published=6.0,
                sized=False,
                over="budget",
            ),
            Part(
                "Δ adjacent",
                "per budget, each split − the split with the next fewer prompts (every "
                "adjacent pair), on the same fit",
                adjacent,
                EVERY,
                ABOVE,
                0.0,
                "'more prompts beat more rollouts' orders every split, not only the extremes: "
                "a split with fewer prompts ahead beyond uncertainty contradicts it.",
                published=3.0,
                sized=False,
                over="adjacent pair of splits",
            ),
        ),
        needs="the `diversity` experiment: ≥ 2 splits of one budget (rollout.prompts_per_step "
        "× rollout.rollouts_per_prompt) with eval/accuracy",
        plant=plant,
        margin_cases=(MarginCase("most prompts +margin", lambda d: _prompt_gain(d, MARGIN_PP)),),
    ),
)
