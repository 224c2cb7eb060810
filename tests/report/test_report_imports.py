"""The report reads the results store only: it must not pull in training, models or torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FORBIDDEN = (
    "torch",
    "transformers",
    "distillscope.train",
    "distillscope.rollout",
    "distillscope.objectives",
    "distillscope.models",
)
#: the torch-free registry modules the reader-facing labels come from (labels.OBJECTIVE_NAMES,
#: labels.ROLLOUT_NAMES)
TORCH_FREE = (
    "distillscope.objectives",
    "distillscope.objectives.registry",
    "distillscope.objectives.options",
    "distillscope.rollout",
    "distillscope.rollout.policy_registry",
)

SCRIPT = """
import json, sys
from pathlib import Path
import pandas as pd
import distillscope.report as report
root = Path(sys.argv[1])
rows = [
    {"run_id": f"r{i}", "experiment": "main", "status": "done", "reason": "",
     "rollout.policy": p, "objective.kind": "forward_kl", "optim.lr": 1e-5, "seed": 42 + i,
     "eval/accuracy": 0.5 + 0.1 * i}
    for i, p in enumerate(["student", "teacher", "student", "teacher"])
]
root.mkdir(parents=True)
pd.DataFrame(rows).to_parquet(root / "results.parquet")
paths = report.write_report(root)
assert paths["html"].is_file()
print(json.dumps(sorted(sys.modules)))
"""


def test_report_imports_nothing_from_training(tmp_path: Path):
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "study")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert "distillscope.report" in modules
    leaked = [
        m
        for m in modules
        if any(m == f or m.startswith(f + ".") for f in FORBIDDEN) and m not in TORCH_FREE
    ]
    assert not leaked, f"distillscope.report imported {leaked}"


PLAN_SCRIPT = """
import json, sys
from distillscope.config import check_machine
from distillscope.objectives import OBJECTIVES
from distillscope.study.baseline import plan_baselines
from distillscope.study.run_study import run_study
from distillscope.study.spec import expand, load_spec
from distillscope.train import preflight_all
runs = expand(load_spec("paper"))
assert plan_baselines(runs) and OBJECTIVES["opd"].needs_student_rollouts
preflight_all([r.config for r in runs])
for r in runs:
    check_machine(r.config)
print(json.dumps(sorted(sys.modules)))
"""


def test_planning_a_study_imports_no_torch():
    # `distillscope report` checks study.yaml against the table by planning the study, and
    # `distillscope study` plans and checks every run while its workers import torch: config
    # validation reads the objectives registry, whose losses load only when a run calls them,
    # and the preflight checks model directories and task files without loading anything.
    out = subprocess.run(
        [sys.executable, "-c", PLAN_SCRIPT], capture_output=True, text=True, timeout=300, check=True
    )
    modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert "distillscope.objectives.registry" in modules
    assert not [m for m in modules if m in ("torch", "transformers")]
