"""Scorecard rules on the ablations of [P]: docs/method.md §9 claims 10–15.

Harder variant, RLVR follow-up, teacher-style transfer, gradient clipping and sampled
estimators. Margins are named constants (pp) from which each rule's prose is rendered;
``claimkit`` says what "beyond" and "within" mean.
"""

from __future__ import annotations

import math

import pandas as pd

from distillscope.labels import is_label_column
from distillscope.report.aggregate import objective_label, with_labels
from distillscope.report.claimkit import (
    ClaimRule,
    Verdict,
    cell_means,
    describe_pairs,
    experiment_rows,
    finished,
    has,
    learned,
    main_grid,
    paired,
    plain_rows,
    spectrum_grid,
    where,
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
    within,
)

ACC = "eval/accuracy"
STYLE = "eval/teacher_style_share"
RLVR = "rlvr/reward_final"
CLIPPED, NORM_MEAN, NORM_MAX = (
    "train/grad_clipped_frac",
    "train/grad_norm_mean",
    "train/grad_norm_max",
)
KINDS = ("forward_kl", "reverse_kl")
CI = f"one-sided {1 - ALPHA:.0%} t-interval"


# 10 -----------------------------------------------------------------------------------------
C10_MARGIN = 1.0  # pp the on-policy side must gain on the harder variant
R10 = (
    "Harder-variant metric = eval/harder/pass@K at the largest K measured (else "
    "eval/harder_accuracy). Per KL direction, on-policy (OnPD, else the spectrum's λ > 0) minus "
    "off-policy (OffPD, else λ < 0), pooled over matched cells. Supported: the gain is > "
    f"{C10_MARGIN:g} pp beyond its {CI} under both directions. Contradicted: off-policy better "
    f"(gain < 0) beyond a {1 - ALPHA / 2:.1%} interval under either. Else inconclusive."
)


def _harder_metric(df: pd.DataFrame) -> str | None:
    ks = [
        int(c.rsplit("@", 1)[1])
        for c in df.columns
        if c.startswith("eval/harder/pass@") and c.rsplit("@", 1)[1].isdigit() and has(df, c)
    ]
    if ks:
        return f"eval/harder/pass@{max(ks)}"
    return "eval/harder_accuracy" if has(df, "eval/harder_accuracy") else None


def _on_off(df: pd.DataFrame, metric: str, kind: str) -> tuple[Pair, str] | None:
    """(on-policy vs off-policy pooled pair, per-cell text) under one KL direction."""
    m = main_grid(df)
    m = m[m["objective.kind"] == kind] if not m.empty else m
    pairs = paired(m, metric, "_rollout", "OnPD", "OffPD") if has(m, metric) else []
    if pairs:
        return pooled_pair(pairs, "OnPD vs OffPD"), describe_pairs(pairs)
    g = spectrum_grid(df)
    g = g[g["objective.kind"] == kind] if not g.empty else g
    if not has(g, metric):
        return None
    pos, neg = g[g["_lam"] > 0], g[g["_lam"] < 0]
    if pos.empty or neg.empty:
        return None
    cp, cn = (cell_means(x, metric, ["_lam"]) for x in (pos, neg))
    p = sample_pair(list(cp["mean"]), list(cn["mean"]), "λ>0 vs λ<0")
    return p, f"λ>0 {num(p.a)} vs λ<0 {num(p.b)}"


def _c10_applicable(df: pd.DataFrame) -> bool:
    metric = _harder_metric(finished(df))
    return metric is not None and all(_on_off(df, metric, k) is not None for k in KINDS)


def _c10(df: pd.DataFrame) -> Verdict:
    metric = _harder_metric(finished(df))
    parts, signs = [], []
    for kind in KINDS:
        pair, text = _on_off(df, metric, kind)
        rel = f"{pp(100.0 * pair.diff / pair.b, 0)}% relative" if pair.b else "off-policy at 0"
        parts.append(
            f"{objective_label(kind)}: on − off {pp(pair.diff)} pp {interval(pair)} "
            f"({rel}) [{text}]"
        )
        signs.append((beyond(pair, 0.0, ALPHA / 2), beyond(pair, C10_MARGIN)))
    ev = f"{metric}: " + "; ".join(parts)
    if any(worse == -1 for worse, _ in signs):
        return Verdict("contradicted", ev, R10)
    found = all(gain == 1 for _, gain in signs)
    return Verdict("supported" if found else "inconclusive", ev, R10)


