"""Which runs a claim reads: the plain runs of an experiment (no style prompts, no clipping
ablation, no regulation) and the main grid's shape (``Grid``: OnPD/OffPD × forward/reverse KL),
cached per results table."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from distillscope.scorecard.claim_columns import (
    FORWARD,
    KIND,
    MAIN,
    POLICY,
    REVERSE,
    STUDENT,
    TEACHER,
)
from distillscope.scorecard.evidence import (
    ClaimEvidence,
)

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
