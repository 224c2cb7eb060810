"""Scorecard rules on the ablations of [P]: docs/method.md §9 claims 10–15.

Harder variant, RLVR follow-up, teacher-style transfer, gradient clipping and sampled
estimators. Thresholds in pp; ``claimkit`` says what makes a difference count.
"""

from __future__ import annotations

import math

import pandas as pd

from distillscope.report.aggregate import done, objective_label, with_labels
from distillscope.report.claimkit import (
    ClaimRule,
    Pair,
    Verdict,
    cell_means,
    describe_pairs,
    experiment_rows,
    has,
    main_grid,
    mean_diff,
    num,
    paired,
    plain_rows,
    pooled,
    pooled_pair,
    pp,
    sign,
    spectrum_grid,
    where,
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


# 10 -----------------------------------------------------------------------------------------
R10 = (
    "Harder-variant metric = eval/harder/pass@K at the largest K measured (else "
    "eval/harder_accuracy). Per KL direction, on-policy (OnPD, else the spectrum's λ > 0) minus "
    "off-policy (OffPD, else λ < 0), averaged over matched cells. Supported: the gain is ≥ 3 pp "
    "beyond 2×SEM under both directions. Contradicted: off-policy better by ≥ 3 pp beyond "
    "2×SEM under either. Else inconclusive."
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
    p = Pair(
        "λ>0 vs λ<0",
        *pooled(list(cp["mean"]), list(cp["sem"])),
        *pooled(list(cn["mean"]), list(cn["sem"])),
    )
    return p, f"λ>0 {num(p.a)} vs λ<0 {num(p.b)}"


def _c10_applicable(df: pd.DataFrame) -> bool:
    metric = _harder_metric(done(df))
    return metric is not None and all(_on_off(df, metric, k) is not None for k in KINDS)


def _c10(df: pd.DataFrame) -> Verdict:
    metric = _harder_metric(done(df))
    parts, signs = [], []
    for kind in KINDS:
        pair, text = _on_off(df, metric, kind)
        rel = 100.0 * pair.diff / pair.b if pair.b else math.nan
        parts.append(
            f"{objective_label(kind)}: on − off {pp(pair.diff)} pp ({pp(rel, 0)}% "
            f"relative) [{text}]"
        )
        signs.append(sign(pair, 3.0))
    ev = f"{metric}: " + "; ".join(parts)
    if -1 in signs:
        return Verdict("contradicted", ev, R10)
    return Verdict("supported" if all(s == 1 for s in signs) else "inconclusive", ev, R10)


# 11 -----------------------------------------------------------------------------------------
R11 = (
    "Matched OnPD vs OffPD cells of the main grid. If OnPD leads on the harder variant by ≥ 3 pp "
    "beyond 2×SEM in no cell, there is no advantage to carry ⇒ inconclusive. Otherwise: OnPD's "
    "final RLVR reward higher by ≥ 0.1 (beyond 2×SEM) in every cell ⇒ contradicted; else "
    "supported."
)


def _c11_applicable(df: pd.DataFrame) -> bool:
    m = main_grid(df)
    metric = _harder_metric(m)
    return (
        metric is not None and has(m, RLVR) and bool(paired(m, RLVR, "_rollout", "OnPD", "OffPD"))
    )


def _c11(df: pd.DataFrame) -> Verdict:
    m = main_grid(df)
    before = paired(m, _harder_metric(m), "_rollout", "OnPD", "OffPD")
    after = paired(m, RLVR, "_rollout", "OnPD", "OffPD")
    ev = (
        f"harder variant before RLVR: {describe_pairs(before)}. Final RLVR reward: "
        f"{describe_pairs(after, unit='reward', digits=2)}"
    )
    if not any(sign(p, 3.0) == 1 for p in before):
        return Verdict("inconclusive", ev, R11)
    if all(sign(p, 0.1) == 1 for p in after):
        return Verdict("contradicted", ev, R11)
    return Verdict("supported", ev, R11)


# 12 -----------------------------------------------------------------------------------------
R12 = (
    "Teacher-style share of the student's answers per rollout × KL (style runs, pooled over "
    "other axes). Supported: OnPD + reverse KL ≥ 20 pp below each other configuration (beyond "
    "2×SEM) and each other configuration ≥ 30%. Contradicted: OnPD + reverse KL within 5 pp "
    "of (or above) the mean of the other three. Else inconclusive."
)


def _style_cells(df: pd.DataFrame) -> pd.DataFrame:
    rows = experiment_rows(done(df), "style")
    if "task.teacher_style_flag" in rows.columns:
        rows = rows[rows["task.teacher_style_flag"].fillna(False).astype(bool)]
    rows = where(where(rows, "rollout.policy", ["student", "teacher"]), "objective.kind", KINDS)
    if not has(rows, STYLE) or "rollout.policy" not in rows or "objective.kind" not in rows:
        return pd.DataFrame()
    return cell_means(with_labels(rows), STYLE, ["_rollout", "objective.kind"])


def _c12(df: pd.DataFrame) -> Verdict:
    cells = _style_cells(df)
    get = {(r["_rollout"], r["objective.kind"]): r for _, r in cells.iterrows()}
    target = get[("OnPD", "reverse_kl")]
    others = [get[k] for k in get if k != ("OnPD", "reverse_kl")]
    ev = "; ".join(
        f"{r['_rollout']} + {objective_label(r['objective.kind'])}: {num(r['mean'])}%"
        for r in [target, *others]
    )
    gaps = [Pair("gap", o["mean"], o["sem"], target["mean"], target["sem"]) for o in others]
    rest = sum(o["mean"] for o in others) / len(others)
    if target["mean"] >= rest - 5.0:
        return Verdict("contradicted", ev, R12)
    if all(sign(g, 20.0) == 1 for g in gaps) and all(o["mean"] >= 30.0 for o in others):
        return Verdict("supported", ev, R12)
    return Verdict("inconclusive", ev, R12)


# 13 -----------------------------------------------------------------------------------------
R13 = (
    "Main grid with clipping on. Active throughout: ≥ 80% of steps clipped in every cell. "
    "Larger/spikier: reverse-KL pre-clip norm above forward KL (beyond 2×SEM) in every matched "
    "cell, for the mean norm or the max norm. Supported: both. Contradicted: < 50% of steps "
    "clipped in every cell, or forward-KL norms above reverse KL (mean and max) in every cell. "
    "Else inconclusive."
)


def _c13_applicable(df: pd.DataFrame) -> bool:
    m = main_grid(df)
    return has(m, CLIPPED, NORM_MEAN) and bool(paired(m, NORM_MEAN, "objective.kind", *KINDS[::-1]))


def _c13(df: pd.DataFrame) -> Verdict:
    m = main_grid(df)
    clipped = cell_means(m, CLIPPED, ["_rollout", "_kl", "_lr"])
    p_mean = paired(m, NORM_MEAN, "objective.kind", "reverse_kl", "forward_kl")
    p_max = paired(m, NORM_MAX, "objective.kind", "reverse_kl", "forward_kl")
    ev = (
        f"steps clipped {num(clipped['mean'].min())}–{num(clipped['mean'].max())}% per cell. "
        f"Mean pre-clip norm reverse vs forward: {describe_pairs(p_mean, '', 2)}. Max: "
        f"{describe_pairs(p_max, '', 2) or 'not recorded'}"
    )
    bigger = any(p and all(sign(x, 0.0) == 1 for x in p) for p in (p_mean, p_max))
    smaller = all(sign(x, 0.0) == -1 for x in p_mean) and all(sign(x, 0.0) == -1 for x in p_max)
    if (clipped["mean"] < 50.0).all() or smaller:
        return Verdict("contradicted", ev, R13)
    if (clipped["mean"] >= 80.0).all() and bigger:
        return Verdict("supported", ev, R13)
    return Verdict("inconclusive", ev, R13)


# 14 -----------------------------------------------------------------------------------------
R14 = (
    "Accuracy with clipping (main grid) minus without (optim.grad_clip off), per matched "
    "rollout×LR cell; diverged runs without clipping count as deterioration. Forward KL stays "
    "effective: no drop ≥ 5 pp beyond 2×SEM, no diverged run. Reverse KL deteriorates: some drop "
    "≥ 5 pp beyond 2×SEM or a diverged run. Supported: both. Contradicted: forward KL drops ≥ 5 "
    "pp in every cell or diverges in ≥ half its runs, or reverse KL drops < 2 pp everywhere "
    "without diverging. Else inconclusive."
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
    both = pd.concat([with_labels(done(rows)), clip], ignore_index=True)
    both["_clip"] = both["optim.grad_clip"].notna().map({True: "on", False: "off"})
    return rows, both


def _clip_pairs(df: pd.DataFrame, kind: str) -> list[Pair]:
    _, both = _no_clip(df, kind)
    return paired(both, ACC, "_clip", "on", "off") if not both.empty else []


def _c14_applicable(df: pd.DataFrame) -> bool:
    return all(len(_no_clip(df, k)[0]) > 0 and _clip_pairs(df, k) for k in KINDS)


def _c14(df: pd.DataFrame) -> Verdict:
    parts, drops, diverged = [], {}, {}
    for kind in KINDS:
        runs, _ = _no_clip(df, kind)
        pairs = _clip_pairs(df, kind)
        bad = int(runs["status"].isin(["diverged", "failed"]).sum()) if "status" in runs else 0
        drops[kind], diverged[kind] = pairs, (bad, len(runs))
        parts.append(
            f"{objective_label(kind)}: clip on vs off {describe_pairs(pairs)}; "
            f"{bad}/{len(runs)} no-clip runs diverged or failed"
        )
    ev = ". ".join(parts)
    f_pairs, r_pairs = drops["forward_kl"], drops["reverse_kl"]
    f_bad, f_n = diverged["forward_kl"]
    r_bad, _ = diverged["reverse_kl"]
    f_broken = (f_pairs and all(sign(p, 5.0) == 1 for p in f_pairs)) or 2 * f_bad >= f_n
    r_fine = all(p.diff < 2.0 for p in r_pairs) and r_bad == 0
    if f_broken or r_fine:
        return Verdict("contradicted", ev, R14)
    f_ok = f_bad == 0 and all(sign(p, 5.0) != 1 for p in f_pairs)
    r_worse = r_bad > 0 or any(sign(p, 5.0) == 1 for p in r_pairs)
    return Verdict("supported" if f_ok and r_worse else "inconclusive", ev, R14)


# 15 -----------------------------------------------------------------------------------------
R15 = (
    "Picture = sign of forward − reverse accuracy averaged over matched rollout×LR cells, "
    "counted at ≥ 3 pp beyond 2×SEM (0 = no difference). Reference: the study's full-vocabulary "
    "runs, else the published picture (+, forward better). Supported: the sampled estimators "
    "give the same sign. Contradicted: the opposite non-zero sign. Else inconclusive."
)

SAMPLED = ("forward_sampled", "reverse_sampled")


def _sampled_pairs(df: pd.DataFrame) -> list[Pair]:
    rows = plain_rows(experiment_rows(done(df), "sampled"))
    if "objective.kind" not in rows.columns or not has(rows, ACC):
        return []
    return paired(with_labels(rows), ACC, "objective.kind", *SAMPLED)


def _c15(df: pd.DataFrame) -> Verdict:
    s_pairs = _sampled_pairs(df)
    m = main_grid(df)
    f_pairs = paired(m, ACC, "objective.kind", *KINDS) if has(m, ACC) else []
    sampled = pooled_pair(s_pairs, "sampled")
    ref_sign = sign(pooled_pair(f_pairs, "full"), 3.0) if f_pairs else 1
    ref = (
        f"full vocabulary {pp(mean_diff(f_pairs))} pp"
        if f_pairs
        else "published picture: forward KL better"
    )
    ev = (
        f"sampled forward − reverse {pp(sampled.diff)} pp [{describe_pairs(s_pairs)}]; "
        f"reference: {ref}"
    )
    s = sign(sampled, 3.0)
    if s == ref_sign:
        return Verdict("supported", ev, R15)
    if s == -ref_sign and s != 0:
        return Verdict("contradicted", ev, R15)
    return Verdict("inconclusive", ev, R15)


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
        _c11_applicable,
        _c11,
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
