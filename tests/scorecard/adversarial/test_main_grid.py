"""Adversarial tables for the main-grid claims 1–5, 9, 13, 30 and 31 (issue 33), black box."""

from __future__ import annotations

import pytest

from . import published as P
from .cases import NOT_SUPPORTED, Case, Control, check, edit, generic, params
from .tables import ACC, FORGET, HIGH, SPARSITY, Table, set_nan

ON, OFF, FWD, REV = "student", "teacher", "forward_kl", "reverse_kl"
MAIN_CELL = {"experiment": "main", "rollout.policy": ON, "objective.kind": REV, "optim.lr": HIGH}


def study(edit_main=None, acc: float = 30.0, extra=()):
    """Main grid (published picture, ``edit_main`` applied) + untrained student + ``extra``
    experiments (functions of the table)."""

    def build(t: Table) -> None:
        P.main(t, edit_main)
        P.untrained(t, **{ACC: acc})
        for add in extra:
            add(t)

    return build


def each(cells, **values):
    """An edit setting ``values`` in every cell of ``cells`` ((policy, kind, lr) keys)."""
    return {c: values for c in cells}


GRID = [(p, k, lr) for p in (ON, OFF) for k in (FWD, REV) for lr in ("low", "high")]
FWD_CELLS = [c for c in GRID if c[1] == FWD]
REV_CELLS = [c for c in GRID if c[1] == REV]
ALL_72 = each(GRID, **{ACC: 72.0})


def main_removed(other: str):
    """The main grid moved to experiment ``other``: the claim's evidence is elsewhere only."""
    return study(extra=()), lambda df: df.assign(
        experiment=df["experiment"].where(df["experiment"] != "main", other)
    )


def elsewhere(claim: int, other: str) -> Case:
    build, move = main_removed(other)
    return Case(claim, f"d-main-only-as-{other}", edit(build, move), "not tested")


# Claim 1 --------------------------------------------------------------------------------------
CASES = [
    Case(1, "null-all-equal", study(ALL_72), "supported"),
    Case(
        1,
        "h-onpd-12pp-better",
        study(each([(ON, FWD, "low"), (ON, FWD, "high")], **{ACC: 84})),
        "contradicted",
    ),
    Case(1, "c-students-did-not-learn", study(acc=72.0), "not applicable"),
    elsewhere(1, "no_clip"),
]

# Claim 2 --------------------------------------------------------------------------------------
CASES += [
    Case(2, "b-kl-effect-1.5pp", study(each(REV_CELLS, **{ACC: 70.5})), "contradicted"),
    Case(2, "h-reverse-better", study(each(REV_CELLS, **{ACC: 87.0})), "contradicted"),
    Case(
        2,
        "h-rollout-matters-more",
        study(
            {
                (ON, FWD, "low"): {ACC: 80},
                (ON, FWD, "high"): {ACC: 80},
                (OFF, FWD, "low"): {ACC: 55},
                (OFF, FWD, "high"): {ACC: 55},
                (ON, REV, "low"): {ACC: 72},
                (ON, REV, "high"): {ACC: 72},
                (OFF, REV, "low"): {ACC: 47},
                (OFF, REV, "high"): {ACC: 47},
            }
        ),
        "contradicted",
    ),
    Case(2, "null-all-equal", study(ALL_72), "contradicted"),
    elsewhere(2, "sampled"),
]

# Claim 3 --------------------------------------------------------------------------------------
ROLLOUT_OPPOSITE = {  # OnPD − OffPD forgetting −6 pp under forward KL, +6 pp under reverse KL
    (ON, FWD, "high"): {FORGET: -15.6},
    (OFF, FWD, "high"): {FORGET: -9.6},
    (ON, REV, "high"): {FORGET: -9.6},
    (OFF, REV, "high"): {FORGET: -15.6},
}
CASES += [
    Case(3, "a-rollout-opposite-by-kl", study(ROLLOUT_OPPOSITE), "contradicted"),
    Case(
        3,
        "b-lr-effect-3pp",
        study(each([c for c in GRID if c[2] == "high"], **{FORGET: -4.0})),
        "contradicted",
    ),
    Case(
        3,
        "h-low-lr-change-6pp",
        study(each([c for c in GRID if c[2] == "low"], **{FORGET: -7})),
        "contradicted",
    ),
    Case(3, "null-no-forgetting", study(each(GRID, **{FORGET: -1.0})), "contradicted"),
    elsewhere(3, "lr_sweep"),
]

# Claim 4 --------------------------------------------------------------------------------------
CASES += [
    Case(
        4,
        "b-drop-2.3pp-vs-margin-10",
        study(each([c for c in GRID if c[2] == "low"], **{SPARSITY: 58.3})),
        "contradicted",
    ),
    Case(
        4,
        "a-offpd-less-sparse-in-one-pair",
        study({(OFF, FWD, "high"): {SPARSITY: 51.0}}),
        "contradicted",
    ),
    Case(
        4,
        "g-bf16-missing-fp32-present",
        edit(study(), lambda df: set_nan(df, df["experiment"] == "main", SPARSITY)),
        "not tested",
        says=(("sparsity_bf16", "bf16"),),
    ),
    Case(4, "null-flat-sparsity", study(each(GRID, **{SPARSITY: 87.5})), "contradicted"),
    elsewhere(4, "lr_sweep"),
]

