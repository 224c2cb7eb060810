"""Adversarial cases: a table, the claim it is scored for, and the verdict the papers imply.

Every claim has a :class:`Control` — a table where its statement holds — from which the
failure classes of issue 33 that apply to every claim are derived (``generic``): the control
itself (supported), its rows duplicated under the same run id and under new run ids with the
same resolved config (counted once: verdict and headline unchanged), one cell cut to one seed
and one metric NaN in one cell ("not tested", naming it), and the control without any noise (a
degenerate table: nothing decided). The claim-specific classes (opposite effects pooled away,
a sign without its size, a missing premise, the effect only in another experiment, an
interval wholly past the margin) are written out per claim as :class:`Case`.

A case that the scorecard does not yet score right is listed in ``xfails.KNOWN`` with the
issue's reason; it runs as ``pytest.mark.xfail(strict=True)``, so each one fails the suite the
moment it passes — then its line is removed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from .tables import DECIDED, Table, duplicate, mask, one_seed, score, set_nan
from .xfails import KNOWN

NOT_DECIDED = "not decided"  # an expectation: neither supported nor contradicted
NOT_SUPPORTED = "not supported"  # an expectation: anything but supported
Build = Callable[[Table], pd.DataFrame | None]


@dataclass(frozen=True)
class Case:
    """One table scored for one claim and the verdict the published statement implies."""

    claim: int
    name: str
    build: Build
    verdict: str  # a verdict, or NOT_DECIDED
    #: Words the evidence must contain (each one of its alternatives, case-insensitive).
    says: tuple[tuple[str, ...], ...] = ()
    #: Compare verdict and headline with the control's (duplicated rows count once).
    as_control: Build | None = None
    seed: int = 0
    noise: bool = True

    @property
    def id(self) -> str:
        return f"claim{self.claim:02d}-{self.name}"


@dataclass(frozen=True)
class Control:
    """A claim's control table and one cell (``cell``: column → value) and ``metric`` it
    reads, for the generic classes."""

    claim: int
    build: Build
    cell: Mapping[str, Any]
    metric: str | None  # None: the claim reads trajectories; its NaN case is written out
    #: Words naming the cell in the evidence of a one-seed case (each: alternatives).
    names_cell: tuple[str, ...] = ("seed",)
    #: The degenerate table when zero noise is not one (count-based rules): built as given.
    degenerate: Build | None = None


def table_of(build: Build, t: Table) -> pd.DataFrame:
    """The table ``build`` makes on ``t`` (its return value, else ``t``'s rows)."""
    out = build(t)
    return t.frame() if out is None else out


def edit(build: Build, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Build:
    """``build`` followed by ``change`` of its table."""
    return lambda t: change(table_of(build, t))


def generic(c: Control) -> list[Case]:
    """The failure classes every claim is checked against, derived from its control."""

    def where(df: pd.DataFrame) -> pd.Series:
        return mask(df, **{k.replace(".", "__"): v for k, v in c.cell.items()})

    def dup(same_id: bool) -> Build:
        return edit(c.build, lambda df: duplicate(df, where(df), 3, same_id))

    cases = [
        Case(c.claim, "control", c.build, "supported"),
        Case(c.claim, "e-duplicate-run-ids", dup(True), "supported", as_control=c.build),
        Case(c.claim, "e-duplicate-configs", dup(False), "supported", as_control=c.build),
        Case(
            c.claim,
            "f-one-seed-cell",
            edit(c.build, lambda df: one_seed(df, where(df))),
            "not tested",
            says=(c.names_cell,),
        ),
    ]
    if c.metric is not None:
        cases.append(
            Case(
                c.claim,
                "g-nan-metric",
                edit(c.build, lambda df: set_nan(df, where(df), c.metric)),
                "not tested",
                says=((c.metric, c.metric.rsplit("/", 1)[-1]),),
            )
        )
    if c.degenerate is None:
        cases.append(Case(c.claim, "degenerate-no-noise", c.build, NOT_DECIDED, noise=False))
    else:
        cases.append(Case(c.claim, "degenerate-constant", c.degenerate, NOT_DECIDED, noise=False))
    return cases


def params(cases: Iterable[Case]) -> list[Any]:
    """``pytest.param`` per case, xfail (strict) where ``KNOWN`` gives a reason — unless the
    environment sets ``ADVERSARIAL_UNMARKED=1`` (to list which cases fail today)."""
    out = []
    unmarked = os.environ.get("ADVERSARIAL_UNMARKED") == "1"
    for case in cases:
        reason = None if unmarked else KNOWN.get(case.id)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


def new_table(case: Case) -> Table:
    """The case's table builder: seeded, with or without noise."""
    return Table(seed=case.seed) if case.noise else Table(seed=case.seed, noise=0.0, seed_sd=0.0)


def check(case: Case, tmp_path: Path) -> None:
    """Score the case's table for its claim (black box) and assert the implied verdict."""
    t = new_table(case)
    df = table_of(case.build, t)
    result = score(df, case.claim, tmp_path / "study", t.steps)
    shown = f"{result.verdict}: {result.evidence} [{result.headline}]"
    if case.verdict == NOT_DECIDED:
        assert result.verdict not in DECIDED, shown
    elif case.verdict == NOT_SUPPORTED:
        assert result.verdict != "supported", shown
    else:
        assert result.verdict == case.verdict, shown
    for alternatives in case.says:
        text = result.evidence.lower()
        assert any(a.lower() in text for a in alternatives), (alternatives, shown)
    if case.as_control is not None:
        t0 = new_table(case)
        control = score(table_of(case.as_control, t0), case.claim, tmp_path / "control", t0.steps)
        assert (result.verdict, result.headline) == (control.verdict, control.headline), shown
