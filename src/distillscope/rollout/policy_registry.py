"""The rollout policies a config can name: one entry each, the single home of the list.

Adding a policy is one :class:`PolicyKind` entry here plus its class in
:mod:`distillscope.rollout.policies`. Everything else reads this table:

- ``rollout.policy`` is validated against its names (:class:`~distillscope.config.RolloutConfig`,
  whose error and ``distillscope config`` listing name the allowed values);
- a policy-specific field of ``RolloutConfig`` set under a policy that does not read it is
  refused (``options``, plus the ``options_when`` a setting of the policy's own turns on); the
  shared ones (``student_temperature``, ``top_p``, batch sizes, the
  cache switch) never are;
- the training loop builds the policy with ``make`` (:func:`distillscope.train.setup.make_policy`);
- tables and figures call it ``label`` (:data:`distillscope.labels.ROLLOUT_NAMES`).

This module imports no torch (config validation and the report read it): each constructor
imports its policy classes when a run calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distillscope.rollout.policies import RolloutPolicy, StudentPolicy, TeacherPolicy


@dataclass(frozen=True)
class PolicyKind:
    """One rollout policy a run can use, and what it reads from the config."""

    name: str  # the value of rollout.policy
    label: str  # what tables and figures call it
    summary: str  # a few words, shown in the rollout.policy field's description
    #: the policy-specific RolloutConfig fields it reads (refused under other policies when set)
    options: tuple[str, ...]
    #: its constructor from a RolloutConfig (typed Any: config imports this module)
    make: Callable[[Any], RolloutPolicy]
    #: (field, setting, value): ``field`` is read too, but only while ``setting`` == ``value``
    options_when: tuple[tuple[str, str, str], ...] = ()

    def reads(self, cfg: Any) -> frozenset[str]:
        """The policy-specific fields this policy reads under ``cfg`` (a RolloutConfig)."""
        extra = {
            name for name, setting, value in self.options_when if getattr(cfg, setting) == value
        }
        return frozenset(self.options) | extra

    def all_options(self) -> frozenset[str]:
        """Every policy-specific field this policy can read, under some setting of its own."""
        return frozenset(self.options) | {name for name, _, _ in self.options_when}


def _student(cfg: Any) -> StudentPolicy:
    from distillscope.rollout.policies import StudentPolicy

    return StudentPolicy(temperature=cfg.student_temperature, top_p=cfg.top_p)


def _teacher(cfg: Any) -> TeacherPolicy:
    from distillscope.rollout.policies import TeacherPolicy

    return TeacherPolicy(temperature=cfg.teacher_temperature, top_p=cfg.top_p)


def _spectrum(cfg: Any) -> RolloutPolicy:
    from distillscope.rollout.policies import SpectrumPolicy

    # rollout.spectrum_temperatures (docs/method.md §3 "The spectrum's ends", §10):
    # - paper: [P] samples the spectrum with both models at temperature 1.0; the teacher takes
    #   the student's sampling temperature (default 1.0), not teacher_temperature. λ = −1 is
    #   then the teacher at T = 1.0, not the OffPD cell.
    # - policies: each model at its pure policy's temperature, so that λ = −1 draws exactly the
    #   OffPD tokens (teacher at teacher_temperature) and λ = +1 the OnPD ones, seed for seed.
    policies = cfg.spectrum_temperatures == "policies"
    return SpectrumPolicy(
        lam=cfg.lam,
        student_temperature=cfg.student_temperature,
        teacher_temperature=cfg.teacher_temperature if policies else cfg.student_temperature,
        top_p=cfg.top_p,
    )


def _mix(cfg: Any) -> RolloutPolicy:
    from distillscope.rollout.policies import MixturePolicy

    return MixturePolicy(p_student=cfg.p_student, student=_student(cfg), teacher=_teacher(cfg))


def _interleave(cfg: Any) -> RolloutPolicy:
    from distillscope.rollout.policies import InterleavePolicy

    return InterleavePolicy(top_k=cfg.top_k, student=_student(cfg), teacher=_teacher(cfg))


ROLLOUT_POLICIES: dict[str, PolicyKind] = {
    k.name: k
    for k in (
        PolicyKind("student", "OnPD", "OnPD", (), _student),
        PolicyKind("teacher", "OffPD", "OffPD", ("teacher_temperature",), _teacher),
        PolicyKind(
            "spectrum",
            "λ-spectrum",
            "λ-spectrum",
            ("lam", "spectrum_temperatures"),
            _spectrum,
            (("teacher_temperature", "spectrum_temperatures", "policies"),),
        ),
        PolicyKind("mix", "mix", "GKD sequence mix", ("p_student", "teacher_temperature"), _mix),
        PolicyKind(
            "interleave",
            "interleave",
            "token interleaving",
            ("top_k", "teacher_temperature"),
            _interleave,
        ),
    )
}

#: the allowed values of ``rollout.policy``, in the registry's order
POLICY_NAMES: tuple[str, ...] = tuple(ROLLOUT_POLICIES)

#: the values of ``rollout.spectrum_temperatures`` and what each means, as the report words it
SPECTRUM_TEMPERATURES: dict[str, str] = {
    "paper": "paper (both at T = 1.0)",
    "policies": "policies (each at its sampling temperature)",
}
