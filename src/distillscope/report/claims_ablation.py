"""Scorecard rules on the ablations of [P]: docs/method.md §9 claims 10 and 12.

Harder variant and teacher-style transfer (the RLVR follow-up, claim 11, is in
``claims_rlvr``; the clipping and sampled-estimator ablations, claims 13–15, in
``claims_clipping`` and ``claims_robustness``). Margins are named constants (pp) from
which each rule's prose is rendered; ``claimkit`` says what "beyond" and "within" mean.
"""

from __future__ import annotations

import pandas as pd

from distillscope.report.aggregate import objective_label, rollout_label
from distillscope.report.claimkit import (
    FINISHED,
    MAIN,
    SPECTRUM,
    STYLE_COLUMNS,
    ClaimRule,
    Scoring,
    Verdict,
    decide,
    experiment_rows,
    has,
    style_runs,
    where,
)
from distillscope.report.matching import (
    LAMBDA,
    ON_VS_OFF,
    cell_means,
    cell_pair,
    describe_pairs,
    paired,
)
from distillscope.report.stats import (
    ALPHA,
    Pair,
    beyond,
    interval,
    num,
    pooled_pair,
    pp,
    sample_pair,
)

ACC = "eval/accuracy"
STYLE = "eval/teacher_style_share"
KINDS = ("forward_kl", "reverse_kl")
CI = f"one-sided {1 - ALPHA:.0%} t-interval"


# 10 -----------------------------------------------------------------------------------------
CLAIM_10_MARGIN_PP = 2.0  # the on-policy gain must exceed this (absolute) …
CLAIM_10_RELATIVE = 0.05  # … and this share of the off-policy value (published +10–15%)
CLAIM_10_RULE = (
    "Harder-variant metric = eval/harder/pass@K at the largest K measured (else "
    "eval/harder_accuracy). Per KL direction, on-policy (OnPD, else the spectrum's λ > 0) minus "
    "off-policy (OffPD, else λ < 0), pooled over matched cells. Supported: under both "
    f"directions the gain exceeds max({CLAIM_10_MARGIN_PP:g} pp, {CLAIM_10_RELATIVE:.0%} of the "
    f"off-policy value) beyond its {CI}. Contradicted: off-policy better (gain < 0) beyond a "
    f"{1 - ALPHA / 2:.1%} interval under either. Else inconclusive."
)


def claim_10_margin(off_value: float) -> float:
    """The gain claim 10 asks for over an off-policy value (pp): max(2 pp, 5% of it)."""
    return max(CLAIM_10_MARGIN_PP, CLAIM_10_RELATIVE * off_value)


def harder_metric(df: pd.DataFrame) -> str | None:
    """The harder variant's measurement: eval/harder/pass@K at the largest K measured, else
    eval/harder_accuracy (None when neither was)."""
    ks = [
        int(c.rsplit("@", 1)[1])
        for c in df.columns
        if c.startswith("eval/harder/pass@") and c.rsplit("@", 1)[1].isdigit() and has(df, c)
    ]
    if ks:
        return f"eval/harder/pass@{max(ks)}"
    return "eval/harder_accuracy" if has(df, "eval/harder_accuracy") else None


def compared_harder_metric(s: Scoring) -> str | None:
    """Claim 10's measurement, read from the runs it compares: the main grid's largest K (its
    OnPD/OffPD cells), else the λ-spectrum's — never a K that only other experiments measured
    (the OPD runs' pass@32 must not hide the main grid's pass@10)."""
    for grid in (MAIN, SPECTRUM):
        rows = s.grid(grid)
        metric = harder_metric(rows)
        if metric is not None and all(on_vs_off(s, metric, k) is not None for k in KINDS):
            return metric
    return None


def on_vs_off(s: Scoring, metric: str, kind: str) -> tuple[Pair, str] | None:
    """(on-policy vs off-policy pooled pair, per-cell text) under one KL direction: OnPD vs
    OffPD in the main grid, else the spectrum's cells at λ > 0 vs λ < 0 as samples."""
    m = s.grid(MAIN)
    m = m[m["objective.kind"] == kind] if not m.empty else m
    pairs = paired(m, metric, ON_VS_OFF) if has(m, metric) else []
    if pairs:
        return pooled_pair(pairs, "OnPD vs OffPD"), describe_pairs(pairs)
    g = s.grid(SPECTRUM)
    g = g[g["objective.kind"] == kind] if not g.empty else g
    if not has(g, metric):
        return None
    pos, neg = g[g[LAMBDA] > 0], g[g[LAMBDA] < 0]
    if pos.empty or neg.empty:
        return None
    cp, cn = (cell_means(x, metric, [LAMBDA]) for x in (pos, neg))
    p = sample_pair(list(cp["mean"]), list(cn["mean"]), "λ>0 vs λ<0")
    return p, f"λ>0 {num(p.a)} vs λ<0 {num(p.b)}"


def claim_10_applicable(s: Scoring) -> bool:
    """Claim 10 is testable: a harder-variant metric and on- vs off-policy runs per direction."""
    return compared_harder_metric(s) is not None


