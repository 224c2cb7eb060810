"""Adversarial tables for the RLVR claims 11, 20, 26, 27 and 29 and the two-student claim 28
(issue 33), black box."""

from __future__ import annotations

import pytest

from . import published as P
from .cases import NOT_SUPPORTED, Case, Control, check, edit, generic, params, table_of
from .tables import ACC, HIGH, SMALL_TEACHER, TEACHER, Table, score

ON, OFF, FWD, REV = "student", "teacher", "forward_kl", "reverse_kl"
GRID = [(p, k, lr) for p in (ON, OFF) for k in (FWD, REV) for lr in ("low", "high")]
AFTER, BEFORE = "rlvr/eval_accuracy", "rlvr/eval_accuracy_before"
HARD_AFTER, HARD_BEFORE = "rlvr/harder_accuracy", "rlvr/harder_accuracy_before"


def staged(edit_rlvr=None, experiment="rlvr"):
    """Main grid, its RLVR stage ([P] §5.3's picture, ``edit_rlvr`` applied), untrained."""

    def build(t: Table) -> None:
        P.main(t)
        if experiment is not None:
            P.rlvr(t, edit_rlvr, experiment)
        P.untrained(t)

    return build


def both(on: dict, off: dict) -> dict:
    return {c: on if c[0] == ON else off for c in GRID}


NO_ADVANTAGE = both({BEFORE: 15.0, HARD_BEFORE: 10.0}, {BEFORE: 15.0, HARD_BEFORE: 10.0})
SURVIVES = both(
    {BEFORE: 20.0, AFTER: 40.0, HARD_BEFORE: 15.0, HARD_AFTER: 30.0},
    {BEFORE: 10.0, AFTER: 30.0, HARD_BEFORE: 5.0, HARD_AFTER: 20.0},
)
CASES = [
    Case(11, "c-no-advantage-before-rlvr", staged(NO_ADVANTAGE), "not applicable"),
    Case(11, "h-the-gap-survives", staged(SURVIVES), "contradicted"),
    Case(
        11, "d-rlvr-runs-only-in-another-experiment", staged(experiment="rlvr_probe"), "not tested"
    ),
    Case(20, "h-best-onpd-ahead", staged(both({AFTER: 45.0}, {AFTER: 40.0})), "contradicted"),
    Case(20, "null-all-equal", staged(both({AFTER: 40.0}, {AFTER: 40.0})), NOT_SUPPORTED),
    Case(
        20, "d-rlvr-runs-only-in-another-experiment", staged(experiment="rlvr_probe"), "not tested"
    ),
    Case(
        29,
        "h-best-before-is-best-after",
        staged({(ON, FWD, lr): {AFTER: 45.0} for lr in ("low", "high")}),
        "contradicted",
    ),
    Case(
        29,
        "b-best-after-only-1pp-ahead",
        staged({c: {AFTER: 32.0} for c in GRID if c[0] == OFF}),
        "contradicted",
    ),
    Case(
        29, "d-rlvr-runs-only-in-another-experiment", staged(experiment="rlvr_probe"), "not tested"
    ),
    Case(29, "no-rlvr-stage", staged(experiment=None), "not tested", says=(("rlvr",),)),
]

# 26, 27: OPD against GRPO from the untrained student -------------------------------------------


def grpo_baseline(
    early: float = 35.0,
    final: float = 45.0,
    opd_early: float = 55.0,
    experiment: str = "grpo",
    regulated: float = 56.0,
):
    """The `opd` experiment and a GRPO baseline from the untrained student on the same task:
    in-training accuracy at 25% of the steps (OPD ``opd_early``, GRPO ``early``) and final
    held-out accuracy (regulated OPD ``regulated``, GRPO ``final``)."""

    def build(t: Table) -> None:
        runs = P.opd(t, {**P.OPD, "hard_clip": regulated, "log_compress": regulated})
        for ids in runs.values():
            t.trajectory(ids, lambda k: {"rollout/reward": _ramp(k, opd_early / 100, 0.6)})
        ids = t.cell(
            experiment,
            {AFTER: final, BEFORE: 30.0},
            rollout__policy=ON,
            objective__kind=FWD,
            optim__lr=1e-12,
        )
        for row in t.rows[-len(ids) :]:
            row["parent_run"] = f"untrained_s{row['seed']}"
        t.trajectory(ids, lambda k: {"rlvr/accuracy": _ramp(k, early / 100, final / 100)})
        P.untrained(t)

    return build


def _ramp(k: int, at_quarter: float, end: float) -> float:
    """A learning curve through ``at_quarter`` at step 10 of 40, ``end`` at the last step."""
    start = 0.3
    if k <= 10:
        return start + (at_quarter - start) * k / 10
    return at_quarter + (end - at_quarter) * (k - 10) / 29


