"""What many claims share: the main grid's rows, seed-blocked fits, matched contrasts by stratum,
"the students learned", and the published world's effects for calibration.

Every estimate here is one ``Estimate`` per stratum (``estimate``); a part's ``estimate``
function is usually a one-line call of these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from distillscope.labels import is_label_column
from distillscope.results.aggregate import cell_columns, percent_scale, row_keys, with_labels
from distillscope.results.matching import LAMBDA, cell_key, match_columns
from distillscope.scorecard.claim_spec import ABOVE, POOLED, Part
from distillscope.scorecard.estimate import Blocks, Estimate, not_tested, seed_level
from distillscope.scorecard.evidence import (
    ClaimEvidence,
    missing_metric,
    task_column,
)

ACC = "eval/accuracy"
FORGET = "eval/forgetting_pp"
SPARSITY = "eval/sparsity_bf16_tau1e-06"  # the judged view (docs/method.md §10 "Sparsity")
SPARSITY_FP32 = "eval/sparsity_fp32_tau1e-06"
MAIN = "main"
POLICY, KIND, LR = "rollout.policy", "objective.kind", "optim.lr"
STUDENT, TEACHER = "student", "teacher"
FORWARD, REVERSE = "forward_kl", "reverse_kl"
#: Students "learned" when their mean accuracy beats the untrained student by this many pp.
LEARNED_PP = 5.0


#: The config columns that make a run a style run: the teacher reads the testbed's glyph flag,
#: or an instruction only it reads (chat format, e.g. to reason in Spanish).
STYLE_COLUMNS = ("task.teacher_style_flag", "task.teacher_instruction")


def style_runs(df: pd.DataFrame) -> pd.Series:
    """Which rows are style runs: ``task.teacher_style_flag`` true or a non-empty
    ``task.teacher_instruction`` (an absent column counts as neither)."""
    style = pd.Series(False, index=df.index)
    if "task.teacher_style_flag" in df.columns:
        style |= df["task.teacher_style_flag"].fillna(False).astype(bool)
    if "task.teacher_instruction" in df.columns:
        text = df["task.teacher_instruction"]
        style |= text.notna() & (text.astype(str).str.strip() != "")
    return style


def plain_runs(view: ClaimEvidence, experiment: str, clipped: bool = True) -> pd.DataFrame:
    """The runs of ``experiment`` (``view.rows``) without ablation rows: teacher-style prompts,
    clipping switched off (or, with ``clipped`` false, switched on: the no-clip ablation's own
    runs), regulated objectives; cached per table, as ``view.rows`` is."""
    df = view.rows(experiment)  # the declaration checked, its duplicates noted
    key = ("plain", experiment, clipped)
    cache = view.ev._cache
    if key not in cache:
        cache[key] = plain(df, clipped)
    return cache[key]


def plain(df: pd.DataFrame, clipped: bool = True) -> pd.DataFrame:
    """``df`` without ablation rows (``plain_runs``)."""
    out = df[~style_runs(df)]
    if "optim.grad_clip" in out.columns:
        out = out[out["optim.grad_clip"].notna() == clipped]
    elif not clipped:
        out = out.iloc[0:0]
    if "objective.regulation" in out.columns:
        out = out[out["objective.regulation"].isin(["none"]) | out["objective.regulation"].isna()]
    return out


@dataclass(frozen=True)
class Grid:
    """Where a main-grid claim reads its runs: an experiment's plain OnPD/OffPD × forward/
    reverse KL runs. The ablations that replay claims 1–4 (claims 14, 15) read other grids of
    the same shape: ``clipped`` false reads the runs without gradient clipping (`no_clip`);
    ``kinds`` maps the objective kinds that estimate a KL direction to it (`sampled`:
    ``forward_sampled`` → ``forward_kl``)."""

    experiment: str = MAIN
    clipped: bool = True
    kinds: tuple[tuple[str, str], ...] = ()
    name: str = "main grid"  # in words, for the evidence

    def rows(self, view: ClaimEvidence) -> pd.DataFrame:
        """The grid's runs, their kinds named as the KL direction they estimate (cached per
        table)."""
        rows = plain_runs(view, self.experiment, self.clipped)
        key = ("grid", self)
        if key not in view.ev._cache:
            view.ev._cache[key] = self._rows(rows)
        return view.ev._cache[key]

    def _rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        if POLICY not in rows.columns or KIND not in rows.columns:
            return rows.iloc[0:0]
        if self.kinds:
            rows = rows.assign(**{KIND: rows[KIND].map(lambda k: dict(self.kinds).get(k, k))})
        return rows[rows[POLICY].isin([STUDENT, TEACHER]) & rows[KIND].isin([FORWARD, REVERSE])]

    def kind(self, direction: str) -> str:
        """The design's objective kind of KL ``direction`` (``forward_sampled`` for
        ``forward_kl`` on the sampled grid)."""
        return next((k for k, v in self.kinds if v == direction), direction)


MAIN_GRID = Grid()


def grid_rows(view: ClaimEvidence, experiment: str) -> pd.DataFrame:
    """The plain OnPD/OffPD × forward/reverse KL runs of ``experiment`` (``Grid``)."""
    return Grid(experiment).rows(view)


def cell_by(rows: pd.DataFrame) -> list[str]:
    """The columns that make a cell of ``rows``: every axis but the seed, the experiment's name
    and derived label columns."""
    return [c for c in cell_columns(rows) if c != "experiment" and not is_label_column(c)]


def blocks(view: ClaimEvidence, key: str, rows: pd.DataFrame, metric: str) -> Blocks | str:
    """The seed-blocked fit of ``metric`` over ``rows`` (cached per key and metric), or what is
    missing (a string) when a run lacks the metric."""
    cache = view.ev._cache
    k = ("blocks", key, metric)
    if k not in cache:
        lack = missing_metric(rows, metric, key)
        cache[k] = lack or Blocks(rows, metric, cell_by(rows), view.ev.item_matrix(rows, metric))
    return cache[k]


def stratum_name(cells: pd.DataFrame, i: int, columns: Sequence[str]) -> str:
    """A reader's name of stratum ``columns`` of cell ``i`` (``forward KL, 1e-04 (low)``)."""
    if not columns:
        return "pooled"
    return cell_key(cells.iloc[i], list(columns))


