"""Guards of claim 1 (scorecard/claims/c01_no_rollout_gain.py): what its part says when it cannot
be estimated, the configurations it names per task, a table without a task column, and its
margin case (OnPD planted exactly 5 pp ahead is never "supported")."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from distillscope.scorecard.claims.c01_no_rollout_gain import CLAIMS

ACC = "eval/accuracy"


def test_a_nan_metric_is_named_in_the_part_itself(tb):
    df = tb.paper_main()
    rid = f"main-teacher-forward_kl-{tb.LOW:g}-s43"
    df.loc[df["run_id"] == rid, ACC] = math.nan
    r = tb.judge(df, 1)
    assert f"Δ_best: not tested (lacks {ACC} of main in 1 run(s) ({rid}))" in r.evidence


def test_a_one_seed_cell_is_named_in_the_part_itself(tb):
    df = tb.paper_main()
    cell = (df["rollout.policy"] == tb.OFF) & (df["objective.kind"] == tb.REV)
    cell &= (df["optim.lr"] == tb.HIGH) & (df["seed"] != 42)
    r = tb.judge(df[~cell], 1)
    thin = "policy=teacher, lam=-1.0, kind=reverse_kl, lr=0.0003 has fewer than 2 seeds"
    assert f"Δ_best: not tested (lacks {thin})" in r.evidence


def test_each_task_names_its_best_pair_and_the_seeds_left_out(tb):
    rows = []
    for name, best in (("file:a.jsonl:test", tb.HIGH), ("file:b.jsonl:test", tb.LOW)):
        acc = dict(tb.PAPER_ACC)
        acc[(tb.ON, tb.REV, best)] = acc[(tb.OFF, tb.FWD, best)] = 0.80
        extra = {"task.dataset": name, "tag": name[5]}
        rows += tb.cells_table(tb.main_cells(acc), rng=len(rows), **extra)
    df = pd.DataFrame(rows + tb.baseline())
    df = df[df["run_id"] != f"main-student-forward_kl-{tb.LOW:g}a-s44"]  # one seed fewer
    r = tb.judge(df, 1)
    pairs = [f"kind=reverse_kl, lr={lr:g} vs kind=forward_kl, lr={lr:g}" for lr in (3e-4, 1e-4)]
    seeds = "seed(s) 44 missing in some cell: left those pairs"
    family = "best of 256 contrasts: bounds Bonferroni over them"  # 16 pairs per task, squared
    assert f"(best: {'; '.join(pairs)} ({family}); {seeds})" in r.evidence
    assert r.verdict == "supported"


def test_a_table_without_a_task_column_is_one_task(tb):
    df = tb.paper_main().drop(columns=["task.name"])
    r = tb.judge(df, 1)
    assert r.verdict == "supported", r.evidence
    best = "best: kind=reverse_kl, lr=0.0001 vs kind=forward_kl, lr=0.0001"
    assert f"({best} (best of 16 contrasts: bounds Bonferroni over them))" in r.evidence
    r = tb.judge(df[df["rollout.policy"] != tb.OFF], 1)
    assert r.verdict == "not tested" and "Δ_best: not tested (lacks OnPD and OffPD" in r.evidence


def test_the_margin_case_plants_onpd_exactly_at_the_margin(tb):
    (case,) = CLAIMS[0].margin_cases
    df = tb.paper_main()
    sweep = pd.DataFrame(tb.cells_table(tb.main_cells(), experiment="lr_sweep"))
    both = pd.concat([df, sweep], ignore_index=True)
    offsets = case.offsets(both)[ACC]
    onpd_main = (both["experiment"] == "main") & (both["rollout.policy"] == tb.ON)
    assert np.allclose(offsets, np.where(onpd_main, 0.05, 0.0))  # 5 pp, stored as a fraction
    # [P]'s picture has the best OnPD and OffPD both at 72%: planted, the gap is the margin
    shifted = df.assign(**{ACC: df[ACC] + case.offsets(df)[ACC]})
    assert tb.judge(shifted, 1).verdict != "supported"
