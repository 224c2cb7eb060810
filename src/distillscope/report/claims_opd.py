"""Scorecard rules on the [D] claims about on-policy distillation: docs/method.md §9 claims
16–18, 21 and 22.

Length exploitation under signal regulation (16), prompt diversity at a fixed rollout budget
(17), the teacher's informativeness (18), regulated versus naive OPD (21) and a modest
regulated teacher versus a larger unregulated one (22). Claims 16 and 21 read only the `opd`
experiment (``opd_runs``): OPD runs of other experiments (prompt diversity runs unregulated
OPD too) are a different design. Margins are named constants; ``claimkit`` says what
"beyond" means.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from distillscope.labels import REGULATION_NAMES
from distillscope.report.aggregate import cell_columns, done
from distillscope.report.claimkit import (
    FINISHED,
    LEARNED_PP,
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    effect_verdict,
    experiment_rows,
    has,
    is_baseline,
    n_values,
    plain_rows,
    where,
)
from distillscope.report.matching import (
    Contrast,
    cell_means,
    cell_pair,
    describe_pairs,
    match_columns,
    match_keys,
    paired,
)
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    bounds,
    fisher_greater,
    interval,
    num,
    pooled_pair,
    pp,
    sample_pair,
    t_quantile,
    versus,
)

ACC = "eval/accuracy"
REG = "objective.regulation"
REGULATED = ("hard_clip", "log_compress")
OPD_EXPERIMENT = "opd"


def opd_runs(s: Scoring) -> pd.DataFrame:
    """The finished OPD runs of the `opd` experiment (every finished OPD run when the table
    names no experiments). Never OPD runs of another experiment."""
    return s.cached(_opd_runs)


def _opd_runs(s: Scoring) -> pd.DataFrame:
    rows = where(s.grid(FINISHED), "objective.kind", ["opd"])
    if "objective.kind" not in rows.columns or REG not in rows.columns:
        return rows.iloc[0:0]
    if "experiment" in rows.columns:
        rows = rows[rows["experiment"].map(str) == OPD_EXPERIMENT]
    return rows


def regulations(rows: pd.DataFrame) -> set[str]:
    """The values of ``objective.regulation`` among ``rows``."""
    return set(rows[REG].dropna().map(str)) if REG in rows.columns else set()


def both_regulations(rows: pd.DataFrame) -> bool:
    """Whether ``rows`` hold unregulated OPD and hard-clip or log-compression OPD."""
    regs = regulations(rows)
    return "none" in regs and bool(regs & set(REGULATED))


# 16 -----------------------------------------------------------------------------------------
# Trajectory features of one OPD run (``scorecard.trajectory_features``, from metrics.jsonl):
# the reward's peak quarter against the last quarter of steps.
REWARD_DROP = "traj/reward_drop_pp"  # peak quarter's mean rollout/reward − last quarter's (pp)
LEN_RISE, LEN_RISE_SEM = "traj/len_rise", "traj/len_rise_sem"  # rollout/len_mean, tokens
ADV_RISE, ADV_RISE_SEM = "traj/advantage_rise", "traj/advantage_rise_sem"  # opd/advantage_mean
TRAJ_KEYS = (REWARD_DROP, LEN_RISE, LEN_RISE_SEM, ADV_RISE, ADV_RISE_SEM)
CLAIM_16_REWARD_DROP_PP = 5.0  # accuracy (rollout reward) below its peak: docs/method.md §9
RISE_Z = t_quantile(1.0 - ALPHA, math.inf)  # a rise beyond the steps' noise (one-sided)
CLAIM_16_RULE = (
    "Only the `opd` experiment's OPD runs. From each run's metrics.jsonl, split into quarters "
    "of steps: length exploitation = the rollout reward's last-quarter mean ≥ "
    f"{CLAIM_16_REWARD_DROP_PP:g} pp below its peak quarter's, while from the peak quarter to "
    "the last both the mean length (rollout/len_mean) and the mean advantage "
    "(opd/advantage_mean) rise beyond the steps' noise (rise − "
    f"{RISE_Z:.2f}·SEM > 0, SEM of the two quarters' means). Exploitation rates compared by "
    f"Fisher's exact test (one-sided, level {ALPHA:g}). Supported: no regulated run shows it and "
    "unregulated runs show it more often (significant). Contradicted: regulated runs show it "
    "more often (significant). Else inconclusive."
)


def exploited(rows: pd.DataFrame) -> pd.Series:
    """Per run, whether its trajectory shows length exploitation (``CLAIM_16_RULE``)."""

    def risen(rise: str, sem: str) -> pd.Series:
        return rows[rise].astype(float) - RISE_Z * rows[sem].astype(float) > 0

    drop = rows[REWARD_DROP].astype(float) >= CLAIM_16_REWARD_DROP_PP
    return drop & risen(LEN_RISE, LEN_RISE_SEM) & risen(ADV_RISE, ADV_RISE_SEM)


def measured_trajectories(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with every trajectory feature measured."""
    if not all(k in rows.columns for k in TRAJ_KEYS):
        return rows.iloc[0:0]
    vals = rows[list(TRAJ_KEYS)].apply(pd.to_numeric, errors="coerce")
    return rows[vals.notna().all(axis=1)]


