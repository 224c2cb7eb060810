"""Both training loops pinned end to end: short runs on the shipped testbed pair against numbers
written at ee21ac4, the commit before the loops were reorganised (``fixtures/golden_quick.json``).

Three runs, each exercising a different part of the loop machinery: a mixed-policy distillation
with the sampled forward estimator (the step's uniforms), two micro-batches and two rollouts per
prompt (the informativeness); an OPD run with two updates per rollout batch (the later updates'
fixed advantage, the clip); and the GRPO stage from the first run's exported student. Every
non-timing key of every ``metrics.jsonl`` row is compared, and each run's evaluation.

Tolerances, from the numerics rather than from one machine's output:

- discrete values (``step``, rollout lengths and truncations, the evaluation's counts and
  accuracies) are compared exactly. They depend only on the sampled tokens, and a sampled token
  changes between CPUs only when a uniform falls within rounding (~1e-7) of a boundary of the
  inverse CDF — for the few hundred draws of these runs a chance of about 1e-4. A difference
  there means the loop samples differently, not rounding.
- continuous values (losses, gradient norms, KL estimates, rewards' means of equal tokens) are
  fp32 reductions over at most a few thousand terms, whose summation order may differ between
  CPUs' kernels: a relative error of about √n·ε ≈ 50 × 6e-8 ≈ 3e-6 per reduction, so relative
  1e-5, with an absolute floor of 1e-7 for values that are zero up to rounding (a KL between
  equal distributions, a clipped share of 0).

Regenerate the fixture (only when a change of behaviour is intended, and say so in the commit):

    PYTHONPATH=src python tests/train/test_golden_quick.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from distillscope.config import load_run_config
from distillscope.models.paths import testbed_path as shipped_model
from distillscope.store import read_eval, read_metrics
from distillscope.study.run_one import run_one

FIXTURE = Path(__file__).parent / "fixtures" / "golden_quick.json"
#: relative and absolute tolerance of continuous values (module docstring)
REL, ABS = 1e-5, 1e-7
#: prefixes of the keys whose values depend only on the sampled tokens (compared exactly):
#: lengths, counts, the verifier's rewards and accuracies, the evaluation's splits
DISCRETE = (
    "step",
    "rollout/len",
    "rollout/truncated",
    "rollout/early_eos",
    "rollout/reward",
    "objective/tokens",
    "opd/tokens",
    "opd/informativeness_groups",
    "rlvr/accuracy",
    "rlvr/groups_mixed",
    "rlvr/reward",
    "rlvr/eval",
    "rlvr/harder",
    "eval/accuracy",
    "eval/avg@",
    "eval/pass@",
    "eval/harder",
    "eval/len",
    "eval/truncated",
    "split/",
    "model/",
)
PARENT = "distilled"

_EVAL = [
    "eval.items=6",
    "eval.coverage_items=2",
    "eval.coverage_samples=2",
    "eval.skill_items=0",
    "eval.samples_per_block=0",
]
#: run name → its config overrides (the GRPO run starts from the first run's student)
RUNS = {
    PARENT: [
        "rollout.policy=mix",
        "objective.kind=forward_sampled",
        "rollout.prompts_per_step=3",
        "rollout.rollouts_per_prompt=2",
        "optim.grad_accum=2",
        "optim.steps=3",
        "optim.warmup_steps=1",
        "optim.lr=3e-4",
        "checkpoint_every=2",
        "task.max_new_tokens=16",
        *_EVAL,
    ],
    "opd": [
        "rollout.policy=student",
        "objective.kind=opd",
        "objective.updates_per_batch=2",
        "rollout.prompts_per_step=4",
        "optim.steps=2",
        "optim.warmup_steps=0",
        "optim.lr=1e-3",
        "optim.grad_clip=0.5",
        "checkpoint_every=0",
        "task.max_new_tokens=16",
        *_EVAL,
    ],
    "rlvr": [
        f"rlvr.parent={PARENT}",
        "rlvr.task=skill-sub",
        "rlvr.steps=2",
        "rlvr.prompts_per_step=2",
        "rlvr.group_size=4",
        "rlvr.lr=1e-3",
        "task.max_new_tokens=12",
        "checkpoint_every=0",
        "eval.items=6",
    ],
}


def _cfg(name: str):
    models = [
        f"model.teacher={shipped_model('teacher')}",
        f"model.student={shipped_model('student')}",
    ]
    return load_run_config(None, [f"name={name}", *models, *RUNS[name]])


def run_all(runs: Path) -> dict:
    """Every run of :data:`RUNS` under ``runs`` (as a study's ``runs/``): each one's metrics
    rows without timings and its evaluation."""
    out = {}
    for name in RUNS:
        run_one(_cfg(name), runs / name)
        rows = [_numbers(r) for r in read_metrics(runs / name)]
        out[name] = {"rows": rows, "eval": _numbers(read_eval(runs / name))}
    return out


#: Keys recorded since the fixture was written, which it cannot hold: the evaluation protocol
#: (samples per item) a run used, and the student's size.
ADDED_SINCE_FIXTURE = (
    "eval/accuracy_samples",
    "eval/harder_samples",
    "eval/skill_samples",
    "model/student_params",
)


def _numbers(row: dict) -> dict:
    """The row's numbers but wall times and throughput (they vary from run to run)."""
    return {
        k: v
        for k, v in row.items()
        if isinstance(v, int | float)
        and not k.startswith(("time/", "perf/", "eval/time"))
        and k not in ADDED_SINCE_FIXTURE
    }


def _is_discrete(key: str) -> bool:
    return key.startswith(DISCRETE)


def assert_matches(got: dict, want: dict, where: str) -> None:
    """``got`` equals ``want`` key by key: discrete values exactly, others to REL/ABS."""
    assert got.keys() == want.keys(), where
    for key in [k for k in want if _is_discrete(k)]:  # the tokens first: the rest follows them
        assert got[key] == want[key], f"{where} {key}: the sampled tokens differ"
    for key, value in want.items():
        if math.isnan(value):
            assert math.isnan(got[key]), f"{where} {key}"
        else:
            assert got[key] == pytest.approx(value, rel=REL, abs=ABS), f"{where} {key}"


def test_both_loops_reproduce_the_golden_runs(tmp_path):
    want = json.loads(FIXTURE.read_text())
    got = run_all(tmp_path / "runs")
    assert got.keys() == want.keys()
    for name, run in want.items():
        assert len(got[name]["rows"]) == len(run["rows"]), name
        for row, ref in zip(got[name]["rows"], run["rows"], strict=True):
            assert_matches(row, ref, f"{name} step {ref['step']}")
        assert_matches(got[name]["eval"], run["eval"], f"{name} eval")


if __name__ == "__main__":  # regenerate the fixture (module docstring)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        FIXTURE.parent.mkdir(exist_ok=True)
        FIXTURE.write_text(json.dumps(run_all(Path(tmp) / "runs"), indent=1, sort_keys=True))
