"""Guards of claim 3 (scorecard/claims/c03_lr_forgetting.py): the LR effect read between the two
extreme LRs of a three-LR grid, what each part says when it cannot be estimated, and the two
margin cases (the low LR's change and the rollout effect planted on their margins are never
"supported")."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from distillscope.scorecard.claims.c03_lr_forgetting import CLAIMS

FORGET = "eval/forgetting_pp"
QUIET = {"seed_sd": 0.004, "noise": 0.002}  # forgetting_pp: 0.4 pp seed effect, 0.2 pp noise
MID = 2e-4


def _table(tb, cells: dict) -> pd.DataFrame:
    return pd.DataFrame(tb.cells_table(cells, **QUIET) + tb.baseline())


def test_the_lr_effect_is_read_between_the_extreme_lrs(tb):
    # a middle LR that forgets as little as the low one must not stand in for the high one
    cells = tb.main_cells()
    for (policy, kind, lr), v in list(cells.items()):
        if lr == tb.LOW:
            cells[(policy, kind, MID)] = {**v, FORGET: v[FORGET] - 1.0}
    r = tb.judge(_table(tb, cells), 3)
    assert r.verdict == "supported", r.evidence
    assert r.evidence.startswith("Δ_LR +11.6 pp") or r.evidence.startswith("Δ_LR +11.5 pp")


def test_a_nan_metric_is_named_in_every_part(tb):
    df = _table(tb, tb.main_cells())
    rid = f"main-teacher-forward_kl-{tb.LOW:g}-s43"
    df.loc[df["run_id"] == rid, FORGET] = math.nan
    r = tb.judge(df, 3)
    lack = f"{FORGET} of main{{}} in 1 run(s) ({rid})"
    ends = lack.format(" (extreme LRs)")
    grid = lack.format("")
    assert r.evidence == (
        f"Δ_LR: not tested (lacks {ends}) | low-LR change: not tested (lacks {ends}) | "
        f"Δ_LR/3 − Δ_ro: not tested (lacks {grid}) | Δ_LR/3 + Δ_ro: not tested (lacks {grid})"
    )


def test_one_lr_and_no_offpd_are_named_by_part(tb):
    cells = {k: v for k, v in tb.main_cells().items() if k[2] == tb.LOW}
    r = tb.judge(_table(tb, cells), 3)
    both = r"Δ_LR: not tested \(lacks (.+?)\) \| low-LR change: not tested \(lacks \1\) \| "
    lack = re.match(both, r.evidence).group(1)
    assert lack.startswith("main") and lack.endswith(" runs at two learning rates")
    assert f"Δ_LR/3 − Δ_ro: not tested (lacks {lack})" in r.evidence
    df = _table(tb, tb.main_cells())
    r = tb.judge(df[df["rollout.policy"] != tb.OFF], 3)
    assert r.evidence.startswith("Δ_LR +") and "| low-LR change -" in r.evidence
    lack = "matched cells of both LRs and both rollouts"
    assert r.evidence.endswith(f"| Δ_LR/3 + Δ_ro: not tested (lacks {lack})")


def _planted(tb, case) -> tuple[pd.DataFrame, np.ndarray]:
    df = _table(tb, tb.main_cells())
    sweep = pd.DataFrame(tb.cells_table(tb.main_cells(), experiment="lr_sweep", **QUIET))
    both = pd.concat([df, sweep], ignore_index=True)
    return df.assign(**{FORGET: df[FORGET] + case.offsets(df)[FORGET]}), case.offsets(both)


def test_the_low_lr_margin_case_moves_its_mean_to_the_margin(tb):
    low_case, _ = CLAIMS[0].margin_cases
    shifted, offsets = _planted(tb, low_case)
    n = len(shifted)  # the main grid's and the baseline's rows; the sweep's follow
    low = (shifted["experiment"] == "main") & (shifted["optim.lr"] == tb.LOW)
    # planted: OnPD −1, OffPD 0 at the low LR (mean −0.5); −1.5 more puts it on −2
    assert np.allclose(offsets[FORGET][:n], np.where(low, -1.5, 0.0))
    assert not offsets[FORGET][n:].any()  # the sweep is not the main grid
    assert tb.judge(shifted, 3).verdict != "supported"


def test_the_rollout_margin_case_widens_the_high_lr_gap_to_the_margin(tb):
    _, ro_case = CLAIMS[0].margin_cases
    shifted, offsets = _planted(tb, ro_case)
    n = len(shifted)
    off_high = (shifted["rollout.policy"] == tb.OFF) & (shifted["optim.lr"] == tb.HIGH)
    off_high &= shifted["experiment"] == "main"
    # planted: OffPD forgets 1 pp less and Δ_LR = 11.6; +x at the high LR makes
    # |OnPD − OffPD| = 1 + x there equal to (11.6 − x/2) / 3: x = (11.6/3 − 1) · 6/7
    x = (11.6 / 3 - 1.0) * 6 / 7
    assert np.allclose(offsets[FORGET][:n], np.where(off_high, x, 0.0))
    assert not offsets[FORGET][n:].any()
    assert tb.judge(shifted, 3).verdict != "supported"
