"""``distillscope teacher-cache``: a teacher's rollouts and top-k scores computed once, read by
many off-policy runs (``model.teacher_cache``; docs/scaling.md "A teacher cache built once").

distillscope teacher-cache build run.yaml objective.teacher_topk=16 --out DIR   # one config
distillscope teacher-cache build study.yaml --out DIR    # a study's teacher-written runs
"""

from __future__ import annotations

from pathlib import Path

import typer

from distillscope.cli.errors import friendly_errors


def teacher_cache_app() -> typer.Typer:
    """The ``teacher-cache`` sub-app, each command wrapped in ``friendly_errors``."""
    app = typer.Typer(no_args_is_help=True, help="A teacher's outputs computed once, reused.")
    app.command("build")(build)
    return app


@friendly_errors
def build(
    source: str = typer.Argument(
        None, help="run config YAML, study YAML or preset name (default: the run defaults)"
    ),
    overrides: list[str] = typer.Argument(None, help="section.field=value overrides"),
    out: Path = typer.Option(..., help="the cache directory to create (must not exist)"),
) -> None:
    """Write the teacher rollouts and top-k (+ tail) log-probs of SOURCE's off-policy runs to
    sharded safetensors files with a manifest; runs read them with model.teacher_cache=OUT."""
    from distillscope.cli.inputs import preflight
    from distillscope.train.cache_build import build_teacher_cache

    configs, name = _configs(source, list(overrides or []))
    preflight([c for c in configs if c.rollout.policy == "teacher"])  # the runs it serves
    manifest = build_teacher_cache(configs, out, name)
    size = sum(s["bytes"] for s in manifest["shards"].values())
    print(
        f"wrote {out}: {len(manifest['shards'])} files, {size / 1e6:.2f} MB; seeds "
        f"{manifest['seeds']}, steps 0…{manifest['steps'] - 1}, k={manifest['k']}, "
        f"{manifest['built_s']:.1f} s",
        flush=True,
    )


def _configs(source: str | None, overrides: list[str]) -> tuple[list, str]:
    """The run configs of ``source`` (a run config, or every run of a study or preset) and the
    name errors give them."""
    from distillscope.cli.inputs import planned_runs, run_config, split_source, study_spec
    from distillscope.safeyaml import load_yaml_file

    source, overrides = split_source(source, overrides)
    if source is None:
        return [run_config(None, overrides)], "the run config"
    path = Path(source)
    if path.is_file() and "experiments" not in (load_yaml_file(path, "config") or {}):
        return [run_config(source, overrides)], str(path)
    study = study_spec([source], None, overrides)
    return [run.config for run in planned_runs(study, None)], f"study {study.name}"
