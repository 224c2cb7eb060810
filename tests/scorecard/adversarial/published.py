"""The published picture of every experiment of the `paper` preset, as table builders.

Each function adds one experiment to a :class:`Table` with the numbers the seeds report
(docs/method.md §9), so that every claim reading it holds; ``edit`` replaces values of chosen
cells (keys as the function's cells: ``(policy, kind, lr_label)`` for a grid) to plant an
adversary's table. Values are display units (pp for fractions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .tables import (
    ACC,
    FORGET,
    HIGH,
    LOW,
    SMALL_TEACHER,
    SPARSITY,
    SPARSITY_FP32,
    TEACHER,
    Table,
)

Edit = Mapping[tuple, Mapping[str, float]]
#: The untrained student: its style share at T = 1 is claim 12's regime (the style in its support).
UNTRAINED = {
    ACC: 30.0,
    "eval/pass@1": 25.0,
    "eval/pass@10": 60.0,
    "eval/pass@32": 85.0,
    "eval/style_share_t1": 20.0,
}
#: Main-grid accuracy ([P]: forward KL 71–73% in every cell, reverse KL 35–72%).
MAIN_ACC = {
    ("student", "forward_kl"): {"low": 72.0, "high": 72.0},
    ("teacher", "forward_kl"): {"low": 72.0, "high": 72.0},
    ("student", "reverse_kl"): {"low": 65.0, "high": 55.0},
    ("teacher", "reverse_kl"): {"low": 50.0, "high": 35.0},
}


def paper_cell(policy: str, kind: str, lr: str) -> dict[str, float]:
    """One main-grid cell of the published picture (claims 1–5, 9, 10, 13, 30)."""
    on = policy == "student"
    forward = kind.startswith("forward")
    return {
        ACC: MAIN_ACC[(policy, "forward_kl" if forward else "reverse_kl")][lr],
        "eval/pass@1": 58.0,
        "eval/pass@10": 80.0 if forward else 70.0,
        "eval/harder/pass@1": 15.0 if on else 10.0,
        "eval/harder/pass@10": 45.0 if on else 33.0,
        "eval/harder_accuracy": 15.0 if on else 10.0,
        FORGET: -1.0 if lr == "low" else -12.6,
        SPARSITY: (87.5 if lr == "low" else 56.0) + (0.0 if on else 0.5),
        SPARSITY_FP32: 0.04,
        "train/grad_clipped_frac": 95.0,
        "train/grad_norm_mean": 3.0 if forward else 9.0,
    }


def edited(
    cell: Callable[..., dict[str, float]], edit: Edit | None
) -> Callable[..., dict[str, float]]:
    """``cell`` with ``edit[key]`` replacing values of the cell ``key`` (its arguments)."""

    def values(*key: Any) -> dict[str, float]:
        out = dict(cell(*key))
        out.update((edit or {}).get(tuple(key), {}))
        return out

    return values


def main(t: Table, edit: Edit | None = None, experiment: str = "main", **axes: Any) -> None:
    """The main grid (rollout × KL × LR × 3 seeds), the published picture."""
    t.grid(experiment, edited(paper_cell, edit), **axes)


def untrained(t: Table, **values: float) -> None:
    """The untrained student's baseline rows (accuracy 30%, pass@1 25%, pass@32 85%)."""
    t.baseline({**UNTRAINED, **values})


def finish(t: Table, extra: Iterable[Callable[[Table], None]] = ()) -> None:
    """The untrained student's rows, then the ``extra`` experiments (functions of ``t``)."""
    untrained(t)
    for add in extra:
        add(t)


SWEEP_LRS = {"3e-05": 3e-5, "1e-04": LOW, "3e-04": HIGH, "1e-03": 1e-3, "3e-03": 3e-3}
SWEEP_SPARSITY = dict(zip(SWEEP_LRS, (92.0, 87.5, 75.0, 62.0, 50.0), strict=True))
SWEEP_FORGET = dict(zip(SWEEP_LRS, (-0.5, -1.0, -5.0, -9.0, -13.0), strict=True))


def sweep_cell(policy: str, kind: str, lr: str) -> dict[str, float]:
    """An LR-sweep cell: sparsity falls and forgetting rises with LR, OffPD forgets 3 pp less."""
    return {
        ACC: 70.0,
        SPARSITY: SWEEP_SPARSITY[lr],
        SPARSITY_FP32: 0.04,
        FORGET: SWEEP_FORGET[lr] + (0.0 if policy == "student" else 3.0),
    }


def lr_sweep(t: Table, edit: Edit | None = None) -> None:
    """The LR sweep: OnPD and OffPD forward KL at five LRs (claim 5)."""
    t.grid("lr_sweep", edited(sweep_cell, edit), kinds=("forward_kl",), lrs=SWEEP_LRS)


def spectrum_cell(kind: str, lam: float, lr: str) -> dict[str, float]:
    """A λ-spectrum cell: forward KL 80% flat; reverse KL 35% → 72% from λ = −2 to +2;
    forgetting and sparsity set by the LR only; token likelihoods and their log gap moving with
    λ."""
    forward = kind == "forward_kl"
    return {
        ACC: 80.0 if forward else 35.0 + 9.25 * (lam + 2.0),
        FORGET: -1.0 if lr == "low" else -12.6,
        SPARSITY: 87.5 if lr == "low" else 56.0,
        "rollout/student_token_prob_mean": 0.5 + 0.05 * lam,
        "rollout/teacher_token_prob_mean": 0.8 - 0.05 * lam,
        "rollout/loglik_gap_mean": 0.3 * lam,  # the log-likelihood gap the mix moves
    }


