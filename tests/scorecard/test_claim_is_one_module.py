"""A claim is one module (docs/architecture.md "Adding a claim or a metric").

Everything the scorecard's machinery needs of a claim is declared on its ``Claim``: the
calibration reads ``plant``, ``levels``, ``simulated`` and the margin cases, never a claim
module's own names; so no module outside ``scorecard/claims/`` imports a claim module, and each
claim's declarations agree with what its functions write.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pandas as pd

import distillscope
from distillscope.results.reader import load_study
from distillscope.scorecard.calibrate import TRAJ, design
from distillscope.scorecard.claims import CLAIMS
from distillscope.scorecard.plants import LEVELS

SRC = Path(distillscope.__file__).parent
CLAIM_MODULE = re.compile(r"distillscope\.scorecard\.claims\.c\d")
RECORD = Path(__file__).parents[2] / "bench" / "records" / "paper-2026-12-03"


def _imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_no_module_outside_the_claims_package_imports_a_claim_module():
    claims_dir = SRC / "scorecard" / "claims"
    wrong = {
        f"{path.relative_to(SRC)} → {name}"
        for path in SRC.rglob("*.py")
        if claims_dir not in path.parents
        for name in _imported(path)
        if CLAIM_MODULE.match(name)
    }
    assert not wrong, sorted(wrong)


def test_the_calibration_reads_the_claims_declarations():
    assert list(TRAJ) == [name for c in CLAIMS for name in c.simulated]
    assert set(LEVELS) == {m for c in CLAIMS for m in c.levels}
    assert "traj/early_entropy_ratio" in TRAJ and "eval/informativeness" in LEVELS


def test_a_claims_declarations_name_what_it_reads_and_plants():
    d = design(load_study(RECORD).scored)
    for c in CLAIMS:
        assert set(c.simulated) <= set(c.features), c.id
        for name, sim in c.simulated.items():
            mask = np.asarray(sim.runs(d))
            assert mask.dtype == bool and mask.shape == (len(d),), (c.id, name)
        if c.levels:
            assert c.plant is not None, c.id
            planted = c.plant(d)
            assert set(c.levels) <= set(planted), (c.id, sorted(planted))


def test_a_simulated_features_runs_are_read_from_the_design_only():
    d = pd.DataFrame({"objective.kind": ["opd", "forward_kl"], "rollout.policy": ["x", "student"]})
    masks = {name: list(sim.runs(d)) for name, sim in TRAJ.items()}
    assert masks["traj/reward_drop_pp"] == [True, False]
    assert masks["traj/early_entropy_ratio"] == [False, True]
    assert not any(any(m) for m in (sim.runs(d.iloc[0:0]) for sim in TRAJ.values()))
