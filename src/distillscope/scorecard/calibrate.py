"""The scorecard calibrated by simulation: how often each rule gives a false verdict.

    from distillscope.scorecard.calibrate import calibrate
    cal = calibrate(results_df, draws=200, seed=0)   # → dict, written as calibration.json
    cal["false_rate"]["2"], cal["power"]["2"]

Synthetic tables keep the study's exact design (the same rows: experiments, cells, seeds,
baseline, and the measured columns that describe the design, ``DESIGN_METRICS``: each run's
teacher and student sizes) and replace every other metric by a model value plus the study's
own error structure (:mod:`distillscope.scorecard.noise`, docs/method.md §9 "Statistics"):

- **noise**: per metric, a seed effect drawn once per seed and shared by every cell of that seed
  (seed_sd, the seed term of a cell + seed fit), training noise per run (train_sd) and per-item
  binomial evaluation noise at the study's item and sample counts (from the runs'
  ``eval_items.parquet``, else binomial at the metric's level); every component estimated from
  the study (``noise_model``; its fallbacks: ``noise.default_sd``).
- **null**: no axis has any effect; every run's accuracy is ``LEARNED_BY`` above the untrained
  student, so that no-effect claims have power. Columns a claim compares as one measure sit at
  one level (``Claim.aligned``: GRPO's rlvr/eval_accuracy at OPD's eval/accuracy, claim 27),
  and the trajectory features the claims read from metrics.jsonl are drawn like any metric
  when the caller's table carries them (``calibration_run``: claims 16, 19, 26).
- **zeros** / **constant**: degenerate tables (every value 0; every value the same, no noise).
- **margin**: each no-effect part of a claim planted at exactly its margin, where "no effect"
  is false (``MARGIN_CASES``: e.g. OnPD +5 pp in the main grid for claim 1, forward KL's band
  5 pp wide for claim 2, the low LR's forgetting at −2 pp for claim 3); a case of a claim that
  also states effects sits on the planted effects, and each case's tables are scored for its
  claim only. A replay claim's case (14, 15: a replayed claim at its margin on the ablation)
  is a false world only on a table whose main grid supports that claim (``MarginCase.given``,
  docs/method.md §9: the replay judges for support only the conclusions the main grid
  supports); "supported" elsewhere is counted apart (``UNDECIDED_GIVEN``), not as false.
- **planted**: the published effects of docs/method.md §9 (``planted_offsets``), so that each
  claim is true.

Both sides are calibrated (docs/method.md §9: decided on both sides of a margin). A *false
support* is "supported" where the claim is false: under null (a claim that states an effect),
under margin (a part at its margin) and on the degenerate tables. A *false contradiction* is
"contradicted" where the claim is true: under planted (the published effects), under null for
the claims a null table makes true (``no_effect``: ``Claim.null_true``), and on the degenerate
tables. Under null, "contradicted" is right for an effect claim (its effect is absent). A
rule's false-verdict rate is the worst of the two; its power
is its "supported" rate under the planted effects. Seeded and deterministic; torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from distillscope.metric_keys import unit
from distillscope.results.aggregate import (
    SEED,
    hashable_axes,
    is_baseline,
    metric_columns,
    trained,
)
from distillscope.scorecard.claims import CLAIMS
from distillscope.scorecard.item_noise import DrawnItems
from distillscope.scorecard.noise import Components, default_sd, draw_noise, estimate_noise
from distillscope.scorecard.plants import (
    ACC,
    LEARNED_BY,
    LEVELS,
    MarginCase,
    Offsets,
    margin_cases,
    margin_offsets,
    planted_offsets,
    summed,
)
from distillscope.scorecard.runner import CLAIM_IDS, score_claims

SCENARIOS = ("null", "zeros", "constant", "margin", "planted")
DECIDED = ("supported", "contradicted")
#: A replay claim's "supported" in a margin case ``given`` a replayed claim the main grid of
#: that table does not support (undecided or contradicted): true of the conclusions it
#: reaches (``MarginCase.given``).
UNDECIDED_GIVEN = "supported (claim {} not supported on the main grid)"
NULL_SCENARIOS = ("null", "zeros", "constant")
DEGENERATE = ("zeros", "constant")
#: (experiment, metric, like): columns claims compare as one measure (``Claim.aligned``).
ALIGNED = tuple(a for c in CLAIMS for a in c.aligned)
#: The claims a null table (no axis effect, students learned) makes true (``Claim.null_true``).
NO_EFFECT_CLAIMS = tuple(c.id for c in CLAIMS if c.null_true)
MARGIN = "margin"  # the scenario that plants each no-effect claim's effect at its margin
#: Measured columns that describe a run's design rather than an outcome: kept as the study
#: recorded them, never simulated (claim 22 sizes its teachers by the teacher's parameters).
DESIGN_METRICS = ("model/teacher_params", "model/student_params")
DEFAULT_DRAWS = 200
#: The trajectory features the claims read, as they are drawn: null value, noise, which runs
#: (each claim's ``Claim.simulated``), in claim order.
TRAJ = {name: sim for c in CLAIMS for name, sim in c.simulated.items()}


def noise_model(
    df: pd.DataFrame, metrics: list[str], study_dir: Path | None = None
) -> dict[str, Components]:
    """Per metric, its variance components (stored units): ``noise.estimate_noise`` of the
    study (per-item outcomes from ``study_dir`` when given); a trajectory feature ``TRAJ``'s
    SD as training noise; a metric the study lacks gets ``noise.default_sd`` of its typical size."""
    rows = trained(df)
    found = estimate_noise(df, study_dir)
    out = {}
    for m in metrics:
        if m in TRAJ:
            out[m] = Components(0.0, TRAJ[m].sd, 0, 0, None)
        else:
            sd = default_sd(m, _typical(rows, m))
            out[m] = found.get(m, Components(0.0, sd, 0, 0, None))
    return out


def run_sds(noise: dict[str, Components]) -> dict[str, float]:
    """Per metric, a run's total SD √(seed_sd² + train_sd² + eval_var): the scale of planted
    effects that are set in SDs."""
    return {m: c.run_var() ** 0.5 for m, c in noise.items()}


def _typical(rows: pd.DataFrame, metric: str) -> float:
    """The metric's median over finished runs (defaults: 0.6 for fractions, else 1); 0 for a
    change in pp (forgetting_pp: after − before) — the null is a world without effects, and a
    study's median forgetting is itself its high LR's effect."""
    if metric in TRAJ:
        return TRAJ[metric].null
    if unit(metric) == "pp":
        return 0.0
    vals = pd.to_numeric(rows.get(metric, pd.Series(dtype=float)), errors="coerce").dropna()
    if len(vals):
        return float(vals.median())
    return 0.6 if unit(metric) == "fraction" else 0.0 if unit(metric) == "pp" else 1.0


#: Typical values of the metrics the rules read, for a design that has no measurements yet.
TYPICAL = {
    "eval/accuracy": 0.6,
    "eval/pass@1": 0.6,
    "eval/pass@10": 0.75,
    "eval/harder/pass@10": 0.4,
    "eval/forgetting_pp": 0.0,
    "eval/sparsity_bf16_tau1e-06": 0.8,
    "eval/sparsity_fp32_tau1e-06": 0.3,
    "eval/teacher_style_share": 0.5,
    "eval/style_share_t1": 0.2,  # the untrained student's: the style in its support
    "train/grad_clipped_frac": 0.9,
    "train/grad_norm_mean": 3.0,
    "train/grad_norm_max": 9.0,
    "rollout/student_token_prob_mean": 0.5,
    "rollout/teacher_token_prob_mean": 0.5,
    "rollout/loglik_gap_mean": 0.0,
    "eval/informativeness": 0.1,
}


def planned_table(plan_rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A results table for planned runs (``study.table.plan_row``, or ``planned_row`` with the
    measurements a run's config adds) plus a baseline row per seed, every metric at its ``TYPICAL``
    value: the design of a study before it runs (no seed variance, so ``noise_model`` falls
    back to ``DEFAULT_SD``)."""
    rows = [{**r, "status": "done", **TYPICAL} for r in plan_rows]
    # the untrained student is evaluated like the runs: pass@k at every k some run measures
    ks = {c for r in plan_rows for c in r if c.startswith("eval/pass@") and c not in TYPICAL}
    large = {c: TYPICAL["eval/pass@10"] for c in sorted(ks)}
    base = {"experiment": "baseline", "status": "done", **TYPICAL, **large}
    # a study evaluates the untrained student once per seed (``study.baseline``)
    seeds = list(dict.fromkeys(r[SEED] for r in plan_rows if SEED in r))
    if len(seeds) < 2:
        return pd.DataFrame([*rows, {"run_id": "baseline", **base}])
    rows += [{"run_id": f"baseline-{k}", SEED: s, **base} for k, s in enumerate(seeds, 1)]
    return pd.DataFrame(rows)