def no_grpo(t: Table) -> None:
    """OPD runs and an RLVR stage from the main grid, but no GRPO from the untrained student."""
    P.opd(t)
    P.main(t)
    P.rlvr(t)
    P.untrained(t)


CASES += [
    Case(26, "b-opd-ahead-by-2pp", grpo_baseline(early=53.0), "contradicted"),
    Case(26, "h-grpo-ahead", grpo_baseline(early=65.0), "contradicted"),
    Case(26, "d-no-grpo-baseline", no_grpo, "not tested", says=(("grpo",),)),
    Case(
        26,
        "d-grpo-only-in-another-experiment",
        grpo_baseline(experiment="grpo_probe"),
        "not tested",
    ),
    Case(27, "b-regulated-ahead-by-0.5pp", grpo_baseline(final=55.5), "contradicted"),
    Case(27, "h-grpo-ahead", grpo_baseline(final=65.0), "contradicted"),
    Case(27, "d-no-grpo-baseline", no_grpo, "not tested", says=(("grpo",),)),
]

# 28: two students × two teachers --------------------------------------------------------------
STUDENTS = {"testbed:student": 100000.0, "testbed:student-large": 400000.0}


def students(weak_gap: float = -5.0, strong_gap: float = 5.0, experiment="student_scale"):
    """Two students × two teachers: the larger teacher's advantage is ``weak_gap`` for the
    smaller student and ``strong_gap`` for the larger one (pp)."""

    def build(t: Table) -> None:
        for student, size in STUDENTS.items():
            strong = size == max(STUDENTS.values())
            base = 65.0 if strong else 50.0
            gap = strong_gap if strong else weak_gap
            for teacher in (TEACHER, SMALL_TEACHER):
                acc = base + (gap if teacher == TEACHER else 0.0)
                ids = t.cell(
                    experiment,
                    {ACC: acc},
                    rollout__policy=ON,
                    objective__kind="opd",
                    optim__lr=HIGH,
                    model__teacher=teacher,
                    model__student=student,
                )
                for row in t.rows[-len(ids) :]:
                    row["model/student_params"] = size
        P.untrained(t)

    return build


CASES += [
    Case(28, "h-stronger-student-favours-the-smaller-teacher", students(5.0, -5.0), "contradicted"),
    Case(28, "null-no-interaction", students(0.0, 0.0), NOT_SUPPORTED),
    Case(
        28,
        "d-only-one-student",
        edit(
            students(),
            lambda df: df[df["model.student"].isna() | (df["model.student"] == "testbed:student")],
        ),
        "not tested",
    ),
    Case(
        28,
        "d-students-only-in-another-experiment",
        students(experiment="students_probe"),
        "not tested",
    ),
]

RLVR_CELL = {"experiment": "rlvr", "rollout.policy": OFF, "objective.kind": FWD, "optim.lr": HIGH}
CONTROLS = [
    Control(11, staged(), RLVR_CELL, AFTER),
    Control(20, staged(), RLVR_CELL, AFTER),
    Control(26, grpo_baseline(), {"experiment": "grpo"}, None),
    Control(27, grpo_baseline(), {"experiment": "grpo"}, AFTER),
    Control(
        28,
        students(),
        {
            "experiment": "student_scale",
            "model.teacher": TEACHER,
            "model.student": "testbed:student",
        },
        ACC,
    ),
    Control(29, staged(), RLVR_CELL, AFTER),
]
ALL = [c for control in CONTROLS for c in generic(control)] + CASES


@pytest.mark.parametrize("case", params(ALL))
def test_rlvr_and_scale_claims(case: Case, tmp_path) -> None:
    check(case, tmp_path)


def test_claims_26_and_27_are_calibrated_on_their_own_measures(tmp_path) -> None:
    """The report's calibration of a study whose GRPO baseline trails OPD (early 35 vs 55,
    final 45 vs 56): claim 26's feature (read from metrics.jsonl) is simulated, so the claim
    is calibrated rather than "not tested" on every table, and neither claim is "supported" on
    the null tables (their arms at one level there)."""
    import json

    from distillscope.scorecard.calibration_run import ensure_calibration

    t = Table(seed=0)
    build = grpo_baseline()
    df = table_of(build, t)
    root = tmp_path / "study"
    score(df, 26, root, t.steps)  # writes results.parquet and the runs' metrics.jsonl
    cal = json.loads(ensure_calibration(root, draws=8, workers=1).read_text())
    for claim in ("26", "27"):
        assert claim in cal["false_rate"], cal["claims"]
        null = cal["rates"]["null"][claim]
        assert "not tested" not in null and null.get("supported", 0.0) <= 0.125, (claim, null)
        assert "not tested" not in cal["rates"]["planted"][claim]