def claim_16_lacking(s: Scoring) -> list[str]:
    """What claim 16 needs that the `opd` runs lack: their trajectories, per regulation."""
    rows = opd_runs(s)
    out = []
    if not has(rows, REWARD_DROP, LEN_RISE):
        out.append("per-step rollout/reward and rollout/len_mean of the `opd` runs (metrics.jsonl)")
    if not has(rows, ADV_RISE):
        out.append("per-step opd/advantage_mean of the `opd` runs (metrics.jsonl)")
    if out:
        return out
    measured = measured_trajectories(rows)
    for name, regs in (("unregulated", ["none"]), ("regulated", list(REGULATED))):
        if measured[measured[REG].isin(regs)].empty:
            out.append(f"trajectories of the {name} `opd` runs")
    return out


def claim_16_length_exploitation(s: Scoring) -> Verdict:
    """Claim 16's verdict (``CLAIM_16_RULE``) on the `opd` experiment's trajectories."""
    every = opd_runs(s)
    rows = measured_trajectories(every[every[REG].isin(["none", *REGULATED])])
    flagged = exploited(rows)
    regulated = rows[REG] != "none"
    u_hit, u_n = int(flagged[~regulated].sum()), int((~regulated).sum())
    r_hit, r_n = int(flagged[regulated].sum()), int(regulated.sum())
    p = fisher_greater(u_hit, u_n, r_hit, r_n)
    others = len(teacher_runs(s).index.difference(every.index))
    ev = (
        f"exploitation in unregulated runs {u_hit}/{u_n}, regulated {r_hit}/{r_n} (Fisher "
        f"one-sided p = {p:.3f}). Reward drop from peak {_span(rows[REWARD_DROP])} pp; length "
        f"rise {_span(rows[LEN_RISE])} tokens; advantage rise {_span(rows[ADV_RISE], 3)} nats"
    )
    if len(rows) < len(every):
        ev += f"; {len(every) - len(rows)} `opd` runs without trajectories left out"
    if others:
        ev += f"; {others} OPD runs of other experiments not read"
    contradicted = fisher_greater(r_hit, r_n, u_hit, u_n) < ALPHA
    supported = r_hit == 0 and p < ALPHA
    head = f"exploitation: unregulated {u_hit}/{u_n}, regulated {r_hit}/{r_n}"
    return decide(CLAIM_16_RULE, ev, contradicted, supported, head)


def _span(values: pd.Series, digits: int = 1) -> str:
    v = pd.to_numeric(values, errors="coerce").dropna()
    if v.empty:
        return "n/a"
    return f"{pp(float(v.min()), digits)} to {pp(float(v.max()), digits)}"