def design(df: pd.DataFrame) -> pd.DataFrame:
    """The study's rows without measurements: ids, experiment, axes; every run finished."""
    keep = [c for c in df.columns if c not in metric_columns(df) or c in DESIGN_METRICS]
    out = hashable_axes(df[keep].copy())
    out["status"] = "done"
    if "reason" in out.columns:
        out["reason"] = ""
    return out.reset_index(drop=True)


def draw(
    d: pd.DataFrame,
    scenario: str,
    metrics: list[str],
    noise: dict[str, Components],
    typical: dict[str, float],
    rng: np.random.Generator,
    case: MarginCase | None = None,
    effects: tuple[Offsets, bool] | None = None,
    items_out: dict[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """One synthetic results table of design ``d`` under ``scenario`` (see module docstring):
    model values plus ``noise.draw_noise`` (a seed effect shared by the cells of each seed,
    training noise, per-item binomial evaluation noise); under ``margin``, ``case`` says which
    claim's part sits at its margin (default: every null-based case at once). ``effects``:
    ``effects_of(d, scenario, noise, case)`` when the caller draws many tables of one case.
    ``items_out``: filled with the runs' per-item values, items crossed with the cells
    (``noise.draw_noise``), for ``score_claims(items=item_noise.DrawnItems(items_out))``."""
    out = d.copy()
    base = is_baseline(out).to_numpy()
    planted, levels = effects or effects_of(d, scenario, noise, case)
    degenerate = scenario in DEGENERATE
    seeds = pd.factorize(out[SEED].map(str) if SEED in out else pd.Series("", out.index))[0]
    drawn = {} if degenerate else draw_noise({m: noise[m] for m in metrics}, seeds, rng, items_out)
    experiment = out["experiment"].map(str).to_numpy()
    values = {}
    for m in metrics:
        if scenario == "zeros":
            values[m] = np.zeros(len(d))
            continue
        v = np.full(len(d), typical[m])
        for e, metric, like in ALIGNED:
            if metric == m and like in typical:
                v[experiment == e] = typical[like]
        if degenerate:
            values[m] = v
            continue
        if m in planted:
            if m in LEVELS and levels:
                v = planted[m].astype(float)
            elif m == "train/grad_norm_mean":
                v = typical[m] * (1.0 + planted[m])
            else:
                v = v + planted[m]
        v = v + drawn[m]
        if unit(m) == "fraction":
            v = np.clip(v, 0.0, 1.0)
        values[m] = v
    if ACC in values and not degenerate:
        values[ACC] = np.where(base, typical[ACC] - LEARNED_BY, values[ACC])
    for m, sim in TRAJ.items():
        if m in values and "objective.kind" in out:
            values[m] = np.where(sim.runs(out), values[m], np.nan)
    if any(m in out.columns for m in values):
        return out.assign(**values)
    # new columns in one concatenation (``assign`` inserts them one by one: ~20 ms a table)
    return pd.concat([out, pd.DataFrame(values, index=out.index)], axis=1)


#: What ``draw`` needs of a study: (design, metrics, noise components, typical values).
Setup = tuple[pd.DataFrame, list[str], dict[str, Components], dict[str, float]]


def setup(df: pd.DataFrame, study_dir: Path | None = None) -> Setup:
    """(design, metrics, noise components, typical value) of a study's table: what ``draw``
    needs; ``study_dir`` supplies the runs' per-item outcomes. The design's text columns are
    plain Python objects: the rules read them ~20% faster than Arrow strings."""
    d = design(df)
    d = d.astype({c: object for c in d.columns if isinstance(d[c].dtype, pd.StringDtype)})
    metrics = [
        m
        for m in metric_columns(df)
        if m not in DESIGN_METRICS and pd.to_numeric(df[m], errors="coerce").notna().any()
    ]
    metrics += [m for m, sim in TRAJ.items() if m not in metrics and sim.runs(d).any()]
    finished_runs = trained(df)
    noise = noise_model(df, metrics, study_dir)
    typical = {m: _typical(finished_runs, m) for m in metrics}
    if ACC in typical:
        typical[ACC] = float(np.clip(typical[ACC], LEARNED_BY + 0.1, 0.9))
    return d, metrics, noise, typical


def effects_of(
    d: pd.DataFrame, scenario: str, noise: dict[str, Components], case: MarginCase | None
) -> tuple[Offsets, bool]:
    """(offsets of the scenario in design ``d``, whether the level metrics ``LEVELS`` are set as
    levels): the same for every table of one case, so ``calibrate`` computes them once."""
    return _effects(d, scenario, run_sds(noise), case)


def _effects(
    d: pd.DataFrame, scenario: str, noise: dict[str, float], case: MarginCase | None
) -> tuple[Offsets, bool]:
    """(offsets of the scenario, whether the level metrics ``LEVELS`` are set as levels)."""
    if scenario == "planted":
        return planted_offsets(d, noise), True
    if scenario != MARGIN:
        return {}, False
    if case is None:
        return margin_offsets(d), False
    if case.on_planted:
        return summed([planted_offsets(d, noise), case.offsets(d)], len(d)), True
    return case.offsets(d), False


def simulate(
    df: pd.DataFrame, scenario: str, seed: int = 0, study_dir: Path | None = None
) -> pd.DataFrame:
    """One synthetic table with the design and error structure of ``df`` under ``scenario``."""
    d, metrics, noise, typical = setup(df, study_dir)
    return draw(d, scenario, metrics, noise, typical, np.random.default_rng(seed))


def false_support(claim: int, scenario: str, verdict: str) -> bool:
    """Whether "supported" is false here: the claim is false (null for an effect claim, a part
    at its margin) or nothing can be decided (degenerate tables)."""
    if verdict != "supported":
        return False
    if scenario == "null":
        return claim not in NO_EFFECT_CLAIMS
    return scenario in (MARGIN, *DEGENERATE)


def false_contradiction(claim: int, scenario: str, verdict: str) -> bool:
    """Whether "contradicted" is false here: the claim is true (planted; null for a no-effect
    claim) or nothing can be decided (degenerate)."""
    if verdict != "contradicted":
        return False
    if scenario == "null":
        return claim in NO_EFFECT_CLAIMS
    return scenario in ("planted", *DEGENERATE)


def _false(claim: int, scenario: str, verdict: str) -> bool:
    return false_support(claim, scenario, verdict) or false_contradiction(claim, scenario, verdict)


def _claim_ids(claims: Collection[int] | None) -> list[int]:
    """The ids of the claims to score, in claim order (None: all)."""
    return [c for c in CLAIM_IDS if claims is None or c in claims]


def _scored(scenario: str, claims: Collection[int]) -> list[int]:
    """The claims a scenario's tables are scored for (margin: those with a margin case)."""
    if scenario == MARGIN:
        with_case = {c.claim for c in margin_cases(claims)}
        return [c for c in claims if c in with_case]
    return list(claims)


def _runs(scenario: str, ids: list[int], draws: int) -> list[tuple[MarginCase | None, list[int]]]:
    """(margin case, claims scored) of each batch of ``draws`` tables of a scenario."""
    if scenario == MARGIN:
        return [(c, [c.claim]) for c in margin_cases(ids)]
    return [(None, ids)] if ids else []


def calibrate(
    df: pd.DataFrame,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    claims: Collection[int] | None = None,
    on_table: Callable[[], None] | None = None,
    study_dir: Path | None = None,
    prepared: Setup | None = None,
) -> dict[str, Any]:
    """Verdict rates of every rule on ``draws`` synthetic tables per scenario (JSON-ready).

    Returns ``{"draws", "seed", "noise": {metric: Components.summary()}, "rates": {scenario:
    {claim: {verdict: rate}}},
    "false_rate": {claim: worst false rate over its false scenarios}, "power": {claim:
    supported rate under "planted"}}`` with claims as strings (the margin scenario holds the
    no-effect claims only); the degenerate scenarios are drawn once (they have no noise), so
    :func:`tables` tables in all. ``claims`` restricts the rules scored (default: all);
    ``on_table`` is called after each table is scored (progress); ``study_dir`` supplies the
    runs' per-item outcomes; ``prepared``: ``setup(df, study_dir)`` when the caller has it.
    """
    ids = _claim_ids(claims)
    d, metrics, noise, typical = prepared or setup(df, study_dir)
    rng = np.random.default_rng(seed)
    rates: dict[str, dict[str, dict[str, float]]] = {}
    for scenario in SCENARIOS:
        rates[scenario] = {}
        n = _tables_of(scenario, draws)
        for case, scored in _runs(scenario, ids, draws):
            counts: dict[int, dict[str, int]] = {c: {} for c in scored}
            effects = effects_of(d, scenario, noise, case)
            given = case.given if case is not None else None
            read = [*scored, given] if given is not None and given not in scored else scored
            for _ in range(n):
                drawn: dict[str, np.ndarray] = {}
                table = draw(d, scenario, metrics, noise, typical, rng, case, effects, drawn)
                items = DrawnItems(drawn) if drawn else None
                verdicts = {r.id: r.verdict for r in score_claims(table, claims=read, items=items)}
                for c in scored:
                    v = verdicts[c]
                    if v == "supported" and given is not None and verdicts[given] != "supported":
                        v = UNDECIDED_GIVEN.format(given)
                    counts[c][v] = counts[c].get(v, 0) + 1
                if on_table is not None:
                    on_table()
            for c, vs in counts.items():
                got = {v: k / n for v, k in sorted(vs.items())}
                old = rates[scenario].get(str(c))
                if old is None or got.get("supported", 0.0) > old.get("supported", 0.0):
                    rates[scenario][str(c)] = got  # margin: the claim's worst case
    support = _worst(rates, ids, false_support)
    contra = _worst(rates, ids, false_contradiction)
    false_rate = {c: max(support[c], contra[c]) for c in support}
    power = {str(c): rates["planted"][str(c)].get("supported", 0.0) for c in ids}
    summary = {m: c.summary() for m, c in noise.items()}
    out = {"draws": draws, "seed": seed, "noise": summary, "rates": rates}
    out |= {"false_support": support, "false_contradiction": contra}
    return {**out, "false_rate": false_rate, "power": power}


def _worst(rates: dict, ids: list[int], false: Callable[[int, str, str], bool]) -> dict:
    """Per claim, the worst rate of ``false`` verdicts over the scenarios."""
    return {
        str(c): max(
            [
                sum(x for v, x in rates[s][str(c)].items() if false(c, s, v))
                for s in SCENARIOS
                if str(c) in rates[s]
            ]
            or [0.0]
        )
        for c in ids
    }


def _tables_of(scenario: str, draws: int) -> int:
    return 1 if scenario in ("zeros", "constant") else draws


def tables(draws: int, claims: Collection[int] | None = None) -> int:
    """How many synthetic tables :func:`calibrate` scores for ``draws`` per scenario."""
    ids = _claim_ids(claims)
    return sum(_tables_of(s, draws) * len(_runs(s, ids, draws)) for s in SCENARIOS)
