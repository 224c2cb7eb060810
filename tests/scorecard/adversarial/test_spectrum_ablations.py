"""Adversarial tables for the λ-spectrum claims 6–8 and the ablation claims 10, 12, 14 and 15
(issue 33), black box."""

from __future__ import annotations

import pytest

from . import published as P
from .cases import NOT_SUPPORTED, Case, Control, check, edit, generic, params
from .tables import ACC, FORGET, HIGH, LAMBDAS, LOW, SPARSITY, Table

ON, OFF, FWD, REV = "student", "teacher", "forward_kl", "reverse_kl"
GRID = [(p, k, lr) for p in (ON, OFF) for k in (FWD, REV) for lr in ("low", "high")]
HARDER = "eval/harder/pass@10"


def with_spectrum(edit_spectrum=None, main: bool = True):
    def build(t: Table) -> None:
        if main:
            P.main(t)
        P.spectrum(t, edit_spectrum)
        P.untrained(t)

    return build


def spectrum_cells(kinds=(FWD, REV), lrs=("low", "high")):
    return [(k, lam, lr) for k in kinds for lam in LAMBDAS for lr in lrs]


def over_lambda(kind: str, lrs, metric: str, f) -> dict:
    """An edit: ``metric`` = f(λ) in the ``kind`` spectrum cells at ``lrs``."""
    return {(kind, lam, lr): {metric: f(lam)} for lam in LAMBDAS for lr in lrs}


def renamed(build, old: str, new: str):
    """``build`` with experiment ``old`` renamed ``new`` (the evidence only elsewhere)."""
    return edit(build, lambda df: df.assign(experiment=df["experiment"].replace(old, new)))


BOTH = ("low", "high")
GAP = "rollout/loglik_gap_mean"
FLAT_8 = with_spectrum({c: {GAP: 0.1} for c in spectrum_cells()})
CASES = [
    # 6: judged over λ ∈ [−1, 1] at the low LR (the seed's stated numbers): forward robust,
    # reverse's range above forward's, reverse best at λ > 0; the high LR shown, not judged
    Case(
        6,
        "b-reverse-no-more-sensitive-than-forward",
        with_spectrum(
            {
                **over_lambda(REV, BOTH, ACC, lambda lam: 70.0 + 0.4 * lam),
                **over_lambda(FWD, BOTH, ACC, lambda lam: 80.0 + 0.4 * lam),
            }
        ),
        NOT_SUPPORTED,
    ),
    Case(
        6,
        "a-reverse-flat-at-the-high-lr-is-shown-not-judged",
        with_spectrum(over_lambda(REV, ("high",), ACC, lambda lam: 72.0)),
        "supported",
    ),
    Case(
        6,
        "a-reverse-flat-at-the-low-lr",
        with_spectrum(over_lambda(REV, ("low",), ACC, lambda lam: 80.0)),
        NOT_SUPPORTED,
    ),
    Case(
        6,
        "h-forward-range-25pp",
        with_spectrum(over_lambda(FWD, BOTH, ACC, lambda lam: 60.0 + 6.25 * (lam + 2))),
        "contradicted",
    ),
    Case(
        6,
        "h-reverse-best-at-negative-lambda",
        with_spectrum(over_lambda(REV, BOTH, ACC, lambda lam: 72.0 - 9.25 * (lam + 2))),
        "contradicted",
    ),
    Case(
        6, "null-flat", with_spectrum(over_lambda(REV, BOTH, ACC, lambda lam: 80.0)), NOT_SUPPORTED
    ),
    Case(
        6,
        "d-spectrum-only-as-other",
        renamed(with_spectrum(), "spectrum", "spectrum_t"),
        "not tested",
    ),
    # 7: λ barely moves forgetting or sparsity
    Case(
        7,
        "h-forgetting-range-10pp",
        with_spectrum(over_lambda(FWD, ("high",), FORGET, lambda lam: -12.6 - 2.5 * (lam + 2))),
        "contradicted",
    ),
    Case(
        7,
        "h-sparsity-range-12pp",
        with_spectrum(over_lambda(REV, ("low",), SPARSITY, lambda lam: 87.5 - 3.0 * (lam + 2))),
        "contradicted",
    ),
    Case(
        7,
        "d-spectrum-only-as-other",
        renamed(with_spectrum(), "spectrum", "spectrum_t"),
        "not tested",
    ),
    # 8 (an instrument check): the log-likelihood gap moves with λ; the probabilities are shown
    Case(
        8,
        "h-gap-falls",
        with_spectrum(over_lambda(FWD, BOTH, GAP, lambda lam: -0.3 * lam)),
        "contradicted",
    ),
    Case(
        8,
        "h-student-probability-falls-is-shown-not-judged",
        with_spectrum(
            over_lambda(FWD, BOTH, "rollout/student_token_prob_mean", lambda lam: 0.5 - 0.05 * lam)
        ),
        "supported",
    ),
    Case(
        8,
        "null-flat",
        FLAT_8,
        NOT_SUPPORTED,
    ),
    Case(
        8,
        "d-spectrum-only-as-other",
        renamed(with_spectrum(), "spectrum", "spectrum_t"),
        "not tested",
    ),
]