def matched_weights(
    b: Blocks, axis: str, a_value: object, b_value: object, strata: Sequence[str] = ()
) -> dict[str, np.ndarray]:
    """Per stratum of ``strata`` ("pooled" when empty), the weights of ``a_value`` −
    ``b_value`` along ``axis`` averaged over the matched cells (cells that agree on every other
    cell column); a stratum without a matched pair is absent."""
    cells = _labelled(b)
    others = [c for c in match_columns(cells, axis) if c in b.by]
    keys = row_keys(cells, others)
    side = cells[axis].map(str).to_numpy()
    groups: dict[str, list[tuple[int, int]]] = {}
    for k in dict.fromkeys(keys):
        ia = np.flatnonzero((keys == k) & (side == str(a_value)))
        ib = np.flatnonzero((keys == k) & (side == str(b_value)))
        if len(ia) == 1 and len(ib) == 1:
            stratum = stratum_name(cells, int(ia[0]), strata)
            groups.setdefault(stratum, []).append((int(ia[0]), int(ib[0])))
    out = {}
    for stratum, pairs in groups.items():
        w = np.zeros(len(cells))
        for ia, ib in pairs:
            w[ia] += 1.0 / len(pairs)
            w[ib] -= 1.0 / len(pairs)
        out[stratum] = w
    return out


def matched(
    b: Blocks, axis: str, a_value: object, b_value: object, strata: Sequence[str], name: str
) -> list[Estimate]:
    """``a_value`` − ``b_value`` along ``axis`` over matched cells, one seed-blocked estimate
    per stratum of ``strata`` (``matched_weights``; one pooled estimate, labelled ``name``,
    when empty)."""
    ws = matched_weights(b, axis, a_value, b_value, strata)
    if not ws:
        return [not_tested(name, f"matched cells of {axis} = {a_value} and {b_value}")]
    return [b.contrast(w, stratum if strata else name) for stratum, w in ws.items()]


def _labelled(b: Blocks) -> pd.DataFrame:
    return b.labelled


def tasks_of(b: Blocks) -> str | None:
    """The task column of a fit's cells (``task.dataset``, else ``task.name``)."""
    return task_column(b.cells)


def learned(view: ClaimEvidence, rows: pd.DataFrame, where: str) -> list[Estimate]:
    """Students of ``rows`` − the untrained student, accuracy in pp, seed-blocked: per seed the
    mean over that seed's runs minus the baseline's same-seed accuracy (``seed_level``)."""
    base = view.baseline()
    lack = missing_metric(rows, ACC, where) or missing_metric(base, ACC, "the baseline")
    if lack:
        return [not_tested("students − untrained", lack)]
    return [seed_level(rows, ACC, "students − untrained", base)]


def learned_premise_why() -> str:
    """The premise's justification (shared by the no-effect claims)."""
    return (
        "A no-effect claim needs a study that could have seen an effect (docs/method.md §10): "
        "[P]'s students reach 71–73% where the untrained student is far lower (not printed; "
        f"the calibration plants 30 pp); {LEARNED_PP:g} pp is a floor any real distillation "
        "clears."
    )