# 11 -----------------------------------------------------------------------------------------
R11 = "Needs an RLVR stage after distillation (rlvr/reward_final); distillscope has none yet."


# 12 -----------------------------------------------------------------------------------------
C12_MARGIN = 20.0  # pp by which OnPD + reverse KL stays below each other configuration
R12 = (
    "Teacher-style share of the student's answers per rollout × KL (style runs, pooled over "
    f"other axes). Supported: each other configuration's share exceeds OnPD + reverse KL's by > "
    f"{C12_MARGIN:g} pp beyond its {CI}. Contradicted: OnPD + reverse KL's share above the mean "
    f"of the other three beyond its {CI}. Else inconclusive."
)


def _style_cells(df: pd.DataFrame) -> pd.DataFrame:
    rows = experiment_rows(finished(df), "style")
    if "task.teacher_style_flag" in rows.columns:
        rows = rows[rows["task.teacher_style_flag"].fillna(False).astype(bool)]
    rows = where(where(rows, "rollout.policy", ["student", "teacher"]), "objective.kind", KINDS)
    if not has(rows, STYLE) or "rollout.policy" not in rows or "objective.kind" not in rows:
        return pd.DataFrame()
    return cell_means(with_labels(rows), STYLE, ["_rollout", "objective.kind"])


def _cell_pair(key: str, a: pd.Series, b: pd.Series) -> Pair:
    dof = [r["runs"] - 1 if r["runs"] > 1 else math.nan for r in (a, b)]
    return Pair(key, a["mean"], a["sem"], b["mean"], b["sem"], *dof)