# 17 -----------------------------------------------------------------------------------------
P_COL, G_COL = "rollout.prompts_per_step", "rollout.rollouts_per_prompt"
CLAIM_17_MARGIN_PP = 3.0  # the most-prompts setting must gain within a budget: docs/method.md §9
CLAIM_17_RULE = (
    "Budget = prompts × rollouts per step. Within each budget, accuracy of the most-prompts "
    "cell minus the fewest-prompts cell, pooled over budgets. Supported: the gain > "
    f"{CLAIM_17_MARGIN_PP:g} pp beyond its one-sided {1 - ALPHA:.0%} t-interval (needs ≥ 2 seeds "
    "per setting). Contradicted: the gain < 0 beyond that interval. Else inconclusive."
)


def budget_pairs(s: Scoring) -> list[Pair]:
    """Most-prompts vs fewest-prompts cell per budget, matched on every other axis."""
    return s.cached(_budget_pairs)


def _budget_pairs(s: Scoring) -> list[Pair]:
    rows = plain_rows(experiment_rows(s.grid(FINISHED), "diversity"))
    if P_COL not in rows.columns or G_COL not in rows.columns or not has(rows, ACC):
        return []
    rows = rows.assign(_budget=rows[P_COL] * rows[G_COL])
    other = [c for c in match_columns(rows, P_COL) if c != G_COL]
    cells = cell_means(rows, ACC, [*other, "_budget", P_COL, G_COL])
    out = []
    for _, g in cells.groupby(match_keys(cells, [*other, "_budget"]), sort=True):
        if len(g) >= 2:
            hi, lo = g.loc[g[P_COL].idxmax()], g.loc[g[P_COL].idxmin()]
            key = (
                f"budget {hi['_budget']:g}: {hi[P_COL]:g}×{hi[G_COL]:g} vs "
                f"{lo[P_COL]:g}×{lo[G_COL]:g}"
            )
            out.append(cell_pair(key, hi, lo))
    return out


def claim_17_prompt_diversity(s: Scoring) -> Verdict:
    """Claim 17's verdict (``CLAIM_17_RULE``) on the diversity runs."""
    pairs = budget_pairs(s)
    p = pooled_pair(pairs, "more prompts")
    ev = f"pooled gain {pp(p.diff)} pp {interval(p)}. {describe_pairs(pairs)}"
    head = f"most − fewest prompts {pp(p.diff)} pp {interval(p)}"
    return effect_verdict(p, CLAIM_17_MARGIN_PP, CLAIM_17_RULE, ev, head)


# 18 -----------------------------------------------------------------------------------------
INFO = "eval/informativeness"
INFO_EXPERIMENT = "teacher_scale"  # the experiment claims 18 and 22 are designed around
#: A teacher's students learn when their accuracy beats the untrained student's by this many pp
#: beyond uncertainty (claimkit's LEARNED_PP, the scorecard's one meaning of "learned").
CLAIM_18_LEARNED_PP = LEARNED_PP
CLAIM_18_INFO_MARGIN = 0.0  # "I > 0": docs/method.md §9
CLAIM_18_GAIN_MARGIN_PP = 0.0  # the lower-I teacher gives the smaller gain: any gap beyond noise
CLAIM_18_RULE = (
    f"Runs of the `{INFO_EXPERIMENT}` experiment (every finished run when the table has none) "
    f"with {INFO}, per teacher (model.teacher): I = the mean over its runs (seeds and other axes "
    "as replicates) and the gain = its runs' accuracy − the untrained student's. A teacher's "
    f"students learn when the gain > {CLAIM_18_LEARNED_PP:g} pp beyond its one-sided "
    f"{1 - ALPHA:.1%} t-interval. The lowest-I teacher is compared with the highest-I one: "
    "their I gap (which one has the lower I must be known: the gap > 0 beyond its "
    f"{1 - ALPHA:.1%} interval) and their accuracy, cell means matched on every other axis and "
    "pooled. Supported: the I gap is known, some teacher's students learn, every such teacher "
    f"has I > {CLAIM_18_INFO_MARGIN:g} beyond its {1 - ALPHA:.1%} interval, and the higher-I "
    f"teacher's accuracy − the lower-I teacher's > {CLAIM_18_GAIN_MARGIN_PP:g} pp beyond its "
    f"{1 - ALPHA:.1%} interval. Contradicted: the I gap is known and that difference < 0 "
    f"beyond its one-sided {1 - ALPHA / 2:.2%} interval, or I < 0 beyond the same interval "
    "(split over the teachers) for a teacher whose students learn. Else inconclusive."
)


