"""What a command reads from its arguments, and the one preflight every command calls.

- :func:`run_config`: a run's config from ``[CONFIG] [key=value …]`` (``train``,
  ``teacher-cache build``);
- :func:`study_spec`: a study from ``[STUDY.yaml | --preset NAME] [key=value …]`` (``study``,
  ``study plan``, ``teacher-cache build``), the quick preset by default;
- :func:`preflight`: every check of a command's runs before anything is written — this
  machine's devices and dtypes (:func:`~distillscope.config.check_machine`), then the inputs
  (:func:`~distillscope.study.preflight.preflight_runs`: models, served teachers, the pair,
  task files, held-out rows, extras, the forgetting suite's data). ``train``, ``eval``,
  ``study``, ``study plan`` and ``teacher-cache build`` all call it, so one bad input gets one
  line from each.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distillscope.config import RunConfig
    from distillscope.study.spec import PlannedRun, StudySpec, UntilDecided

#: The study ``distillscope study`` runs without a file or ``--preset``.
DEFAULT_PRESET = "quick"


def split_source(source: str | None, overrides: list[str]) -> tuple[str | None, list[str]]:
    """``(source, overrides)`` with a first argument that holds ``=`` and names no file taken as
    an override (``train optim.lr=3e-4``: no config file; a str, not a Path, so that a URL's
    ``//`` is kept)."""
    overrides = list(overrides or [])
    if source is not None and "=" in source and not Path(source).exists():
        return None, [source, *overrides]
    return source, overrides


def run_config(source: str | None, overrides: list[str]) -> RunConfig:
    """The run config of ``[CONFIG] [key=value …]`` (no CONFIG: the defaults)."""
    from distillscope.config import load_run_config

    return load_run_config(*split_source(source, overrides))


def study_spec(
    files: list[str],
    preset: str | None,
    overrides: list[str],
    policy: UntilDecided | None = None,
) -> StudySpec:
    """The study of one study file or ``--preset`` (default :data:`DEFAULT_PRESET`) with
    ``overrides`` applied to every run and ``--until-decided``'s ``policy`` (None: the file's)."""
    from distillscope.study.sequential import with_policy
    from distillscope.study.spec import load_spec

    if len(files) > 1:
        raise ValueError(f"give one study file, got {files[:3]}; overrides look like key=value")
    if files and preset:
        raise ValueError("give a study file or --preset, not both")
    return with_policy(
        load_spec(files[0] if files else preset or DEFAULT_PRESET, overrides), policy
    )


def planned_runs(
    study: StudySpec, only: list[str] | None, out: Path | None = None
) -> list[PlannedRun]:
    """The runs of ``study`` (its experiments ``only``, None: all), in plan order, under the
    ids the study directory ``out`` gave them when it holds them (``study.run_study.planned``)."""
    from distillscope.study.run_study import planned, select

    return select(study, planned(study, out), only)


def preflight(configs: list[RunConfig], trained: bool = False) -> None:
    """The one check of every command's runs before any work (module doc): raises the first
    one-line error, else returns; ``trained``: runs to evaluate again (``eval``), whose models
    are not read. Torch-free."""
    from distillscope.config import check_machine
    from distillscope.study.preflight import preflight_runs

    for cfg in configs:  # devices and dtypes this machine has, before any run starts
        check_machine(cfg)
    preflight_runs(configs, trained)