# Claim 5 --------------------------------------------------------------------------------------
SWEEP = [(p, FWD, lr) for p in (ON, OFF) for lr in P.SWEEP_LRS]


def sweep(edit_sweep=None):
    return study(extra=(lambda t: P.lr_sweep(t, edit_sweep),))


CASES += [
    Case(
        5,
        "h-sparsity-rises-with-lr",
        sweep({c: {SPARSITY: 50.0 + 10 * i % 50} for i, c in enumerate(SWEEP)}),
        "contradicted",
    ),
    Case(
        5,
        "h-offpd-forgets-more",
        sweep({c: {FORGET: P.SWEEP_FORGET[c[2]] - 3.0} for c in SWEEP if c[0] == OFF}),
        "contradicted",
    ),
    Case(5, "d-no-sweep-main-grid-only", study(), "not tested"),
    Case(5, "null-flat", sweep(each(SWEEP, **{SPARSITY: 80.0, FORGET: -3.0})), NOT_SUPPORTED),
]

# Claim 9 --------------------------------------------------------------------------------------
CASES += [
    Case(
        9,
        "c-equal-pass10-lower-pass1",
        study(
            {
                **each(FWD_CELLS, **{"eval/pass@1": 48.0}),
                **each(REV_CELLS, **{"eval/pass@10": 80.0}),
            }
        ),
        "contradicted",
    ),
    Case(9, "b-pass10-gain-1pp", study(each(REV_CELLS, **{"eval/pass@10": 79.0})), "contradicted"),
    Case(
        9,
        "h-reverse-more-coverage",
        study(each(REV_CELLS, **{"eval/pass@10": 90.0})),
        "contradicted",
    ),
    elsewhere(9, "no_clip"),
]

# Claim 13 -------------------------------------------------------------------------------------
CASES += [
    Case(
        13,
        "h-clipping-rare",
        study(each(GRID, **{"train/grad_clipped_frac": 30.0})),
        "contradicted",
    ),
    Case(
        13,
        "h-reverse-norms-smaller",
        study(each(REV_CELLS, **{"train/grad_norm_mean": 2.0})),
        "contradicted",
    ),
    elsewhere(13, "style"),
]

# Claim 30 -------------------------------------------------------------------------------------
CASES += [
    Case(
        30,
        "a-offpd-forward-low-lr-12pp-below",
        study({(OFF, FWD, "low"): {ACC: 60.0}}),
        "contradicted",
    ),
    Case(
        30,
        "h-forgets-8pp",
        study(each([(ON, FWD, "low"), (OFF, FWD, "low")], **{FORGET: -8})),
        "contradicted",
    ),
    Case(
        30,
        "b-10pp-below-the-best",
        study(each([(ON, FWD, "low"), (OFF, FWD, "low")], **{ACC: 62.0})),
        "contradicted",
    ),
    elsewhere(30, "no_clip"),
]

# Claim 31 -------------------------------------------------------------------------------------


def varied(rev_sd: float, fwd_sd: float, experiment: str = "main"):
    def build(t: Table) -> None:
        t.grid(experiment, P.paper_cell, noise_of=lambda p, k, lr: rev_sd if k == REV else fwd_sd)
        P.untrained(t)

    return build


CASES += [
    Case(31, "h-forward-varies-more", varied(0.3, 4.0), "contradicted"),
    Case(31, "null-equal-spread", varied(1.0, 1.0), NOT_SUPPORTED),
    Case(31, "d-only-in-no-clip", edit(varied(4.0, 0.3, "no_clip"), lambda df: df), "not tested"),
]

CONTROLS = [
    Control(1, study(), MAIN_CELL, ACC),
    Control(2, study(), MAIN_CELL, ACC),
    Control(3, study(), {**MAIN_CELL, "objective.kind": FWD}, FORGET),
    Control(4, study(), {**MAIN_CELL, "objective.kind": FWD}, SPARSITY),
    Control(
        5, sweep(), {"experiment": "lr_sweep", "rollout.policy": OFF, "optim.lr": HIGH}, FORGET
    ),
    Control(9, study(), MAIN_CELL, "eval/pass@10"),
    Control(13, study(), MAIN_CELL, "train/grad_norm_mean"),
    Control(30, study(), {**MAIN_CELL, "objective.kind": FWD, "optim.lr": P.LOW}, FORGET),
    Control(31, varied(4.0, 0.3), MAIN_CELL, ACC),
]

ALL = [c for control in CONTROLS for c in generic(control)] + CASES


@pytest.mark.parametrize("case", params(ALL))
def test_main_grid_claims(case: Case, tmp_path) -> None:
    check(case, tmp_path)


def test_every_main_grid_claim_has_a_control() -> None:
    assert {c.claim for c in CONTROLS} == {1, 2, 3, 4, 5, 9, 13, 30, 31}
