"""The testbed's regime targets: the conditions the papers' findings presuppose, with their bounds
and their measured values (docs/testbed.md, "The papers' regime").

:data:`TARGETS` lists them; :func:`regime_rows` reads each value from a build record
(``testbed.json``): the untrained student's numbers from the build's own evaluation
(``measured.student``), the OPD answer budget (passed in: this package reads no preset) against
the student's measured answer length, and the study-level ones (a reverse-KL collapse at the
high LR, GRPO's gain from the untrained student, bf16 sparsity) from the ``regime`` entry that
``bench/testbed_regime.py`` writes from a study's results. A value not measured is None.
Reading these imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One regime target: ``low`` ≤ value ≤ ``high`` (either side open when None); ``unit``
    formats it (``%``: a fraction shown in percent; ``x``: a ratio; ``n``: a count)."""

    key: str
    label: str
    low: float | None
    high: float | None
    unit: str

    def holds(self, value: float | None) -> bool | None:
        """Whether ``value`` is within bounds; None when not measured."""
        if value is None:
            return None
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def bounds(self) -> str:
        """The bounds as text, e.g. ``3%–25%`` or ``≥ 40%``."""
        low, high = (None if b is None else self.format(b) for b in (self.low, self.high))
        return f"{low}–{high}" if low and high else f"≥ {low}" if low else f"≤ {high}"

    def format(self, value: float) -> str:
        """``value`` in the target's unit."""
        return {"%": f"{value:.1%}", "x": f"{value:.2f}×"}.get(self.unit, f"{value:g}")


TARGETS: tuple[Target, ...] = (
    Target("student_accuracy", "untrained student: tb-countdown3 accuracy, T 0.5", 0.03, 0.25, "%"),
    Target("student_pass@32", "untrained student: pass@32, T 1", 0.40, None, "%"),
    Target("style_share", "untrained student: second style with the flag, T 1", 0.01, 0.30, "%"),
    Target("student_skills", "untrained student: skill-suite mean", 0.90, None, "%"),
    Target("student_harder_pass@10", "untrained student: harder variant pass@10", None, 0.10, "%"),
    Target("teacher_accuracy", "teacher: tb-countdown3 accuracy, T 0.5", 0.60, None, "%"),
    Target("opd_budget", "paper `opd`: answer budget ÷ student's mean answer", 3.0, None, "x"),
    Target("reverse_kl_collapses", "high LR: reverse-KL runs that collapse", 1, None, "n"),
    Target("forward_kl_collapses", "high LR: forward-KL runs that collapse", None, 0, "n"),
    Target("grpo_gain_z", "GRPO from the untrained student: gain ÷ its SE", 2.0, None, "x"),
    Target("bf16_sparsity", "bf16 update sparsity at the high LR ([P] 52–60%)", 0.52, 0.60, "%"),
)

#: The study-level targets, read from ``testbed.json``'s ``regime`` entry.
STUDY_KEYS = ("reverse_kl_collapses", "forward_kl_collapses", "grpo_gain_z", "bf16_sparsity")


def regime_values(info: dict, opd_budget: int | None = None) -> dict[str, float | None]:
    """Each target's value from the build record ``info`` (None where not measured);
    ``opd_budget``: the ``opd`` experiment's answer budget in tokens
    (:func:`distillscope.cli.testbed_cmd.opd_answer_budget`), None when not given."""
    s, t = info["measured"]["student"], info["measured"]["teacher"]
    length = s.get("countdown3_len_mean")
    study = info.get("regime", {})
    return {
        "student_accuracy": s["countdown3_accuracy"],
        "student_pass@32": s.get("countdown3_pass@32"),
        "style_share": s.get("alt_style_share_with_flag_t1"),
        "student_skills": s["skill_mean"],
        "student_harder_pass@10": s.get("harder_pass@10"),
        "teacher_accuracy": t["countdown3_accuracy"],
        "opd_budget": opd_budget / length if length and opd_budget else None,
        **{k: study[k]["value"] if k in study else None for k in STUDY_KEYS},
    }


def regime_rows(
    info: dict, opd_budget: int | None = None
) -> list[tuple[Target, float | None, str]]:
    """(target, value, note) for every target (:func:`regime_values`): the note says where a
    study-level value was measured (the ``regime`` entry's ``source``), or why it is absent."""
    values, study = regime_values(info, opd_budget), info.get("regime", {})
    rows = []
    for target in TARGETS:
        note = study.get(target.key, {}).get("source", "")
        if values[target.key] is None and not note:  # e.g. a build before these measures
            note = "not measured on this build"
        rows.append((target, values[target.key], note))
    return rows
