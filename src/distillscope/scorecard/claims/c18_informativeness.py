"""Claim 18 ([D]): informativeness I > 0 is needed; a stronger but mismatched teacher can have
lower I.

Reads only the `teacher_scale` experiment (two teachers, I measured with ≥ 2 rollouts per
prompt). Premise: some teacher's students learned. Parts: the learning teachers' I above 0
(every such teacher), the I gap between the higher-I and the lower-I teacher above 0 (which
one has the lower I must be known), and the higher-I teacher's accuracy − the lower-I one's
above 0 (the lower-I teacher gives the smaller gain), matched on every other axis. The order
of the teachers is read from the data, so both gaps are selected contrasts: their bounds are
Bonferroni over the ordered pairs of teachers (docs/method.md §9 "What an interval covers").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from distillscope.results.stats import ALPHA
from distillscope.scorecard.claim_columns import ACC
from distillscope.scorecard.claim_spec import ABOVE, ANY, EVERY, POOLED, Claim, Part, Quote
from distillscope.scorecard.contrasts import blocks, matched
from distillscope.scorecard.estimate import Blocks, Estimate, not_tested, seed_level
from distillscope.scorecard.evidence import ClaimEvidence, missing_metric
from distillscope.scorecard.learned import LEARNED_PP
from distillscope.scorecard.planting import rows_mask

SCALE = "teacher_scale"
TEACHER = "model.teacher"
INFO = "eval/informativeness"


def _rows(view: ClaimEvidence) -> tuple[pd.DataFrame, str]:
    rows = view.rows(SCALE)
    if TEACHER not in rows.columns or rows[TEACHER].dropna().nunique() < 2:
        return rows, f"two teachers ({TEACHER}) in `{SCALE}`"
    lack = missing_metric(rows, INFO, f"`{SCALE}`")
    return rows, lack


def _info_fit(view: ClaimEvidence) -> Blocks | str:
    rows, lack = _rows(view)
    return lack or blocks(view, SCALE, rows, INFO)


def _ordered(b: Blocks) -> tuple[str, str]:
    """(lower-I teacher, higher-I teacher) by the mean of their cells' fitted I."""
    means = b.cells.assign(_t=b.cells[TEACHER].map(str)).groupby("_t")["mu"].mean()
    return str(means.idxmin()), str(means.idxmax())


def _picked(b: Blocks, xs: list[Estimate], low: str, high: str) -> list[Estimate]:
    """``xs`` (higher-I − lower-I teacher) as contrasts the data picked: the order comes from
    the fit of I, so each bound is Bonferroni over every ordered pair of teachers the data
    could have picked (``Estimate.selected``, as the best-cell claims)."""
    n = b.cells[TEACHER].map(str).nunique()
    what = f"teachers ordered by the data's I: {high} above {low}"
    return [x if x.missing else x.selected(n * (n - 1), what) for x in xs]


def learners(view: ClaimEvidence) -> list[Estimate]:
    """Per teacher, its students' accuracy − the untrained student's (seed as replicate)."""
    rows, lack = _rows(view)
    base = view.baseline()
    lack = lack or missing_metric(rows, ACC, f"`{SCALE}`")
    lack = lack or missing_metric(base, ACC, "the baseline")
    if lack:
        return [not_tested("gain", lack)]
    items = view.ev.item_matrix
    return [
        seed_level(g, ACC, f"gain, {t}", base, items)
        for t, g in rows.groupby(rows[TEACHER].map(str))
    ]


def info_level(view: ClaimEvidence) -> list[Estimate]:
    """I of each teacher whose students learned (its runs, seed as replicate)."""
    rows, lack = _rows(view)
    if lack:
        return [not_tested("I", lack)]
    learned = [x.label.split(", ", 1)[1] for x in learners(view) if _learned(x)]
    if not learned:
        return [not_tested("I", "a teacher whose students learned")]
    teacher = rows[TEACHER].map(str)
    items = view.ev.item_matrix
    return [seed_level(rows[teacher == t], INFO, f"I, {t}", None, items) for t in learned]


def _learned(x: Estimate) -> bool:
    lo, _ = x.bounds(ALPHA)
    return not x.missing and lo > LEARNED_PP


