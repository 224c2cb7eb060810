"""The report's tables as plain text cells; ``html_page`` and ``markdown_page`` lay them out.

Every cell here is unescaped text that may come from a config, a run id or an error message;
nothing in this module produces markup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from distillscope.labels import is_label_column
from distillscope.report.grids import main_grid
from distillscope.results.aggregate import (
    SEED,
    SPECTRUM_TEMPERATURES,
    aggregate,
    axis_text,
    cell_columns,
    done,
    fmt_mean_sem,
    percent_scale,
    plain_text,
    spectrum_temperature_label,
    spectrum_temperatures,
    with_labels,
)
from distillscope.scorecard.runner import ClaimResult

# (column, header) of the main cell table — docs/method.md §8's headline measurements.
MAIN_METRICS = (
    ("eval/accuracy", "Accuracy (%)"),
    ("eval/pass@1", "pass@1 (%)"),
    ("eval/pass@10", "pass@10 (%)"),
    ("eval/harder_accuracy", "Harder acc. (%)"),
    ("eval/forgetting_pp", "Forgetting (pp)"),
    ("eval/sparsity_fp32_tau1e-06", "Sparsity fp32 τ1e-6 (%)"),
    ("eval/sparsity_bf16_tau1e-06", "Sparsity bf16 τ1e-6 (%)"),
)
# Extra columns of the per-experiment tables, shown when measured.
MORE_METRICS = (
    ("eval/harder/pass@10", "Harder pass@10 (%)"),
    ("eval/teacher_style_share", "Teacher style (%)"),
    ("eval/informativeness", "Informativeness I"),
    ("rlvr/eval_accuracy_before", "RLVR task before (%)"),
    ("rlvr/eval_accuracy", "RLVR task after (%)"),
    ("rlvr/harder_accuracy_before", "Harder before RLVR (%)"),
    ("rlvr/harder_accuracy", "Harder after RLVR (%)"),
    ("rlvr/reward_final", "RLVR reward, final"),
    ("eval/len_mean", "Length (tokens)"),
    ("eval/truncated_frac", "Truncated (%)"),
    ("train/grad_clipped_frac", "Steps clipped (%)"),
    ("train/grad_norm_mean", "Pre-clip grad norm"),
)
_LABELLED = {
    "experiment",
    "rollout.policy",
    "rollout.lam",
    "objective.kind",
    "objective.regulation",
    "optim.lr",
    SPECTRUM_TEMPERATURES,
}
_ROLLOUT_ORDER = {"OnPD": 0, "OffPD": 1}
VERDICT_ORDER = (
    "supported",
    "contradicted",
    "inconclusive",
    "not applicable",
    "not tested",
    "not implemented",
    "error",
)


@dataclass
class Table:
    """Header, rows of text cells, and per-row CSS class names (chosen here, never from data)."""

    columns: list[str]
    rows: list[list[str]]
    row_classes: list[str] = field(default_factory=list)
    numeric: set[int] = field(default_factory=set)  # column indices to right-align


def status_table(df: pd.DataFrame, baselines: pd.DataFrame | None = None) -> Table:
    """Run counts by status (done first), with the total; the study's evaluations of the
    untrained student (``baselines``) counted among them and named, as ``study status``
    lists them."""
    every = df if baselines is None or baselines.empty else pd.concat([df, baselines])
    counts = every["status"].map(str).value_counts()
    order = ["done", "diverged", "failed", "running", "trained", "pending"]
    names = [s for s in order if s in counts] + sorted(s for s in counts.index if s not in order)
    rows = [[s, str(int(counts[s]))] for s in names] + [["total", str(len(every))]]
    if len(every) > len(df):
        rows.append(["of them, untrained-student evaluations", str(len(every) - len(df))])
    return Table(["Status", "Runs"], rows, numeric={1})


def problem_runs_table(df: pd.DataFrame) -> Table | None:
    """Failed and diverged runs (and any unknown status) with their reasons; None when none."""
    bad = df[~df["status"].map(str).isin(["done", "running", "trained", "pending"])]
    if bad.empty:
        return None
    bad = with_labels(bad)
    rows = []
    for _, r in bad.sort_values(["status", "run_id"]).iterrows():
        config = ", ".join(
            x
            for x in (r.get("experiment"), r["_rollout"], r["_kl"], r["_lr"])
            if isinstance(x, str) and x not in ("", "—")
        )
        seed = r.get("seed")
        if seed is not None and not pd.isna(seed):
            config += f", seed {plain_text(seed)}"
        rows.append([str(r["run_id"]), str(r["status"]), config, str(r.get("reason", "") or "")])
    return Table(["Run", "Status", "Configuration", "Reason"], rows)


def scorecard_table(
    results: Sequence[ClaimResult], calibration: dict[str, Any] | None = None
) -> Table:
    """One row per claim: id, claim, verdict, its rule's false-verdict rate, its regime premises
    with their measured values (``ClaimResult.regime``; "—" without one), headline, the seed
    sentences it tests (``quote_text``), evidence, rule (the HTML report folds the last three;
    ``headline_text`` fills the headline).

    The rate is the worst share of false verdicts over the null and degenerate synthetic
    tables of ``calibration`` (``scorecard.calibrate``) and, for the no-effect claims, the tables
    with their effect at the margin; "not calibrated" without one.
    """
    rows = [
        [
            str(r.id),
            r.claim,
            r.verdict,
            false_rate_text(r, calibration),
            r.regime or "—",
            headline_text(r),
            quote_text(r),
            r.evidence,
            r.rule,
        ]
        for r in results
    ]
    classes = ["verdict-" + r.verdict.replace(" ", "-") for r in results]
    columns = ["#", "Claim", "Verdict", "False-verdict rate", REGIME_COLUMN, "Headline", "Quote"]
    columns += ["Evidence", "Rule"]
    return Table(columns, rows, classes)


def quote_text(result: ClaimResult) -> str:
    """The seed sentences a claim tests, each “original” (“English”) — file:line, section,
    joined by " · " (plain text: the renderers escape it); "" for a result without quotes."""
    return " · ".join(q.text() for q in result.quotes)


#: The scorecard column of each claim's regime premises with their measured values.
REGIME_COLUMN = "Regime premises (measured)"
HEADLINE_CHARS = 120  # the longest evidence excerpt that stands in for an empty headline


def headline_text(result: ClaimResult, limit: int = HEADLINE_CHARS) -> str:
    """The one number behind a verdict: ``result.headline``, else an excerpt of its evidence:
    the first clause (up to the first ". " or ";") without its parenthesised asides and without
    a bracket the clause leaves open, cut at a word to at most ``limit`` characters.

    "best OnPD cell 60.6% (forward KL, …) vs best OffPD cell 58.4% (…): Δ +2.2 pp [-1.7, +6.1]"
    → "best OnPD cell 60.6% vs best OffPD cell 58.4%: Δ +2.2 pp [-1.7, +6.1]". Plain text:
    callers escape after cutting, so a cut never splits an entity.
    """
    if result.headline.strip():
        return result.headline.strip()
    clause = re.split(r"\.\s|;", result.evidence.strip(), maxsplit=1)[0]
    return excerpt(drop_asides(clause).rstrip("."), limit) or excerpt(result.evidence, limit)


_ASIDE = re.compile(r"\s*\([^()]*\)")


def drop_asides(text: str) -> str:
    """``text`` without its parenthesised asides (nested ones too)."""
    while _ASIDE.search(text):
        text = _ASIDE.sub("", text)
    return " ".join(text.split())


def excerpt(text: str, limit: int) -> str:
    """``text`` whole when it fits in ``limit`` characters, else cut at a word and ended "…";
    either way without a bracket left open (the text stops before it)."""
    text = _closed(" ".join(text.split()))
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut:
        cut = cut[: cut.rindex(" ")]
    return _closed(cut).rstrip(" ,:([") + "…"


def _closed(text: str) -> str:
    """``text`` up to its first bracket that never closes (all of it when every one closes)."""
    pairs, opened = {")": "(", "]": "["}, []
    for i, ch in enumerate(text):
        if ch in "([":
            opened.append((ch, i))
        elif ch in pairs and opened and opened[-1][0] == pairs[ch]:
            opened.pop()
    return text[: opened[0][1]].rstrip(" ,:") if opened else text


def false_rate_text(result: ClaimResult, calibration: dict[str, Any] | None) -> str:
    """``3.0% (200 draws); power 91%`` for a scored claim, ``—`` when no rule applies."""
    if result.verdict in ("not tested", "not implemented", "error"):
        return "—"
    if calibration is None:
        return "not calibrated"
    c = str(result.id)
    rate = calibration.get("false_rate", {}).get(c)
    if rate is None:
        return "not calibrated"
    power = calibration.get("power", {}).get(c)
    text = f"{100 * rate:.1f}% ({calibration.get('draws', '?')} draws)"
    sides = [calibration.get(k, {}).get(c) for k in ("false_support", "false_contradiction")]
    if None not in sides:  # calibrations written before both sides were rated lack them
        text += f": support {100 * sides[0]:.1f}%, contradiction {100 * sides[1]:.1f}%"
    return text + (f"; power {100 * power:.0f}%" if power is not None else "")


def verdict_counts(results: Sequence[ClaimResult]) -> dict[str, int]:
    """How many claims ended with each verdict, in VERDICT_ORDER."""
    return {v: sum(r.verdict == v for r in results) for v in VERDICT_ORDER}


def main_table(finished: pd.DataFrame, baselines: pd.DataFrame | None = None) -> Table | None:
    """Rollout × KL direction × LR cells of the main grid among the ``finished`` runs
    (``Study.finished``: labelled): mean ± SEM over seeds, and n; then the untrained student's
    row (``baselines``, the study's baseline rows) as the reference."""
    rows = main_grid(finished)
    if rows.empty:
        return None
    table = cell_table(rows, MAIN_METRICS)
    if table is not None and baselines is not None and not baselines.empty:
        seeds = set(rows[SEED].map(str)) if SEED in rows.columns else set()
        table.rows.append(untrained_cells(table, baselines, seeds))
    return table


UNTRAINED = "untrained student"


def untrained_cells(table: Table, baselines: pd.DataFrame, seeds: set[str]) -> list[str]:
    """The untrained student's row of a cell ``table``: per metric the mean ± SEM over the
    seeds (of ``seeds``, when its rows have them) of the baseline rows that measured it (a study
    evaluates it once per seed and evaluation setting); "—" where none did."""
    base = done(baselines)
    if SEED in base.columns and seeds and base[SEED].map(str).isin(seeds).any():
        base = base[base[SEED].map(str).isin(seeds)]
    heads = dict((h, m) for m, h in MAIN_METRICS + MORE_METRICS)
    first = table.columns.index("n")
    cells = [UNTRAINED] + ["—"] * (first - 1)
    seed = base[SEED].map(str) if SEED in base.columns else pd.Series("", index=base.index)
    cells.append(str(seed.nunique()))
    for h in table.columns[first + 1 :]:
        m = heads.get(h)
        values = pd.to_numeric(base[m], errors="coerce") if m in base.columns else None
        per = values.groupby(seed).mean().dropna() if values is not None else pd.Series()
        sem = per.std(ddof=1) / len(per) ** 0.5 if len(per) > 1 else float("nan")
        mean = per.mean() if len(per) else float("nan")
        cells.append(fmt_mean_sem(mean, sem, percent_scale(m) if m else 1.0))
    return cells


def experiment_tables(finished: pd.DataFrame) -> dict[str, Table]:
    """One cell table per experiment (sub-grid) of the ``finished`` runs (``Study.finished``:
    labelled), every measured headline column; by name."""
    rows = finished
    if rows.empty:
        return {}
    if "experiment" not in rows.columns:
        table = cell_table(rows, MAIN_METRICS + MORE_METRICS)
        return {"all runs": table} if table else {}
    out = {}
    for name, group in rows.groupby(rows["experiment"].map(str), sort=True):
        table = cell_table(group, MAIN_METRICS + MORE_METRICS)
        if table is not None:
            out[name] = table
    return out


def cell_table(rows: pd.DataFrame, metrics: Sequence[tuple[str, str]]) -> Table | None:
    """Cells of ``rows`` (labelled, finished runs) with the ``metrics`` that have data."""
    metrics = [(m, h) for m, h in metrics if m in rows.columns and rows[m].notna().any()]
    if rows.empty:
        return None
    by = cell_columns(rows)
    agg = with_labels(aggregate(rows, [m for m, _ in metrics], by))
    label_cols = [
        ("_rollout", "Rollout", "rollout.policy"),
        ("_kl", "Objective", "objective.kind"),
        ("_lr", "LR", "optim.lr"),
    ]
    labels = [(c, h) for c, h, src in label_cols if src in agg.columns]
    if spectrum_temperatures(agg):  # which temperatures a spectrum sampled at, old tables: paper
        temps = agg[SPECTRUM_TEMPERATURES] if SPECTRUM_TEMPERATURES in agg else [None] * len(agg)
        pairs = zip(agg["rollout.policy"], temps, strict=True)
        agg = agg.assign(_temps=[spectrum_temperature_label(p, t) for p, t in pairs])
        labels.insert(1, ("_temps", "Spectrum temperatures"))
    extra = [
        c
        for c in by
        if c not in _LABELLED and not is_label_column(c) and agg[c].map(str).nunique() > 1
    ]
    agg = agg.assign(_order=agg["_rollout"].map(_ROLLOUT_ORDER).fillna(2))
    sort = ["_order", "_lam", "_kl"] + (["optim.lr"] if "optim.lr" in agg else []) + extra
    agg = agg.sort_values(sort, kind="stable")
    agg = agg.assign(**{f"_text:{c}": axis_text(agg, c) for c in extra})
    header = [h for _, h in labels] + [c.split(".")[-1] for c in extra] + ["n"]
    header += [h for _, h in metrics]
    body = []
    for _, r in agg.iterrows():
        cells = [str(r[c]) for c, _ in labels] + [r[f"_text:{c}"] for c in extra] + [str(r["n"])]
        for m, _ in metrics:
            digits = 3 if m == "eval/informativeness" else 1
            cells.append(fmt_mean_sem(r[f"{m}:mean"], r[f"{m}:sem"], percent_scale(m), digits))
        body.append(cells)
    first_numeric = len(labels) + len(extra)
    return Table(header, body, numeric=set(range(first_numeric, len(header))))