def _c12(df: pd.DataFrame) -> Verdict:
    cells = _style_cells(df)
    get = {(r["_rollout"], r["objective.kind"]): r for _, r in cells.iterrows()}
    target = get[("OnPD", "reverse_kl")]
    others = [get[k] for k in get if k != ("OnPD", "reverse_kl")]
    gaps = [
        _cell_pair(f"{o['_rollout']} + {objective_label(o['objective.kind'])}", o, target)
        for o in others
    ]
    others_mean = pooled_pair(
        [_cell_pair(g.key, o, o) for g, o in zip(gaps, others, strict=True)], "others"
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
    if beyond(rest, 0.0) == -1:
        return Verdict("contradicted", ev, R12)
    if all(beyond(g, C12_MARGIN) == 1 for g in gaps):
        return Verdict("supported", ev, R12)
    return Verdict("inconclusive", ev, R12)


# 13 -----------------------------------------------------------------------------------------
C13_ACTIVE, C13_RARE = 80.0, 50.0  # % of steps clipped: "throughout" / clearly not
R13 = (
    f"Main grid with clipping on. Active: the pooled share of clipped steps > {C13_ACTIVE:g}% "
    f"beyond its {CI}. Larger norms: reverse-KL − forward-KL mean pre-clip norm, pooled over "
    f"matched cells, > 0 beyond its {CI}. Supported: both. Contradicted: the clipped share < "
    f"{C13_RARE:g}%, or the norm difference < 0, beyond {1 - ALPHA / 2:.1%} intervals. Else "
    "inconclusive."
)


def _c13_applicable(df: pd.DataFrame) -> bool:
    m = main_grid(df)
    return has(m, CLIPPED, NORM_MEAN) and bool(paired(m, NORM_MEAN, "objective.kind", *KINDS[::-1]))


def _c13(df: pd.DataFrame) -> Verdict:
    m = main_grid(df)
    cells = cell_means(m, CLIPPED, ["_rollout", "_kl", "_lr"])
    share = pooled_pair(
        [
            Pair(
                "",
                r["mean"],
                r["sem"],
                0.0,
                0.0,
                r["runs"] - 1 if r["runs"] > 1 else math.nan,
                math.inf,
            )
            for _, r in cells.iterrows()
        ],
        "clipped share",
    )
    norms = pooled_pair(paired(m, NORM_MEAN, "objective.kind", "reverse_kl", "forward_kl"), "norm")
    ev = (
        f"steps clipped {num(share.a)}% {interval(share)} (cells {num(cells['mean'].min())}–"
        f"{num(cells['mean'].max())}%). Mean pre-clip norm reverse − forward {pp(norms.diff, 2)} "
        f"{interval(norms)}"
    )
    active = Pair("active", share.a, share.a_sem, C13_ACTIVE, 0.0, share.a_dof, math.inf)
    rare = Pair("rare", share.a, share.a_sem, C13_RARE, 0.0, share.a_dof, math.inf)
    if beyond(rare, 0.0, ALPHA / 2) == -1 or beyond(norms, 0.0, ALPHA / 2) == -1:
        return Verdict("contradicted", ev, R13)
    if beyond(active, 0.0) == 1 and beyond(norms, 0.0) == 1:
        return Verdict("supported", ev, R13)
    return Verdict("inconclusive", ev, R13)


# 14 -----------------------------------------------------------------------------------------
C14_MARGIN = 5.0  # pp: a clip-on − clip-off accuracy gap larger than this is deterioration
R14 = (
    "Δ = accuracy with clipping (main grid) − without (optim.grad_clip off), pooled over "
    "matched rollout×LR cells, per KL direction (the study's LR label is not part of the match). "
    f"Forward KL stays effective: Δ within ±{C14_MARGIN:g} pp (TOST), students learned, no "
    f"no-clip run diverged. Reverse KL deteriorates: Δ > {C14_MARGIN:g} pp beyond its {CI}, or "
    "≥ half its no-clip runs diverged or failed. Supported: both. Contradicted: forward KL's Δ > "
    f"{C14_MARGIN:g} pp beyond its {CI}, or ≥ half its no-clip runs diverged. Else inconclusive."
)


def _no_clip(df: pd.DataFrame, kind: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(all no-clip runs of ``kind`` whatever their status, matched clip/no-clip done rows)."""
    if "optim.grad_clip" not in df.columns or "objective.kind" not in df.columns:
        return df.iloc[0:0], df.iloc[0:0]
    rows = experiment_rows(df, "no_clip")
    rows = rows[rows["optim.grad_clip"].isna() & (rows["objective.kind"] == kind)]
    rows = where(rows, "rollout.policy", ["student", "teacher"])
    clip = main_grid(df)
    clip = clip[clip["objective.kind"] == kind] if not clip.empty else clip
    both = pd.concat([with_labels(finished(rows)), clip], ignore_index=True)
    both = both.drop(columns=[c for c in both.columns if is_label_column(c)])
    both["_clip"] = both["optim.grad_clip"].notna().map({True: "on", False: "off"})
    return rows, both


def _clip_pairs(df: pd.DataFrame, kind: str) -> list[Pair]:
    _, both = _no_clip(df, kind)
    return paired(both, ACC, "_clip", "on", "off") if not both.empty else []


def _c14_applicable(df: pd.DataFrame) -> bool:
    return all(len(_no_clip(df, k)[0]) > 0 and _clip_pairs(df, k) for k in KINDS)


def _c14(df: pd.DataFrame) -> Verdict:
    parts, pooled_by, bad_by = [], {}, {}
    for kind in KINDS:
        runs, both = _no_clip(df, kind)
        pairs = _clip_pairs(df, kind)
        bad = int(runs["status"].isin(["diverged", "failed"]).sum()) if "status" in runs else 0
        pooled_by[kind] = pooled_pair(pairs, "clip on vs off")
        bad_by[kind] = (bad, len(runs))
        parts.append(
            f"{objective_label(kind)}: clip on − off pooled {pp(pooled_by[kind].diff)} pp "
            f"{interval(pooled_by[kind])} [{describe_pairs(pairs)}]; {bad}/{len(runs)} no-clip "
            "runs diverged or failed"
        )
    ev = ". ".join(parts)
    f, r = pooled_by["forward_kl"], pooled_by["reverse_kl"]
    (f_bad, f_n), (r_bad, r_n) = bad_by["forward_kl"], bad_by["reverse_kl"]
    if beyond(f, C14_MARGIN) == 1 or 2 * f_bad >= f_n:
        return Verdict("contradicted", ev, R14)
    r_worse = beyond(r, C14_MARGIN) == 1 or 2 * r_bad >= r_n
    if not (f_bad == 0 and within(f, C14_MARGIN) and r_worse):
        return Verdict("inconclusive", ev, R14)
    power, text = learned(df, main_grid(df))
    return Verdict("supported" if power else "inconclusive", f"{ev}; {text}", R14)


# 15 -----------------------------------------------------------------------------------------
C15_MARGIN = 3.0  # pp: a forward − reverse difference within ± this is "no difference"
R15 = (
    "Picture = forward − reverse accuracy pooled over matched rollout×LR cells: forward better "
    f"or reverse better when Δ ≠ 0 beyond its {1 - ALPHA / 2:.1%} interval, flat when Δ is "
    f"within ±{C15_MARGIN:g} pp (TOST), else unknown. Reference: the study's full-vocabulary "
    "runs, else the published picture (forward better). Supported: the sampled estimators show "
    "the reference's sign, or both are flat and the students learned. Contradicted: the "
    f"opposite sign, or one flat and the other beyond ±{C15_MARGIN:g} pp. Else inconclusive."
)

SAMPLED = ("forward_sampled", "reverse_sampled")


def _sampled_pairs(df: pd.DataFrame) -> list[Pair]:
    rows = plain_rows(experiment_rows(finished(df), "sampled"))
    if "objective.kind" not in rows.columns or not has(rows, ACC):
        return []
    return paired(with_labels(rows), ACC, "objective.kind", *SAMPLED)


def picture(pair: Pair) -> str:
    """ "+", "−", "flat" or "unknown": the sign of a forward − reverse contrast (see R15)."""
    sign = beyond(pair, 0.0, ALPHA / 2)
    if sign:
        return "+" if sign > 0 else "−"
    return "flat" if within(pair, C15_MARGIN) else "unknown"


def _c15(df: pd.DataFrame) -> Verdict:
    s_pairs = _sampled_pairs(df)
    m = main_grid(df)
    f_pairs = paired(m, ACC, "objective.kind", *KINDS) if has(m, ACC) else []
    sampled = pooled_pair(s_pairs, "sampled")
    full = pooled_pair(f_pairs, "full")
    ref = picture(full) if f_pairs else "+"
    ref_text = (
        f"full vocabulary {pp(full.diff)} pp {interval(full)} ({ref})"
        if f_pairs
        else "published picture: forward KL better (+)"
    )
    got = picture(sampled)
    ev = (
        f"sampled forward − reverse {pp(sampled.diff)} pp {interval(sampled)} ({got}) "
        f"[{describe_pairs(s_pairs)}]; reference: {ref_text}"
    )
    if "unknown" in (ref, got):
        return Verdict("inconclusive", ev, R15)
    if {ref, got} == {"+", "−"}:
        return Verdict("contradicted", ev, R15)
    if "flat" in (ref, got) and ref != got:
        other = full if got == "flat" else sampled
        if beyond(other, C15_MARGIN, ALPHA / 2) != 0:
            return Verdict("contradicted", ev, R15)
        return Verdict("inconclusive", ev, R15)
    if ref == "flat":
        power, text = learned(df, finished(df))
        return Verdict("supported" if power else "inconclusive", f"{ev}; {text}", R15)
    return Verdict("supported", ev, R15)


RULES_ABLATION = [
    ClaimRule(
        10,
        "On-policy (λ > 0) helps on the harder variant (+10–15% pass@k) under both KL directions.",
        "on- and off-policy runs under both KL directions with "
        "eval/harder/pass@k or eval/harder_accuracy",
        _c10_applicable,
        _c10,
    ),
    ClaimRule(
        11,
        "That advantage does not reliably survive a later RLVR stage.",
        "main grid with eval/harder/* and rlvr/reward_final (RLVR follow-up)",
        lambda df: True,
        None,  # nothing to judge until an RLVR stage exists
        unmeasured=(RLVR,),
    ),
    ClaimRule(
        12,
        "OnPD + reverse KL resists teacher-style transfer; the other three "
        "configurations adopt it.",
        "style runs (task.teacher_style_flag) of all four "
        "rollout × KL configurations with eval/teacher_style_share",
        lambda df: len(_style_cells(df)) == 4,
        _c12,
    ),
    ClaimRule(
        13,
        "Clipping is active throughout (pre-clip norms > threshold); reverse-KL norms "
        "are larger/spikier.",
        "main grid with both KL directions, train/grad_clipped_frac and train/grad_norm_mean",
        _c13_applicable,
        _c13,
    ),
    ClaimRule(
        14,
        "Without clipping, forward KL stays effective; reverse KL deteriorates.",
        "runs with optim.grad_clip off matched to clipped runs, both KL directions",
        _c14_applicable,
        _c14,
    ),
    ClaimRule(
        15,
        "Sampled estimators keep the same qualitative picture.",
        "runs with objective.kind forward_sampled and reverse_sampled",
        lambda df: bool(_sampled_pairs(df)),
        _c15,
    ),
]