def info_runs(s: Scoring) -> pd.DataFrame:
    """The finished runs claim 18 reads: the `teacher_scale` experiment's when the table has
    it, else every finished run; only those with a teacher."""
    return s.cached(_info_runs)


def _info_runs(s: Scoring) -> pd.DataFrame:
    rows = experiment_rows(s.grid(FINISHED), INFO_EXPERIMENT)
    if TEACHER not in rows.columns:
        return rows.iloc[0:0]
    return rows[rows[TEACHER].notna()]


def _baseline_accuracy(s: Scoring) -> list[float]:
    """The untrained student's accuracy (pp), one value per baseline row."""
    base = done(s.df)
    if ACC not in base.columns:
        return []
    return [
        100.0 * float(x)
        for x in pd.to_numeric(base[is_baseline(base)].get(ACC), errors="coerce").dropna()
    ]


@dataclass(frozen=True)
class TeacherSignal:
    """One teacher's informativeness (``info``: I against 0) and gain (its runs' accuracy
    against the untrained student's, pp), each with its uncertainty over runs."""

    teacher: str
    info: Pair
    gain: Pair

    @property
    def learns(self) -> bool:
        return beyond(self.gain, CLAIM_18_LEARNED_PP) == 1


def teacher_signals(s: Scoring) -> list[TeacherSignal]:
    """Per teacher with a measured I, its :class:`TeacherSignal`, in increasing order of I."""
    return s.cached(_teacher_signals)


def _teacher_signals(s: Scoring) -> list[TeacherSignal]:
    rows = info_runs(s)
    if not has(rows, INFO):
        return []
    ref = _baseline_accuracy(s)
    out = []
    for teacher, g in rows.groupby(rows[TEACHER].map(str), sort=True):
        info = [float(x) for x in pd.to_numeric(g[INFO], errors="coerce").dropna()]
        if not info:
            continue
        acc = [100.0 * float(x) for x in pd.to_numeric(g.get(ACC), errors="coerce").dropna()]
        gain = sample_pair(acc, ref, f"{teacher} vs untrained")
        if len(ref) == 1:  # one baseline row: a fixed reference
            gain = Pair(gain.key, gain.a, gain.a_sem, gain.b, 0.0, gain.a_dof, math.inf)
        zero = sample_pair(info, [], f"I of {teacher}")
        out.append(TeacherSignal(teacher, versus(zero.key, 0.0, zero), gain))
    return sorted(out, key=lambda t: (t.info.a, t.teacher))


def claim_18_lacking(s: Scoring) -> list[str]:
    """What claim 18 needs that the study lacks: I for two teachers, accuracy, a baseline."""
    rows = info_runs(s)
    if len(teacher_signals(s)) < 2:
        return [
            f"{INFO} (rollout.rollouts_per_prompt ≥ 2 on student rollouts) for ≥ 2 teachers; "
            f"the runs read have it for {len(teacher_signals(s))}"
        ]
    out = [] if has(rows, ACC) else [f"{ACC} of the runs"]
    if not _baseline_accuracy(s):
        out.append("the untrained student's accuracy (the study's baseline rows)")
    return out