def info_gap(view: ClaimEvidence) -> list[Estimate]:
    """I of the higher-I teacher − the lower-I teacher, matched cells of the fit of I."""
    b = _info_fit(view)
    if isinstance(b, str):
        return [not_tested("I gap", b)]
    low, high = _ordered(b)
    return _picked(b, matched(b, TEACHER, high, low, (), "I gap"), low, high)


def accuracy_gap(view: ClaimEvidence) -> list[Estimate]:
    """Accuracy of the higher-I teacher's students − the lower-I teacher's, matched cells."""
    b = _info_fit(view)
    if isinstance(b, str):
        return [not_tested("Δ accuracy", b)]
    rows, _ = _rows(view)
    acc = blocks(view, SCALE, rows, ACC)
    if isinstance(acc, str):
        return [not_tested("Δ accuracy", acc)]
    low, high = _ordered(b)
    return _picked(b, matched(acc, TEACHER, high, low, (), "Δ accuracy"), low, high)


def plant(d: pd.DataFrame) -> dict[str, np.ndarray]:
    """[D]'s picture in `teacher_scale`: the larger teacher (by model/teacher_params) is
    mismatched — I 0.10 against 0.30 — and its students 10 pp less accurate."""
    rows = rows_mask(d, SCALE)
    sizes = pd.to_numeric(d.get("model/teacher_params", pd.Series(np.nan, index=d.index)))
    if not rows.any() or sizes[rows].nunique() < 2:
        return {}
    large = rows & (sizes == sizes[rows].max()).to_numpy()
    return {
        INFO: np.where(rows, np.where(large, 0.10, 0.30), 0.0),
        ACC: np.where(rows & ~large, 0.10, 0.0),
    }


CLAIMS = (
    Claim(
        id=18,
        title="Informativeness I > 0 is needed; a stronger but mismatched teacher can have "
        "lower I.",
        quotes=(
            Quote(
                "001_836273fe8eeeb907.txt",
                41,
                "Uma destilação bem-sucedida requer $I > 0$.",
                "Successful distillation requires I > 0.",
            ),
            Quote(
                "001_836273fe8eeeb907.txt",
                39,
                "Em alguns casos, um professor altamente capaz (ex: Qwen3-4B-GRPO) "
                "fornece uma orientação pior do que um mais fraco (ex: Qwen3-1.7B-GRPO).",
                "In some cases a highly capable teacher (e.g. Qwen3-4B-GRPO) gives worse "
                "guidance than a weaker one (e.g. Qwen3-1.7B-GRPO).",
            ),
        ),
        experiments=(SCALE,),
        premises=(
            Part(
                "gain",
                f"per teacher, its `{SCALE}` students' accuracy − the untrained student's "
                "(seed as replicate)",
                learners,
                ANY,
                ABOVE,
                LEARNED_PP,
                "'I > 0 is needed' is read on a teacher whose students learn; "
                f"{LEARNED_PP:g} pp is the scorecard's one meaning of 'learned'.",
                published=20.0,
                over="teacher",
            ),
        ),
        parts=(
            Part(
                "I",
                "informativeness of each teacher whose students learned (its runs' "
                "eval/informativeness, seed as replicate)",
                info_level,
                EVERY,
                ABOVE,
                0.0,
                "'I > 0 is needed': the sign is the claim.",
                published=0.3,
                sized=False,
                over="learning teacher",
                unit="",
            ),
            Part(
                "I gap",
                "I of the higher-I teacher − the lower-I teacher, matched cells",
                info_gap,
                POOLED,
                ABOVE,
                0.0,
                "which teacher has the lower I must be known before its gain is compared.",
                published=0.2,
                sized=False,
                unit="",
            ),
            Part(
                "Δ accuracy",
                "accuracy of the higher-I teacher's students − the lower-I teacher's, matched "
                f"on every other axis of `{SCALE}`",
                accuracy_gap,
                POOLED,
                ABOVE,
                0.0,
                "'the teacher with lower I gives the smaller gain': the order is the claim, "
                "any gap beyond uncertainty.",
                published=10.0,
                sized=False,
            ),
        ),
        needs=f"the `{SCALE}` experiment: two teachers with {INFO} (≥ 2 rollouts per prompt), "
        "eval/accuracy, and the untrained-student baseline",
        plant=plant,
        levels=(INFO,),  # I per teacher
    ),
)