def rows_mask(d: pd.DataFrame, experiment: str, **values: object) -> np.ndarray:
    """Mask of design rows of ``experiment`` whose columns equal ``values`` (``__`` for dots)."""
    if "experiment" not in d.columns:
        return np.zeros(len(d), dtype=bool)
    m = (d["experiment"].map(str) == experiment).to_numpy().copy()
    for key, value in values.items():
        col = key.replace("__", ".")
        m &= d[col].map(str).eq(str(value)).to_numpy() if col in d else False
    return m


def lr_end(d: pd.DataFrame, experiment: str, high: bool) -> np.ndarray:
    """Mask of the design rows of ``experiment`` at its smallest (or largest) LR."""
    rows = rows_mask(d, experiment)
    lr = pd.to_numeric(d.get(LR, pd.Series(np.nan, index=d.index)), errors="coerce")
    lrs = lr[rows].dropna()
    if lrs.empty:
        return np.zeros(len(d), dtype=bool)
    return rows & (lr == (lrs.max() if high else lrs.min())).to_numpy()


@dataclass(frozen=True)
class Axes:
    """A design's rows as the planted world sees them (calibration's ``Claim.plant``)."""

    kind: pd.Series  # objective.kind as strings ("" when absent)
    policy: pd.Series  # rollout.policy as strings
    lam: np.ndarray  # λ (0 where unknown)
    reverse: np.ndarray  # reverse KL, full-vocabulary or sampled
    spectrum: np.ndarray  # rows of the `spectrum` experiment
    teacher: np.ndarray  # OffPD rows
    on: np.ndarray  # on-policy rows: OnPD, or λ > 0 on the spectrum
    lr_position: np.ndarray  # log-LR position in [0, 1] within the row's experiment


def column(d: pd.DataFrame, name: str) -> pd.Series:
    """``name`` as strings ("" where the design has no such column)."""
    return d[name].map(str) if name in d.columns else pd.Series("", index=d.index)


def lr_position(d: pd.DataFrame) -> np.ndarray:
    """Per row, log-LR position in [0, 1] within its experiment (0 = lowest LR)."""
    pos = np.zeros(len(d))
    if LR not in d.columns:
        return pos
    lr = pd.to_numeric(d[LR], errors="coerce")
    exp = column(d, "experiment") if "experiment" in d.columns else pd.Series("", index=d.index)
    for _, idx in d.groupby(exp).groups.items():
        x = np.log10(lr.loc[idx].to_numpy(dtype=float))
        span = np.nanmax(x) - np.nanmin(x) if np.isfinite(x).any() else 0.0
        pos[d.index.get_indexer(idx)] = np.nan_to_num((x - np.nanmin(x)) / span) if span else 0.0
    return pos


def axes(d: pd.DataFrame) -> Axes:
    """The design's ``Axes``."""
    labelled = with_labels(d)
    kind, policy = column(labelled, KIND), column(labelled, POLICY)
    lam = pd.to_numeric(labelled[LAMBDA], errors="coerce").fillna(0.0).to_numpy()
    teacher = (policy == TEACHER).to_numpy()
    return Axes(
        kind,
        policy,
        lam,
        kind.isin([REVERSE, "reverse_sampled"]).to_numpy(),
        (column(labelled, "experiment") == "spectrum").to_numpy(),
        teacher,
        ((policy == STUDENT).to_numpy() | (lam > 0)) & ~teacher,
        lr_position(d),
    )


def in_pp(metric: str, value: float) -> float:
    """A display-unit offset (pp for fractions) in the metric's stored units."""
    return value / percent_scale(metric)


def grid_learned(grid: Grid) -> Part:
    """The premise "the students of ``grid`` learned" (the main grid: its plain runs)."""
    return learned_part(MAIN) if grid == MAIN_GRID else learned_part(grid.experiment, grid)


def learned_part(experiment: str, grid: Grid | None = None) -> Part:
    """The premise "the students of ``experiment`` learned": their accuracy − the untrained
    student's ≥ LEARNED_PP, seed-blocked (``learned``); over ``grid``'s runs when given."""

    def rows(view: ClaimEvidence) -> pd.DataFrame:
        return plain_runs(view, experiment) if grid is None else grid.rows(view)

    return Part(
        "gain",
        f"accuracy of `{experiment}`'s {'plain' if grid is None else grid.name} runs − the "
        "untrained student's, per seed (the seed as replicate)",
        lambda view: learned(view, rows(view), experiment),
        POOLED,
        ABOVE,
        LEARNED_PP,
        learned_premise_why(),
        published=30.0,
    )