def main_with(edit_main=None, extra=()):
    def build(t: Table) -> None:
        P.main(t, edit_main)
        P.untrained(t)
        for add in extra:
            add(t)

    return build


def gain(on: float, off: float, cells=GRID) -> dict:
    """Harder-variant pass@10 of the OnPD and OffPD cells among ``cells``."""
    return {c: {HARDER: on if c[0] == ON else off} for c in cells}


CASES += [
    # 10: on-policy helps on the harder variant, both KL directions, reversed at no LR
    Case(
        10,
        "a-plus16-low-minus4-high",
        main_with(
            {
                **gain(50, 34, [c for c in GRID if c[2] == "low"]),
                **gain(30, 34, [c for c in GRID if c[2] == "high"]),
            }
        ),
        "contradicted",
    ),
    Case(
        10,
        "a-forward-only",
        main_with(gain(33, 33, [c for c in GRID if c[1] == REV])),
        "contradicted",
    ),
    Case(10, "b-plus-2.5pp", main_with(gain(35.5, 33)), "contradicted"),
    Case(10, "h-off-policy-better", main_with(gain(30, 40)), "contradicted"),
    Case(10, "d-main-only-as-no_clip", renamed(main_with(), "main", "no_clip"), "not tested"),
]


def styled(resist=None):
    def build(t: Table) -> None:
        P.style(t, resist)
        P.untrained(t)

    return build


CASES += [
    # 12: OnPD + reverse KL resists the teacher's style, the other three adopt it
    Case(12, "a-second-configuration-resists", styled({(OFF, REV): 12.0}), "contradicted"),
    Case(12, "h-onpd-reverse-adopts", styled({(ON, REV): 70.0}), "contradicted"),
    Case(12, "b-gap-10pp-below-margin-20", styled({(ON, REV): 60.0}), "contradicted"),
    Case(12, "d-style-only-as-other", renamed(styled(), "style", "style_t"), "not tested"),
]


def ablation(name: str, edit_abl=None, kinds=(FWD, REV)):
    """Main grid + the ablation ``name`` with the published picture (``edit_abl`` applied)."""

    def build(t: Table) -> None:
        P.main(t)
        cell = P.edited(P.paper_cell, edit_abl)
        axes = {"optim__grad_clip": float("nan")} if name == "no_clip" else {}
        t.grid(
            name, lambda p, k, lr: cell(p, FWD if k == kinds[0] else REV, lr), kinds=kinds, **axes
        )
        P.untrained(t)

    return build


REVERSE_BETTER = {c: {ACC: 90.0} for c in GRID if c[1] == REV}
SAMPLED = ("forward_sampled", "reverse_sampled")
CASES += [
    Case(
        14, "h-reverse-better-without-clipping", ablation("no_clip", REVERSE_BETTER), "contradicted"
    ),
    Case(14, "d-no-ablation", main_with(), "not tested"),
    Case(
        15,
        "h-reverse-better-when-sampled",
        ablation("sampled", REVERSE_BETTER, SAMPLED),
        "contradicted",
    ),
    Case(15, "d-no-ablation", main_with(), "not tested"),
]

SPEC_CELL = {"experiment": "spectrum", "objective.kind": REV, "rollout.lam": 1.0, "optim.lr": HIGH}
MAIN_CELL = {"experiment": "main", "rollout.policy": ON, "objective.kind": REV, "optim.lr": HIGH}
CONTROLS = [
    Control(6, with_spectrum(), {**SPEC_CELL, "optim.lr": LOW}, ACC),  # the judged LR
    Control(7, with_spectrum(), SPEC_CELL, FORGET),
    Control(8, with_spectrum(), SPEC_CELL, GAP, degenerate=FLAT_8),
    Control(10, main_with(), MAIN_CELL, HARDER),
    Control(
        12,
        styled(),
        {"experiment": "style", "rollout.policy": OFF, "objective.kind": FWD},
        "eval/teacher_style_share",
    ),
    Control(14, ablation("no_clip"), {**MAIN_CELL, "experiment": "no_clip"}, ACC),
    Control(
        15,
        ablation("sampled", kinds=SAMPLED),
        {**MAIN_CELL, "experiment": "sampled", "objective.kind": "reverse_sampled"},
        ACC,
    ),
]
ALL = [c for control in CONTROLS for c in generic(control)] + CASES


@pytest.mark.parametrize("case", params(ALL))
def test_spectrum_and_ablation_claims(case: Case, tmp_path) -> None:
    check(case, tmp_path)