def spectrum(t: Table, edit: Edit | None = None, **kw: Any) -> None:
    """The λ-spectrum at both LRs (claims 6–8, 24); ``edit`` keys ``(kind, λ, lr_label)``."""
    t.spectrum(edited(spectrum_cell, edit), **kw)


def style(t: Table, resist: Mapping[tuple[str, str], float] | None = None) -> None:
    """The style experiment: OnPD + reverse KL 10% teacher-style share, the others 70%."""
    share = {("student", "reverse_kl"): 10.0, **(resist or {})}
    t.grid(
        "style",
        lambda p, k, lr: {"eval/teacher_style_share": share.get((p, k), 70.0), ACC: 70.0},
        lrs={"low": LOW},
        task__teacher_style_flag=True,
    )


REGULATIONS = ("none", "hard_clip", "log_compress")
OPD = {"none": 50.0, "hard_clip": 56.0, "log_compress": 56.0}


def opd(
    t: Table,
    acc: Mapping[str, float] = OPD,
    experiment: str = "opd",
    **values: float,
) -> dict[str, list[str]]:
    """The `opd` experiment: OPD at three regulations; pass@1 40% and pass@32 85% (the
    untrained student's 25% and 85%). Returns the run ids per regulation."""
    out = {}
    for reg in REGULATIONS:
        cell = {ACC: acc[reg], "eval/pass@1": 40.0, "eval/pass@10": 70.0, "eval/pass@32": 85.0}
        out[reg] = t.cell(
            experiment,
            {**cell, **values},
            rollout__policy="student",
            objective__kind="opd",
            objective__regulation=reg,
            optim__lr=HIGH,
        )
    return out


def rising(k: int) -> dict[str, float]:
    """An OPD run that learns and holds: reward up to 0.6, length and advantage flat."""
    return {
        "rollout/reward": min(0.6, 0.3 + 0.03 * k),
        "rollout/len_mean": 20.0,
        "opd/advantage_mean": 0.0,
        "rollout/early_eos_frac": 0.01,
    }


def exploiting(k: int, mode: str = "A") -> dict[str, float]:
    """Length exploitation ([D]): the reward peaks at 0.6 by step 10 and falls to 0.45 while
    the mean advantage rises and the length rises (mode A, filler) or falls (mode B)."""
    late = max(0, k - 20) / 19.0
    row = rising(k)
    row["rollout/reward"] = min(0.6, 0.3 + 0.03 * k) - (0.15 * late if k > 20 else 0.0)
    row["opd/advantage_mean"] = 0.5 * late
    row["rollout/len_mean"] = 20.0 + (20.0 * late if mode == "A" else -12.0 * late)
    if mode == "B":
        row["rollout/early_eos_frac"] = 0.01 + 0.3 * late
    return row


BUDGETS = {"prompts16x1": (16.0, 1.0), "prompts4x4": (4.0, 4.0), "prompts2x8": (2.0, 8.0)}


def diversity(t: Table, acc: Mapping[str, float], experiment: str = "diversity") -> None:
    """Prompt diversity at a fixed budget of 16 rollouts per step (claim 17)."""
    for budget, (p, g) in BUDGETS.items():
        t.cell(
            experiment,
            {ACC: acc[budget]},
            rollout__policy="student",
            objective__kind="opd",
            optim__lr=HIGH,
            rollout__prompts_per_step=p,
            rollout__rollouts_per_prompt=g,
            budget=budget,
        )


#: [D]'s two-teacher picture: the larger teacher is mismatched (lower I, weaker students).
SCALE_ACC = {
    (TEACHER, "none"): 45.0,
    (TEACHER, "hard_clip"): 50.0,
    (SMALL_TEACHER, "none"): 55.0,
    (SMALL_TEACHER, "hard_clip"): 60.0,
}
SCALE_INFO = {TEACHER: 0.10, SMALL_TEACHER: 0.30}


def teacher_scale(
    t: Table,
    acc: Mapping[tuple[str, str], float] = SCALE_ACC,
    info: Mapping[str, float] = SCALE_INFO,
    experiment: str = "teacher_scale",
) -> None:
    """Two teachers × unregulated and hard-clip OPD at 4 prompts × 4 rollouts (18, 22)."""
    for (teacher, reg), a in acc.items():
        t.cell(
            experiment,
            {ACC: a, "eval/informativeness": info[teacher]},
            rollout__policy="student",
            objective__kind="opd",
            objective__regulation=reg,
            optim__lr=HIGH,
            model__teacher=teacher,
            rollout__prompts_per_step=4.0,
            rollout__rollouts_per_prompt=4.0,
        )


def rlvr_cell(policy: str, kind: str, lr: str) -> dict[str, float]:
    """[P] §5.3: OnPD starts RLVR ahead, OffPD ends ahead (from near 10%)."""
    on, fwd = policy == "student", kind == "forward_kl"
    return {
        "rlvr/eval_accuracy_before": (20.0 if on else 10.0) + (2.0 if fwd else 0.0),
        "rlvr/eval_accuracy": (30.0 if on else 40.0) + (1.0 if fwd else 0.0),
        "rlvr/harder_accuracy_before": 15.0 if on else 8.0,
        "rlvr/harder_accuracy": 20.0 if on else 26.0,
    }


def rlvr(t: Table, edit: Edit | None = None, experiment: str = "rlvr") -> None:
    """The RLVR stage: one run per main-grid cell and seed, ``parent_run`` naming it."""
    before = len(t.rows)
    t.grid(experiment, edited(rlvr_cell, edit))
    for row in t.rows[before:]:
        row["parent_run"] = f"main_{row['run_id']}"
