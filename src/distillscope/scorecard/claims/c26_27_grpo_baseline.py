"""Claims 26 and 27 ([D]): OPD accelerates early learning; regulated OPD beats the RLVR
baseline.

Both read the `opd` experiment and `grpo`: GRPO from the untrained student on the OPD task at
the OPD runs' budget (the `paper` preset's second RLVR stage). Seeds are blocks across the two
(a GRPO run carries its parent's seed). Claim 26: in-training accuracy at 25% of the steps —
the mean over the steps in [20%, 30%) of a run of ``rollout/reward`` (OPD) or
``rlvr/accuracy`` (GRPO), both the share of the step's sampled completions the verifier accepts
— unregulated OPD − GRPO above 5 pp. Claim 27: final held-out accuracy, hard-clip or
log-compression OPD (``eval/accuracy``) − GRPO (``rlvr/eval_accuracy``: the same task, items
and sampling settings as the distillation run's evaluation) above 2 pp under either regulation.
Regime premise of both: the RLVR baseline learns — GRPO's final held-out accuracy above the
untrained student's, or its final reward above its first, beyond uncertainty (a baseline stuck
at its start is no comparator: ``baseline_learns``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from distillscope.results.aggregate import percent_scale
from distillscope.scorecard.claim_columns import ACC
from distillscope.scorecard.claim_spec import ABOVE, ANY, POOLED, Claim, Offsets, Part, Quote
from distillscope.scorecard.claims.quotes import REGULATED_WINS
from distillscope.scorecard.estimate import Blocks, Estimate, not_tested, seed_level
from distillscope.scorecard.evidence import ClaimEvidence, missing_metric
from distillscope.scorecard.planting import in_pp, rows_mask
from distillscope.scorecard.regime_premises import exact

OPD, GRPO = "opd", "grpo"
REG = "objective.regulation"
REGULATED = ("hard_clip", "log_compress")
EARLY = "traj/accuracy_at_quarter_pp"
WINDOW = (0.2, 0.3)  # "at 25% of the steps": the steps in [20%, 30%) of a run
EARLY_PP, FINAL_PP = 5.0, 2.0
#: The leads the calibration plants (and power is computed at): [D] states no size for either.
PUBLISHED_EARLY_PP, PUBLISHED_FINAL_PP = 15.0, 5.0
GRPO_FINAL = "rlvr/eval_accuracy"
ARM = "arm"
Y = "_pp"  # the compared measure in pp (an unregistered name: Blocks leaves it unscaled)
NEEDS_GRPO = (
    "GRPO from the untrained student on the OPD task (the `grpo` RLVR stage of the paper preset)"
)


def accuracy_at_quarter(metrics: pd.DataFrame) -> float:
    """Mean share of verified completions over the steps in WINDOW of a run, in pp (GRPO's
    ``rlvr/accuracy``, else OPD's ``rollout/reward``); NaN when neither was logged."""
    col = next((c for c in ("rlvr/accuracy", "rollout/reward") if c in metrics), None)
    if metrics.empty or col is None:
        return math.nan
    frame = metrics.sort_values("step") if "step" in metrics else metrics
    values = pd.to_numeric(frame[col], errors="coerce").dropna().reset_index(drop=True)
    lo, hi = (math.floor(len(values) * w) for w in WINDOW)
    window = values.iloc[lo : max(hi, lo + 1)]
    return 100.0 * float(window.mean()) if len(window) else math.nan


def _arms(view: ClaimEvidence, opd: pd.DataFrame, metric: str, grpo_metric: str) -> Blocks | str:
    """One fit of ``metric`` over OPD runs ``opd`` and the GRPO runs (``grpo_metric`` there),
    the arm as the cell and the seed as the block; or what is missing."""
    grpo = view.rows(GRPO, rlvr=True)
    if grpo.empty:
        return NEEDS_GRPO
    lack = missing_metric(opd, metric, f"the `{OPD}` runs")
    lack = lack or missing_metric(grpo, grpo_metric, f"the `{GRPO}` runs")
    if lack:
        return lack

    def pp(rows: pd.DataFrame, col: str) -> pd.Series:
        return pd.to_numeric(rows[col], errors="coerce") * percent_scale(col)

    both = pd.concat(
        [
            opd.assign(**{ARM: opd[REG].map(str), Y: pp(opd, metric)}),
            grpo.assign(**{ARM: "grpo", Y: pp(grpo, grpo_metric)}),
        ]
    )
    return Blocks(both, Y, [ARM])


def _diff(b: Blocks, arm: str, label: str) -> Estimate:
    a, g = b.mask(**{ARM: arm}), b.mask(**{ARM: "grpo"})
    for side in (a, g):
        thin = [i for i in b.thin if side[i]]
        if thin:
            return not_tested(label, f"{b.cell_names(thin)} has fewer than 2 seeds")
    return b.difference(a, g, label)


def early_lead(view: ClaimEvidence) -> list[Estimate]:
    """Unregulated OPD − GRPO, in-training accuracy at 25% of the steps."""
    opd = view.rows(OPD)
    opd = opd[opd[REG].map(str) == "none"] if REG in opd.columns else opd.iloc[0:0]
    b = _arms(view, opd, EARLY, EARLY)
    if isinstance(b, str):
        return [not_tested("Δ early", b)]
    return [_diff(b, "none", "Δ early")]


def final_lead(view: ClaimEvidence) -> list[Estimate]:
    """Per regulation, regulated OPD − GRPO, final held-out accuracy."""
    opd = view.rows(OPD)
    opd = opd[opd[REG].map(str).isin(REGULATED)] if REG in opd.columns else opd.iloc[0:0]
    b = _arms(view, opd, ACC, GRPO_FINAL)
    if isinstance(b, str):
        return [not_tested("Δ final", b)]
    regs = [r for r in REGULATED if b.mask(**{ARM: r}).any()]
    return [_diff(b, r, r) for r in regs] or [not_tested("Δ final", "regulated `opd` runs")]


def baseline_learns(view: ClaimEvidence) -> list[Estimate]:
    """GRPO's gain from the untrained student, per seed (the seed as replicate): its final
    held-out accuracy − the untrained student's accuracy of that seed, and its final − first
    training reward (the share of verified completions)."""
    grpo = view.rows(GRPO, rlvr=True)
    if grpo.empty:
        return [not_tested("GRPO gain", NEEDS_GRPO)]
    base = view.baseline(ACC)
    lack = missing_metric(grpo, GRPO_FINAL, f"the `{GRPO}` runs")
    lack = lack or missing_metric(base, ACC, "the untrained student")
    held_out = base.assign(**{GRPO_FINAL: base[ACC]}) if not lack else None
    out = [
        not_tested("held-out accuracy", lack)
        if held_out is None
        else exact(seed_level(grpo, GRPO_FINAL, "held-out accuracy", held_out, view.ev.item_matrix))
    ]
    first, final = "rlvr/reward_first", "rlvr/reward_final"
    if not missing_metric(grpo, first, "") and not missing_metric(grpo, final, ""):
        gain = grpo.assign(_reward=pd.to_numeric(grpo[final], errors="coerce") * 100.0)
        start = grpo.assign(_reward=pd.to_numeric(grpo[first], errors="coerce") * 100.0)
        out.append(exact(seed_level(gain, "_reward", "reward", start)))
    return out


GRPO_LEARNS = Part(
    "GRPO gain",
    f"`{GRPO}` runs − the untrained student, per seed: final held-out accuracy ({GRPO_FINAL} − "
    f"the baseline's {ACC}) or final − first training reward (rlvr/reward_*), in pp",
    baseline_learns,
    ANY,
    ABOVE,
    0.0,
    "[D]'s RLVR baseline learns from the base student; one stuck at its start is no "
    "comparator (docs/method.md §9, claim 27). The seeds give no size: a sign.",
    published=10.0,
    over="measure",
    regime="learning of the RLVR baseline (GRPO from the untrained student)",
)


def _behind(metric: str, pp: float):
    """The planted world of [D]: the `grpo` runs ``pp`` behind OPD on ``metric``."""

    def plant(d: pd.DataFrame) -> Offsets:
        return {metric: np.where(rows_mask(d, GRPO), -in_pp(metric, pp), 0.0)}

    return plant


PURPOSE = (
    "[D] compares OPD with an RLVR baseline trained from the same untrained student; the "
    "`grpo` stage is that baseline on the OPD task and budget."
)
CLAIMS = (
    Claim(
        id=26,
        title="OPD accelerates early learning (dense token-level guidance).",
        quotes=(
            Quote(
                "001_836273fe8eeeb907.txt",
                30,
                "A OPD acelera significamente o aprendizado nas fases iniciais ao "
                "fornecer orientação densa ao nível do token",
                "OPD significantly accelerates learning in the early phases by providing "
                "dense token-level guidance",
            ),
        ),
        experiments=(OPD, GRPO),
        premises=(GRPO_LEARNS,),
        parts=(
            Part(
                "Δ early",
                "share of verified completions at 25% of the steps (mean over [20%, 30%) of "
                "each run's metrics.jsonl), unregulated `opd` runs − `grpo` runs, seed-blocked",
                early_lead,
                POOLED,
                ABOVE,
                EARLY_PP,
                f"'accelerates': a lead the scorecard calls learned (5 pp). {PURPOSE}",
                published=PUBLISHED_EARLY_PP,
                sized=False,
            ),
        ),
        needs=f"the `{OPD}` experiment and {NEEDS_GRPO}, with metrics.jsonl (report from a "
        "study directory)",
        features={EARLY: accuracy_at_quarter},
        plant=_behind(EARLY, PUBLISHED_EARLY_PP),
    ),
    Claim(
        id=27,
        title="Regulated OPD beats the RLVR baseline.",
        quotes=(REGULATED_WINS,),
        experiments=(OPD, GRPO),
        premises=(GRPO_LEARNS,),
        parts=(
            Part(
                "Δ final",
                "final held-out accuracy, hard-clip (or log-compression) `opd` runs "
                "(eval/accuracy) − `grpo` runs (rlvr/eval_accuracy, same items and settings), "
                "seed-blocked",
                final_lead,
                ANY,
                ABOVE,
                FINAL_PP,
                f"as claim 21's margin (2 pp) for the same kind of comparison. {PURPOSE}",
                published=PUBLISHED_FINAL_PP,
                over="regulation",
                sized=False,
            ),
        ),
        needs=f"the `{OPD}` experiment with regulated runs and {NEEDS_GRPO}",
        aligned=((GRPO, GRPO_FINAL, ACC),),
        plant=_behind(GRPO_FINAL, PUBLISHED_FINAL_PP),
    ),
)
