"""Scorecard rules on the main grid and the LR sweep: docs/method.md §9 claims 1–5 and 9.

Rollout policy, KL direction and learning rate against accuracy, coverage, forgetting and
update sparsity. Margins are named constants in percentage points (pp) of the stored
fractions, fixed from the published numbers (docs/scorecard.md); each rule's prose is
rendered from them.
``claimkit`` says what "beyond its margin" and "within" mean (one-sided t-intervals at ALPHA,
TOST). Cell means over seeds carry SEMs from the seed variance pooled over the sub-grid's cells
(``pooled_cells``) where a rule compares single cells (best configurations, ranges).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from distillscope.report.aggregate import cell_columns, with_labels
from distillscope.report.claimkit import (
    LEARNED_PP,
    MAIN,
    ClaimRule,
    Scoring,
    Verdict,
    both_kls,
    both_rollouts,
    decide,
    has,
    n_values,
    no_effect_verdict,
)
from distillscope.report.matching import (
    FORWARD_VS_REVERSE,
    ON_VS_OFF,
    Contrast,
    cell_key,
    cell_means,
    describe_pairs,
    match_keys,
    paired,
)
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    bounds,
    cell_range,
    detectable_margin,
    interval,
    linear,
    num,
    pooled_pair,
    pooled_variance,
    pp,
    seed_variance,
    versus,
    with_variance,
    within,
)

ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY_FP32 = "eval/sparsity_fp32_tau1e-06"
SPARSITY = "eval/sparsity_bf16_tau1e-06"  # the published view (docs/method.md §10 "Sparsity")
CI = f"one-sided {1 - ALPHA:.0%} t-interval"
#: Columns that name a configuration's task: claim 1 averages over them. ``task.dataset`` and
#: ``measures.*`` (distillscope.study.baseline.identity_columns) follow from the task.
TASK_COLUMNS = ("task.name", "task.dataset", "measures.forgetting", "measures.transfer")


def lr_ends(m: pd.DataFrame) -> tuple[float, float]:
    """The smallest and the largest learning rate of ``m``."""
    lrs = sorted(m["optim.lr"].dropna().unique())
    return float(lrs[0]), float(lrs[-1])


def shared_variance(pairs: Sequence[Pair]) -> list[Pair]:
    """``pairs`` with SEMs from the seed variance pooled over all their cells (more degrees of
    freedom than each pair's own); unchanged when some cell has one seed."""
    shared = pooled_variance(pairs)
    if shared is None:
        return list(pairs)
    return [with_variance(p, *shared, p.a_dof + 1, p.b_dof + 1) for p in pairs]


def reach_note(pair: Pair, margin: float, what: str) -> str:
    """ "; … passes ±m at 80% power only for m ≥ X" when the design cannot reach ``margin``."""
    reach = detectable_margin(pair)
    if math.isnan(reach) or reach <= margin:
        return ""
    return (
        f"; for {what} this design passes equivalence at 80% power only for a margin ≥ "
        f"{num(reach)} pp (the claim's is ±{margin:g})"
    )


def cells_of(s: Scoring, grid: str, metric: str, by: Sequence[str]) -> pd.DataFrame:
    """Cell means of ``metric`` per ``by`` in sub-grid ``grid``, with SEMs from the seed
    variance pooled over all of the sub-grid's cells (``pooled_cells``)."""
    return s.cached(_cells_of, grid, metric, tuple(by))


def _cells_of(s: Scoring, grid: str, metric: str, by: tuple[str, ...]) -> pd.DataFrame:
    m = s.grid(grid)
    cm = cell_means(m, metric, list(by))
    return pooled_cells(cm, cell_means(m, metric, cell_columns(m)))


def pooled_cells(cm: pd.DataFrame, seed_cells: pd.DataFrame) -> pd.DataFrame:
    """``cm`` (cell_means rows) with ``sem`` = s / √runs and ``dof`` = ν, where s² is the
    within-cell variance pooled over ``seed_cells`` (cells of the full design, ≥ 2 seeds) on ν
    degrees of freedom; NaN SEM when no cell has two seeds, and for a cell of one seed."""
    var, dof = seed_variance(seed_cells)
    if dof == 0:
        return cm.assign(sem=math.nan, dof=math.nan)
    sem = np.sqrt(var / cm["runs"]).where(cm["runs"] >= 2)  # one seed: no SEM (claimkit)
    return cm.assign(sem=sem, dof=dof)


def cell_pair_pooled(key: str, a: pd.Series, b: pd.Series) -> Pair:
    """Two rows of ``pooled_cells`` as a − b; the shared ν split between the sides."""
    half = a["dof"] / 2
    return Pair(key, a["mean"], a["sem"], b["mean"], b["sem"], half, half)


# 1 ------------------------------------------------------------------------------------------
CLAIM_01_MARGIN_PP = 5.0  # equivalence within ± this (the published gap is 1 pp)
CLAIM_01_RULE = (
    "Configuration = rollout × KL × LR; its mean = accuracy averaged over the study's tasks "
    "(each task's cell mean over seeds), SEMs from the seed variance pooled over every "
    "main-grid cell. Δ = best OnPD configuration − best OffPD configuration. Supported: the "
    f"students learned (≥ {LEARNED_PP:g} pp over the untrained student) and Δ is within "
    f"±{CLAIM_01_MARGIN_PP:g} pp (TOST, {CI}s). Contradicted: |Δ| > {CLAIM_01_MARGIN_PP:g} pp "
    f"beyond its {CI} (α/2 per side). Else inconclusive; the evidence gives the smallest "
    "margin the design passes at 80% power when that is wider."
)


def claim_01_applicable(s: Scoring) -> bool:
    """Claim 1 is testable: the main grid has matched OnPD and OffPD accuracy cells."""
    return both_rollouts(s.grid(MAIN)) and bool(s.pairs(MAIN, ACC, ON_VS_OFF))


def configurations(s: Scoring, metric: str) -> pd.DataFrame:
    """Main-grid configurations (every cell column but the task's) with ``metric`` averaged
    over the tasks every configuration ran (rows of ``pooled_cells``, ``runs`` summed)."""
    m = s.grid(MAIN)
    tasks = [c for c in TASK_COLUMNS if c in m.columns]
    by = [c for c in cell_columns(m) if c not in tasks]
    cells = cells_of(s, MAIN, metric, [*by, *tasks])
    if not tasks:
        return cells
    common = None
    for _, g in cells.groupby(match_keys(cells, by), sort=False):
        got = set(match_keys(g, tasks))
        common = got if common is None else common & got
    cells = cells[match_keys(cells, tasks).isin(common or set())]
    grouped = cells.groupby(match_keys(cells, by), sort=True)
    rows = []
    for _, g in grouped:
        k = len(g)
        sem = math.sqrt(float((g["sem"] ** 2).sum(min_count=k))) / k  # NaN if one is
        rows.append(
            {
                **g.iloc[0][by].to_dict(),
                "mean": g["mean"].mean(),
                "sem": sem,
                "runs": g["runs"].sum(),
                "dof": g["dof"].iloc[0],
                "tasks": k,
            }
        )
    return pd.DataFrame(rows)


def claim_01_no_rollout_gain(s: Scoring) -> Verdict:
    """Claim 1's verdict (``CLAIM_01_RULE``) on the main grid."""
    conf = configurations(s, ACC)
    labels = with_labels(conf)
    shown = [c for c in ("objective.kind", "objective.teacher_topk", "optim.lr") if c in conf]
    on = conf[conf["rollout.policy"] == "student"]
    off = conf[conf["rollout.policy"] == "teacher"]
    best_on, best_off = on.loc[on["mean"].idxmax()], off.loc[off["mean"].idxmax()]
    p = cell_pair_pooled("best configurations", best_on, best_off)
    tasks = int(conf["tasks"].iloc[0]) if "tasks" in conf else 1
    over = f" (mean over {tasks} tasks)" if tasks > 1 else ""
    ev = (
        f"best OnPD configuration {num(p.a)}% ({cell_key(labels.loc[best_on.name], shown)}) vs "
        f"best OffPD {num(p.b)}% ({cell_key(labels.loc[best_off.name], shown)}){over}: "
        f"Δ {pp(p.diff)} pp {interval(p)}"
    )
    ev += reach_note(p, CLAIM_01_MARGIN_PP, "Δ")
    head = f"best OnPD − best OffPD {pp(p.diff)} pp {interval(p)}"
    return no_effect_verdict(s, MAIN, [p], CLAIM_01_MARGIN_PP, CLAIM_01_RULE, ev, head)


# 2 ------------------------------------------------------------------------------------------
CLAIM_02_RANGE_PP = 5.0  # forward KL's cells (71–73%) must lie within a band this wide
CLAIM_02_RULE = (
    "Δ_KL = forward − reverse accuracy pooled over matched rollout×LR cells; Δ_ro = OnPD − "
    "OffPD pooled over matched KL×LR cells (orthogonal contrasts of the grid: independent). "
    f"Supported: Δ_KL > 0 and Δ_KL − |Δ_ro| > 0 (Δ_KL − Δ_ro and Δ_KL + Δ_ro both > 0), each "
    f"beyond its {CI}, and forward KL's range (max − min of its cells) within "
    f"{CLAIM_02_RANGE_PP:g} pp: every pair of forward-KL cells within ±{CLAIM_02_RANGE_PP:g} pp "
    "(TOST; an intersection–union test). Contradicted: reverse better (Δ_KL < 0) beyond a "
    f"{1 - ALPHA / 2:.1%} interval, or rollout matters more (|Δ_ro| − Δ_KL > 0 beyond "
    f"{1 - ALPHA / 4:.2%} intervals). Else inconclusive."
)


def claim_02_applicable(s: Scoring) -> bool:
    """Claim 2 is testable: the main grid has matched forward and reverse KL accuracy cells."""
    return both_kls(s.grid(MAIN)) and bool(s.pairs(MAIN, ACC, FORWARD_VS_REVERSE))


def claim_02_lacking(s: Scoring) -> list[str]:
    """Claim 2 compares KL direction with rollout: it needs both rollouts."""
    ok = both_rollouts(s.grid(MAIN)) and bool(s.pairs(MAIN, ACC, ON_VS_OFF))
    return [] if ok else ["matched OnPD and OffPD cells (the rollout effect to compare with)"]


def forward_cells(s: Scoring, grid: str = MAIN) -> pd.DataFrame:
    """The forward-KL cells of a sub-grid (rows of ``pooled_cells``)."""
    m = s.grid(grid)
    cells = cells_of(s, grid, ACC, cell_columns(m))
    return cells[cells["objective.kind"] == "forward_kl"].reset_index(drop=True)


def claim_02_kl_direction(s: Scoring) -> Verdict:
    """Claim 2's verdict (``CLAIM_02_RULE``) on the main grid."""
    kl = pooled_pair(s.pairs(MAIN, ACC, FORWARD_VS_REVERSE), "Δ_KL")
    ro = pooled_pair(s.pairs(MAIN, ACC, ON_VS_OFF), "Δ_ro")
    plus, minus = linear("KL + ro", [(1, kl), (1, ro)]), linear("KL − ro", [(1, kl), (-1, ro)])
    sign = 1.0 if ro.diff >= 0 else -1.0
    more = [linear("ro − KL", [(sign, ro), (-1, kl)]), linear("ro + KL", [(sign, ro), (1, kl)])]
    band = cell_range(forward_cells(s), ALPHA, ALPHA / 2)
    flat = band.upper < CLAIM_02_RANGE_PP  # every pair within ± the band by TOST
    reach = ""
    if not math.isnan(band.detectable) and band.detectable > CLAIM_02_RANGE_PP:
        reach = (
            f"; for the range this design passes a band at 80% power only if ≥ "
            f"{num(band.detectable)} pp (the claim's is {CLAIM_02_RANGE_PP:g})"
        )
    ev = (
        f"Δ_KL {pp(kl.diff)} pp {interval(kl)}, Δ_ro {pp(ro.diff)} pp {interval(ro)}; "
        f"|Δ_KL| − |Δ_ro| = {pp(abs(kl.diff) - abs(ro.diff))} pp; forward KL range "
        f"{band.text()} over {len(forward_cells(s))} cells{reach}. "
        f"{describe_pairs(s.pairs(MAIN, ACC, FORWARD_VS_REVERSE))}"
    )
    head = f"Δ_KL {pp(kl.diff)} vs Δ_rollout {pp(ro.diff)} pp; forward range {num(band.value)} pp"
    contradicted = beyond(kl, 0.0, ALPHA / 2) == -1 or all(
        beyond(c, 0.0, ALPHA / 4) == 1 for c in more
    )
    supported = beyond(kl, 0.0) == 1 and beyond(plus, 0.0) == 1 and beyond(minus, 0.0) == 1 and flat
    return decide(CLAIM_02_RULE, ev, contradicted, supported, head)


# 3 ------------------------------------------------------------------------------------------
CLAIM_03_MARGIN_PP = 5.0  # more forgetting at the high LR
CLAIM_03_LOW_LR_MARGIN_PP = 2.0  # the low LR's change within ± this (published ≤ 1.3)
CLAIM_03_ROLLOUT_MARGIN_PP = 2.0  # OnPD − OffPD forgetting within ± this at each LR
CLAIM_03_RULE = (
    "low/high LR = smallest/largest LR of the main grid; forgetting_pp = skills after − "
    "before. Δ_LR = forgetting_pp(low) − forgetting_pp(high), pooled over matched rollout×KL "
    f"cells. Supported: Δ_LR > {CLAIM_03_MARGIN_PP:g} pp beyond its {CI}, the low LR's pooled "
    f"change within ±{CLAIM_03_LOW_LR_MARGIN_PP:g} pp and OnPD − OffPD forgetting_pp within "
    f"±{CLAIM_03_ROLLOUT_MARGIN_PP:g} pp at each LR (TOST). Contradicted: Δ_LR < 0 beyond a "
    f"{1 - ALPHA / 2:.1%} interval, or one of the equivalence parts beyond its margin (α/2 "
    "split over them). Else inconclusive."
)


def two_lrs_applicable(metric: str) -> Callable[[Scoring], bool]:
    """Whether the main grid ran at ≥ 2 learning rates and measured ``metric``."""

    def check(s: Scoring) -> bool:
        m = s.grid(MAIN)
        return has(m, metric) and n_values(m, "optim.lr") >= 2

    return check


def rollouts_lacking(s: Scoring) -> list[str]:
    """The rollout part of claims 3 and 4 needs OnPD and OffPD runs in the main grid."""
    return [] if both_rollouts(s.grid(MAIN)) else ["OnPD and OffPD runs (the rollout part)"]


def low_vs_high_lr(s: Scoring, metric: str) -> list[Pair]:
    """Matched main-grid cells of ``metric`` at the smallest versus the largest LR."""
    m = s.grid(MAIN)
    low, high = lr_ends(m)
    return paired(m[m["optim.lr"].isin([low, high])], metric, Contrast("optim.lr", low, high))


def rollout_at_each_lr(s: Scoring, metric: str) -> list[Pair]:
    """OnPD − OffPD of ``metric`` pooled over KL at the smallest and at the largest LR."""
    m = s.grid(MAIN)
    out = []
    for name, lr in zip(("low LR", "high LR"), lr_ends(m), strict=True):
        pairs = paired(m[m["optim.lr"] == lr], metric, ON_VS_OFF)
        out.append(pooled_pair(pairs, f"OnPD − OffPD at the {name}"))
    return out


def claim_03_lr_forgetting(s: Scoring) -> Verdict:
    """Claim 3's verdict (``CLAIM_03_RULE``) on the main grid."""
    pairs = low_vs_high_lr(s, FORGET)  # diff = f(low) − f(high) = extra pp lost at the high LR
    if not pairs:
        text = "no rollout×KL cell ran at both learning rates"
        return Verdict("inconclusive", text, CLAIM_03_RULE, "no matched LR pair")
    p = pooled_pair(pairs, "low vs high")
    low = versus("low LR", 0.0, p)
    parts = [
        (low, CLAIM_03_LOW_LR_MARGIN_PP),
        *((r, CLAIM_03_ROLLOUT_MARGIN_PP) for r in rollout_at_each_lr(s, FORGET)),
    ]
    ev = (
        f"pooled extra forgetting at the high LR {pp(p.diff)} pp {interval(p)}; "
        + "; ".join(f"{c.key} {pp(c.diff)} pp {interval(c)}" for c, _ in parts)
        + "".join(reach_note(c, m, c.key) for c, m in parts)
        + f". Low vs high: {describe_pairs(pairs)}"
    )
    head = f"high LR forgets {pp(p.diff)} pp more {interval(p)}; low-LR change {pp(low.diff)} pp"
    off = any(beyond(c, m, ALPHA / (2 * len(parts))) != 0 for c, m in parts)
    contradicted = beyond(p, 0.0, ALPHA / 2) == -1 or off
    supported = beyond(p, CLAIM_03_MARGIN_PP) == 1 and all(within(c, m) for c, m in parts)
    return decide(CLAIM_03_RULE, ev, contradicted, supported, head)


# 4 ------------------------------------------------------------------------------------------
CLAIM_04_MARGIN_PP = 10.0  # sparser at the low LR
CLAIM_04_NONINFERIOR_PP = 1.0  # OffPD − OnPD sparsity not below −this in any matched pair
CLAIM_04_RULE = (
    f"Sparsity in the bf16 view (τ = 1e-6; both checkpoints cast to bf16). Δ_LR = sparsity(low "
    f"LR) − sparsity(high LR) pooled over matched cells; per matched KL×LR pair d = "
    f"sparsity(OffPD) − sparsity(OnPD). Supported: Δ_LR > {CLAIM_04_MARGIN_PP:g} pp beyond its "
    f"{CI} and in every pair d > −{CLAIM_04_NONINFERIOR_PP:g} pp beyond its {CI} "
    f"(non-inferiority). Contradicted: Δ_LR < 0 beyond a {1 - ALPHA / 2:.1%} interval, or some "
    f"d < −{CLAIM_04_NONINFERIOR_PP:g} pp beyond its interval (α/2 split over the pairs). Else "
    "inconclusive."
)


def claim_04_lr_sparsity(s: Scoring) -> Verdict:
    """Claim 4's verdict (``CLAIM_04_RULE``) on the main grid."""
    lr_pairs = low_vs_high_lr(s, SPARSITY)
    if not lr_pairs:
        text = "no rollout×KL cell ran at both learning rates"
        return Verdict("inconclusive", text, CLAIM_04_RULE, "no matched LR pair")
    p = pooled_pair(lr_pairs, "low vs high")
    ro = shared_variance(s.pairs(MAIN, SPARSITY, ON_VS_OFF.reversed()))
    m = CLAIM_04_NONINFERIOR_PP
    ev = f"bf16 view: low vs high LR pooled {pp(p.diff)} pp {interval(p)} "
    ev += f"[{describe_pairs(lr_pairs)}]. OffPD − OnPD per pair: {describe_pairs(ro)}"
    if has(s.grid(MAIN), SPARSITY_FP32):
        fp = pooled_pair(low_vs_high_lr(s, SPARSITY_FP32), "fp32")
        ev += f". fp32 view (not judged): low vs high {pp(fp.diff)} pp"
    worst = min(ro, key=lambda q: q.diff) if ro else None
    if worst is not None:
        ev += reach_note(worst, m, "each OffPD − OnPD pair")
    head = f"low − high LR {pp(p.diff)} pp {interval(p)}" + (
        f"; worst OffPD − OnPD {pp(worst.diff)} pp" if worst is not None else ""
    )
    k = max(len(ro), 1)
    contradicted = beyond(p, 0.0, ALPHA / 2) == -1 or any(
        beyond(q, m, ALPHA / (2 * k)) == -1 for q in ro
    )
    noninferior = bool(ro) and all(bounds(q, ALPHA)[0] > -m for q in ro)
    supported = beyond(p, CLAIM_04_MARGIN_PP) == 1 and noninferior
    return decide(CLAIM_04_RULE, ev, contradicted, supported, head)


# 9 ------------------------------------------------------------------------------------------
CLAIM_09_MARGIN_PP = 3.0  # more coverage gain under forward KL
CLAIM_09_SIMILAR_PP = 5.0  # "at similar pass@1": forward − reverse pass@1 within ± this
CLAIM_09_RULE = (
    f"Per run, coverage gain g = pass@K − pass@1 (K = 10, else the largest k measured). Δg = "
    f"g(forward) − g(reverse), pooled over matched rollout×LR cells. Supported: Δg > "
    f"{CLAIM_09_MARGIN_PP:g} pp beyond its {CI} and forward − reverse pass@1 within "
    f"±{CLAIM_09_SIMILAR_PP:g} pp (TOST). Contradicted: Δg < 0 beyond its {CI}. Else "
    "inconclusive."
)


def coverage_k(df: pd.DataFrame) -> int | None:
    """K of the coverage gain: 10 when pass@10 was measured, else the largest k > 1 (None
    without pass@1 or any k > 1)."""
    ks = sorted(
        int(c.split("@")[1])
        for c in df.columns
        if c.startswith("eval/pass@") and c.split("@")[1].isdigit() and has(df, c)
    )
    big = [k for k in ks if k > 1]
    return (10 if 10 in big else big[-1]) if big and 1 in ks else None


def claim_09_applicable(s: Scoring) -> bool:
    """Claim 9 is testable: both KL directions in the main grid with pass@1 and a pass@K."""
    m = s.grid(MAIN)
    return both_kls(m) and coverage_k(m) is not None


def claim_09_coverage(s: Scoring) -> Verdict:
    """Claim 9's verdict (``CLAIM_09_RULE``) on the main grid."""
    m = s.grid(MAIN)
    k = coverage_k(m)
    gain = f"eval/pass@{k}_gain"  # a fraction: shown in pp
    m = m.assign(**{gain: m[f"eval/pass@{k}"] - m["eval/pass@1"]})
    pairs = paired(m, gain, FORWARD_VS_REVERSE)
    one = s.pairs(MAIN, "eval/pass@1", FORWARD_VS_REVERSE)
    p, q = pooled_pair(pairs, "Δg"), pooled_pair(one, "Δ pass@1")
    ev = (
        f"pooled Δg {pp(p.diff)} pp {interval(p)} over {len(pairs)} cells; pass@1 forward − "
        f"reverse {pp(q.diff)} pp {interval(q)} [{describe_pairs(one)}]"
    )
    head = f"Δ(pass@{k} − pass@1) {pp(p.diff)} pp {interval(p)}; Δ pass@1 {pp(q.diff)} pp"
    supported = beyond(p, CLAIM_09_MARGIN_PP) == 1 and within(q, CLAIM_09_SIMILAR_PP)
    return decide(CLAIM_09_RULE, ev, beyond(p, 0.0) == -1, supported, head)


_MAIN = "main grid: OnPD and OffPD rollouts"
RULES_GRID = [
    ClaimRule(
        1,
        "Rollout policy gives no consistent in-distribution gain (best mean over tasks 72% OnPD "
        "vs 73% OffPD).",
        f"{_MAIN}, eval/accuracy",
        claim_01_applicable,
        claim_01_no_rollout_gain,
    ),
    ClaimRule(
        2,
        "KL direction matters more: forward KL 71–73% in every rollout × LR cell; "
        "reverse KL 35–72%.",
        "main grid: forward and reverse KL, OnPD and OffPD, eval/accuracy",
        claim_02_applicable,
        claim_02_kl_direction,
        lacking=claim_02_lacking,
    ),
    ClaimRule(
        3,
        "LR governs forgetting: ≤ 1.3 pp change at the low LR, 11.2–14.0 pp drop at the high "
        "LR, little or no variation due to rollout.",
        "main grid at two learning rates with OnPD and OffPD, eval/forgetting_pp",
        two_lrs_applicable(FORGET),
        claim_03_lr_forgetting,
        lacking=rollouts_lacking,
    ),
    ClaimRule(
        4,
        "LR governs sparsity: 85–90% (low LR) vs 52–60% (high LR); OffPD at least as "
        "sparse as OnPD in every matched pair.",
        f"main grid at two learning rates with OnPD and OffPD, {SPARSITY}",
        two_lrs_applicable(SPARSITY),
        claim_04_lr_sparsity,
        lacking=rollouts_lacking,
    ),
    ClaimRule(
        9,
        "Forward KL gives more coverage (higher pass@10 at similar pass@1).",
        "main grid with forward and reverse KL, eval/pass@1 and eval/pass@10",
        claim_09_applicable,
        claim_09_coverage,
    ),
]