def claim_18_informativeness(s: Scoring) -> Verdict:
    """Claim 18's verdict (``CLAIM_18_RULE``)."""
    signals = teacher_signals(s)
    low, high = signals[0], signals[-1]
    rows = info_runs(s)
    teacher = rows[TEACHER].map(str)
    key = f"{high.teacher} (higher I) − {low.teacher} (lower I)"
    d = matched_pair(
        rows[teacher == high.teacher],
        rows[teacher == low.teacher],
        ACC,
        (TEACHER, TEACHER_PARAMS),
        key,
    )
    i = high.info
    order = Pair("I gap", i.a, i.a_sem, low.info.a, low.info.a_sem, i.a_dof, low.info.a_dof)
    learners = [t for t in signals if t.learns]
    split = ALPHA / (2 * max(1, len(learners)))
    parts = [
        f"{t.teacher}: I {num(t.info.a, 3)} {_info_interval(t.info)}, gain "
        f"{pp(t.gain.diff)} pp {interval(t.gain)}{' (learns)' if t.learns else ''}"
        for t in signals
    ]
    parts.append(f"I gap {pp(order.diff, 3)} {_info_interval(order)}")
    parts.append(f"{key}: accuracy {pp(d.diff)} pp {interval(d)}")
    ordered = beyond(order, 0.0) == 1  # which teacher has the lower I is known
    supported = (
        ordered
        and bool(learners)
        and all(beyond(t.info, CLAIM_18_INFO_MARGIN) == 1 for t in learners)
        and beyond(d, CLAIM_18_GAIN_MARGIN_PP) == 1
    )
    contradicted = (ordered and beyond(d, 0.0, ALPHA / 2) == -1) or any(
        beyond(t.info, 0.0, split) == -1 for t in learners
    )
    head = (
        f"I {num(low.info.a, 3)} vs {num(high.info.a, 3)}; accuracy gap {pp(d.diff)} pp "
        f"{interval(d)}"
    )
    return decide(CLAIM_18_RULE, "; ".join(parts), contradicted, supported, head)


def _info_interval(pair: Pair) -> str:
    """``[+0.052, +0.148]``: I's one-sided (1 − ALPHA) bounds, to three decimals."""
    lo, hi = bounds(pair, ALPHA)
    return interval(pair) if math.isnan(lo) else f"[{pp(lo, 3)}, {pp(hi, 3)}]"


# 21 -----------------------------------------------------------------------------------------
CLAIM_21_MARGIN_PP = 2.0  # regulated − naive OPD accuracy: docs/method.md §9
CLAIM_21_RULE = (
    "Only the `opd` experiment's OPD runs. Accuracy of hard clip − none and of log compression "
    "− none, each pooled over matched cells. Supported: either gain > "
    f"{CLAIM_21_MARGIN_PP:g} pp beyond its one-sided {1 - ALPHA / 2:.2%} t-interval (level "
    f"{ALPHA:g} split over the two regulations). Contradicted: every regulation present is "
    f"below none beyond its one-sided {1 - ALPHA:.1%} interval. Else inconclusive."
)


def regulation_pairs(s: Scoring) -> dict[str, Pair]:
    """Per regulation present, its accuracy − none's, pooled over the matched `opd` cells."""
    return s.cached(_regulation_pairs)


def _regulation_pairs(s: Scoring) -> dict[str, Pair]:
    rows = opd_runs(s)
    out = {}
    for reg in REGULATED:
        pairs = paired(rows, ACC, Contrast(REG, reg, "none"))
        if pairs:
            out[reg] = pooled_pair(pairs, f"{REGULATION_NAMES[reg]} − none")
    return out


def claim_21_regulated_beats_naive(s: Scoring) -> Verdict:
    """Claim 21's verdict (``CLAIM_21_RULE``)."""
    pairs = regulation_pairs(s)
    return _routes_verdict(list(pairs.values()), CLAIM_21_MARGIN_PP, CLAIM_21_RULE)


