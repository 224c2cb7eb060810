"""The recorded quick study of the shipped testbed meets the testbed's learnability targets.

``data/quick_study.json`` holds the per-run rows of one ``distillscope study --preset quick`` on
the shipped testbed (command and date inside; BENCHMARKS.md "Harder variant"). Targets
(docs/testbed.md): distillation at the low LR closes at least half of the teacher–baseline
gap with the skills kept (|forgetting| ≤ 2 pp), the high LR forgets ≥ 5 pp;
and the harder variant is within reach: every student's pass@10 between 5% and 60%, the
untrained student's below 10%. Each configuration is read as its mean over seeds.
"""

import json
from collections import defaultdict
from pathlib import Path
from statistics import mean

from distillscope import testbed
from distillscope.safeyaml import load_yaml
from distillscope.study.spec import PRESETS_DIR

RECORD = json.loads((Path(__file__).parent / "data" / "quick_study.json").read_text())
QUICK = load_yaml((PRESETS_DIR / "quick.yaml").read_text(), "quick")
LOW, HIGH = (QUICK["experiments"][0]["axes"]["optim.lr"][k] for k in ("low", "high"))


def _cells(lr: float) -> dict[tuple[str, str], list[dict]]:
    cells = defaultdict(list)
    for r in RECORD["runs"]:
        if r["experiment"] == "main" and r["optim.lr"] == lr:
            cells[(r["rollout.policy"], r["objective.kind"])].append(r)
    return cells


def _baseline(key: str) -> float:
    return mean(r[key] for r in RECORD["runs"] if r["experiment"] == "baseline")


def test_the_record_is_a_whole_quick_study_of_todays_harder_variant():
    assert QUICK["base"]["eval"]["harder_task"] == "tb-countdown3-hard"
    for lr in (LOW, HIGH):
        cells = _cells(lr)
        assert len(cells) == 4 and all(len(rows) == 2 for rows in cells.values())
    assert all(r["split/overlap"] == r["split/harder/overlap"] == 0 for r in RECORD["runs"])


def test_the_low_lr_closes_half_the_gap_and_keeps_the_skills():
    teacher = testbed.testbed_info()["measured"]["teacher"]["countdown3_accuracy"]
    base = _baseline("eval/accuracy")
    for cell, rows in _cells(LOW).items():
        closed = (mean(r["eval/accuracy"] for r in rows) - base) / (teacher - base)
        assert closed >= 0.5, (cell, closed)
        assert abs(mean(r["eval/forgetting_pp"] for r in rows)) <= 2.0, cell


def test_the_high_lr_forgets():
    for cell, rows in _cells(HIGH).items():
        assert mean(r["eval/forgetting_pp"] for r in rows) <= -5.0, cell


def test_the_harder_variant_is_within_reach_of_every_student():
    assert _baseline("eval/harder/pass@10") < 0.10
    for lr in (LOW, HIGH):
        for cell, rows in _cells(lr).items():
            assert 0.05 <= mean(r["eval/harder/pass@10"] for r in rows) <= 0.60, (lr, cell)