def claim_10_harder_variant(s: Scoring) -> Verdict:
    """Claim 10's verdict (``CLAIM_10_RULE``)."""
    metric = compared_harder_metric(s)
    parts, signs, heads = [], [], []
    for kind in KINDS:
        pair, text = on_vs_off(s, metric, kind)
        rel = f"{pp(100.0 * pair.diff / pair.b, 0)}% relative" if pair.b else "off-policy at 0"
        need = claim_10_margin(pair.b)
        parts.append(
            f"{objective_label(kind)}: on − off {pp(pair.diff)} pp {interval(pair)} "
            f"({rel}; needs > {num(need)} pp) [{text}]"
        )
        heads.append(f"{objective_label(kind)} {pp(pair.diff)} pp ({rel})")
        signs.append((beyond(pair, 0.0, ALPHA / 2), beyond(pair, need)))
    ev = f"{metric}: " + "; ".join(parts)
    contradicted = any(worse == -1 for worse, _ in signs)
    head = "on − off " + ", ".join(heads)
    return decide(CLAIM_10_RULE, ev, contradicted, all(gain == 1 for _, gain in signs), head)


# 12 -----------------------------------------------------------------------------------------
CLAIM_12_MARGIN_PP = 20.0  # by which OnPD + reverse KL stays below each other configuration
CLAIM_12_RULE = (
    "Teacher-style share of the student's answers per rollout × KL (style runs, pooled over "
    f"other axes). Supported: each other configuration's share exceeds OnPD + reverse KL's by > "
    f"{CLAIM_12_MARGIN_PP:g} pp beyond its {CI}. Contradicted: OnPD + reverse KL's share above "
    f"the mean of the other three beyond its {CI}. Else inconclusive."
)
RESISTS = ("student", "reverse_kl")  # the configuration that resists: OnPD + reverse KL


def style_cells(s: Scoring) -> pd.DataFrame:
    """Style share per (rollout.policy, objective.kind) of the style runs, in the order of the
    configurations' reader names (OffPD before OnPD, then by KL direction)."""
    return s.cached(_style_cells)


def _style_cells(s: Scoring) -> pd.DataFrame:
    rows = experiment_rows(s.grid(FINISHED), "style")
    if any(c in rows.columns for c in STYLE_COLUMNS):
        rows = rows[style_runs(rows)]
    rows = where(where(rows, "rollout.policy", ["student", "teacher"]), "objective.kind", KINDS)
    if not has(rows, STYLE) or "rollout.policy" not in rows or "objective.kind" not in rows:
        return pd.DataFrame()
    cells = cell_means(rows, STYLE, ["rollout.policy", "objective.kind"])
    names = cells["rollout.policy"].map(rollout_label)
    return cells.assign(_name=names).sort_values(["_name", "objective.kind"], kind="stable")


def _configuration(cell: pd.Series) -> str:
    return f"{rollout_label(cell['rollout.policy'])} + {objective_label(cell['objective.kind'])}"


def claim_12_style_transfer(s: Scoring) -> Verdict:
    """Claim 12's verdict (``CLAIM_12_RULE``) on the style runs."""
    cells = style_cells(s)
    get = {(r["rollout.policy"], r["objective.kind"]): r for _, r in cells.iterrows()}
    target = get[RESISTS]
    others = [get[k] for k in get if k != RESISTS]
    gaps = [cell_pair(_configuration(o), o, target) for o in others]
    others_mean = pooled_pair(
        [cell_pair(g.key, o, o) for g, o in zip(gaps, others, strict=True)], "others"
    )  # the target cell enters once, not once per gap
    rest = Pair(
        "others vs OnPD + reverse KL",
        others_mean.a,
        others_mean.a_sem,
        target["mean"],
        target["sem"],
        others_mean.a_dof,
        gaps[0].b_dof,
    )
    ev = f"OnPD + reverse KL {num(target['mean'])}%; " + "; ".join(
        f"{g.key}: {num(g.a)}% (gap {pp(g.diff)} pp {interval(g)})" for g in gaps
    )
    supported = all(beyond(g, CLAIM_12_MARGIN_PP) == 1 for g in gaps)
    smallest = min(gaps, key=lambda g: g.diff)
    head = f"OnPD + reverse KL {num(target['mean'])}%, smallest gap {pp(smallest.diff)} pp"
    return decide(CLAIM_12_RULE, ev, beyond(rest, 0.0) == -1, supported, head)


RULES_ABLATION = [
    ClaimRule(
        10,
        "On-policy (λ > 0) helps on the harder variant (+10–15% pass@k) under both KL directions.",
        "on- and off-policy runs under both KL directions with "
        "eval/harder/pass@k or eval/harder_accuracy",
        claim_10_applicable,
        claim_10_harder_variant,
    ),
    ClaimRule(
        12,
        "OnPD + reverse KL resists teacher-style transfer; the other three "
        "configurations adopt it.",
        "style runs (task.teacher_style_flag or task.teacher_instruction) of all four "
        "rollout × KL configurations with eval/teacher_style_share",
        lambda s: len(style_cells(s)) == 4,
        claim_12_style_transfer,
    ),
]