def _routes_verdict(pairs: Sequence[Pair], margin: float, rule: str) -> Verdict:
    """An effect claim with one route per pair: supported when some pair's d > ``margin``
    beyond uncertainty (level ALPHA split over the routes), contradicted when every d < 0
    beyond uncertainty (each at ALPHA); the headline names the best route."""
    alpha = ALPHA / len(pairs)
    parts = [
        f"{p.key}: {num(p.a)} vs {num(p.b)} = {pp(p.diff)} pp {interval(p, alpha)}" for p in pairs
    ]
    best = max(pairs, key=lambda p: -math.inf if math.isnan(p.diff) else p.diff)
    head = f"{best.key} {pp(best.diff)} pp {interval(best, alpha)}"
    supported = any(beyond(p, margin, alpha) == 1 for p in pairs)
    contradicted = all(beyond(p, 0.0) == -1 for p in pairs)
    reach = detectable_gain(best, margin, alpha)
    if not math.isnan(reach):
        parts.append(f"at 80% power this design detects a gain ≥ {num(reach)} pp")
    return decide(rule, "; ".join(parts), contradicted, supported, head)


def detectable_gain(pair: Pair, margin: float, alpha: float = ALPHA, power: float = 0.8) -> float:
    """The true difference an effect test (``beyond`` ``margin`` at ``alpha``) passes with
    ``power``: margin + (t₁₋α(ν) + t_power(ν)) · SEM (NaN without a SEM)."""
    sem, dof = pair.sem, pair.dof
    if math.isnan(sem) or math.isnan(dof) or sem == 0.0:
        return math.nan
    return margin + (t_quantile(1 - alpha, dof) + t_quantile(power, dof)) * sem


# 22 -----------------------------------------------------------------------------------------
TEACHER = "model.teacher"
#: Each run's teacher size (parameter count): what makes one teacher "modest" and another
#: "larger". No code writes it yet; a study that compares teachers must add the column.
TEACHER_PARAMS = "model/teacher_params"
CLAIM_22_MARGIN_PP = 2.0  # smaller regulated − larger unregulated accuracy: docs/method.md §9
CLAIM_22_RULE = (
    "OPD runs of every experiment with ≥ 2 teachers (model.teacher), sized by "
    f"{TEACHER_PARAMS}. Accuracy of the smallest teacher with hard clip (or log compression) − "
    "the largest teacher without regulation, pooled over cells matched on every other axis. "
    f"Supported: either gain > {CLAIM_22_MARGIN_PP:g} pp beyond its one-sided "
    f"{1 - ALPHA / 2:.2%} t-interval (level {ALPHA:g} split over the regulations). "
    "Contradicted: every such difference < 0 beyond its one-sided "
    f"{1 - ALPHA:.1%} interval. Else inconclusive."
)


def teacher_runs(s: Scoring) -> pd.DataFrame:
    """Finished OPD runs of any experiment (two teachers are their own design)."""
    return where(s.grid(FINISHED), "objective.kind", ["opd"])


def claim_22_applicable(s: Scoring) -> bool:
    """Claim 22 is testable: OPD runs with ≥ 2 teachers, unregulated and regulated."""
    rows = teacher_runs(s)
    return n_values(rows, TEACHER) >= 2 and both_regulations(rows) and has(rows, ACC)


def teacher_sizes(rows: pd.DataFrame) -> pd.Series:
    """Median ``TEACHER_PARAMS`` per teacher (empty when unmeasured)."""
    if not has(rows, TEACHER_PARAMS):
        return pd.Series(dtype=float)
    sizes = pd.to_numeric(rows[TEACHER_PARAMS], errors="coerce")
    return sizes.groupby(rows[TEACHER].map(str)).median().dropna()


def claim_22_lacking(s: Scoring) -> list[str]:
    """Claim 22's missing measurements: the teachers' sizes, and the two sides' runs."""
    rows = teacher_runs(s)
    sizes = teacher_sizes(rows)
    if len(sizes) < 2 or sizes.nunique() < 2:
        return [f"the teachers' sizes ({TEACHER_PARAMS}) for two teachers of different size"]
    small, large = sizes.idxmin(), sizes.idxmax()
    teacher = rows[TEACHER].map(str)
    out = []
    if rows[(teacher == small) & rows[REG].isin(REGULATED)].empty:
        out.append(f"regulated OPD runs of the smaller teacher ({small})")
    if rows[(teacher == large) & (rows[REG] == "none")].empty:
        out.append(f"unregulated OPD runs of the larger teacher ({large})")
    return out


def claim_22_modest_teacher(s: Scoring) -> Verdict:
    """Claim 22's verdict (``CLAIM_22_RULE``)."""
    rows = teacher_runs(s)
    sizes = teacher_sizes(rows)
    small, large = sizes.idxmin(), sizes.idxmax()
    teacher = rows[TEACHER].map(str)
    base = rows[(teacher == large) & (rows[REG] == "none")]
    pairs = []
    for reg in REGULATED:
        side = rows[(teacher == small) & (rows[REG] == reg)]
        if not side.empty:
            key = f"{small} {REGULATION_NAMES[reg]} − {large} unregulated"
            pairs.append(matched_pair(side, base, ACC, (TEACHER, REG, TEACHER_PARAMS), key))
    return _routes_verdict(pairs, CLAIM_22_MARGIN_PP, CLAIM_22_RULE)


def matched_pair(
    a: pd.DataFrame, b: pd.DataFrame, metric: str, differ: Sequence[str], key: str
) -> Pair:
    """Cell means of ``metric`` of rows ``a`` against rows ``b``, matched on every cell column
    but ``differ`` and ``experiment``, pooled into one contrast (``pooled_pair``)."""
    both = pd.concat([a, b])
    match = [c for c in cell_columns(both) if c not in {"experiment", *differ}]
    match = [c for c in match if not both[c].isna().all()] or ["_all"]
    a, b = a.assign(_all=""), b.assign(_all="")
    ca, cb = cell_means(a, metric, match), cell_means(b, metric, match)
    ca.index, cb.index = match_keys(ca, match), match_keys(cb, match)
    pairs = [cell_pair(k, ca.loc[k], cb.loc[k]) for k in ca.index if k in cb.index]
    return pooled_pair(pairs, key)


RULES_OPD = [
    ClaimRule(
        16,
        "[D] Unregulated OPD can show length exploitation; regulation removes it.",
        "the `opd` experiment: OPD runs with regulation none and hard_clip/log_compress, and "
        "their metrics.jsonl with rollout/reward, rollout/len_mean and opd/advantage_mean "
        "(report from a study directory)",
        lambda s: both_regulations(opd_runs(s)),
        claim_16_length_exploitation,
        lacking=claim_16_lacking,
    ),
    ClaimRule(
        17,
        "[D] More distinct prompts beat more rollouts per prompt at a fixed budget.",
        "runs varying rollout.prompts_per_step × rollout.rollouts_per_prompt at equal products",
        lambda s: bool(budget_pairs(s)),
        claim_17_prompt_diversity,
    ),
    ClaimRule(
        18,
        "[D] Informativeness I > 0 is needed; a stronger but mismatched teacher can have lower I.",
        "≥ 2 teachers (model.teacher) with eval/informativeness (I per teacher: ≥ 2 rollouts per "
        "prompt), their accuracy and the untrained-student baseline",
        lambda s: n_values(info_runs(s), TEACHER) >= 2,
        claim_18_informativeness,
        lacking=claim_18_lacking,
    ),
    ClaimRule(
        21,
        "[D] Regulated OPD beats naive OPD.",
        "the `opd` experiment: OPD runs with regulation none and hard_clip/log_compress, with "
        "eval/accuracy",
        lambda s: bool(regulation_pairs(s)),
        claim_21_regulated_beats_naive,
    ),
    ClaimRule(
        22,
        "[D] A modest regulated teacher beats a larger unregulated one.",
        "OPD runs with two teachers (a model.teacher axis with ≥ 2 values), the smaller one "
        "regulated and the larger one unregulated",
        claim_22_applicable,
        claim_22_modest_teacher,
        lacking=claim_22_lacking,
    ),
]
