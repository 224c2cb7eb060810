"""``distillscope eval``: evaluate (again) a trained run, its weights untouched.

distillscope eval runs/a [eval.items=50 eval.forgetting.limit=20]
"""

from __future__ import annotations

from pathlib import Path

import typer

from distillscope.cli.errors import friendly_errors
from distillscope.cli.option_groups import with_threads
from distillscope.cli.output import console, print_eval


@friendly_errors
@with_threads
def evaluate(
    run_dir: Path = typer.Argument(..., help="a run directory written by train"),
    overrides: list[str] = typer.Argument(None, help="eval.field=value overrides"),
) -> None:
    """Evaluate the trained student of RUN_DIR (docs/method.md §8) and write RUN_DIR/eval.json.

    distillscope eval runs/a eval.items=50 eval.forgetting.limit=20   # weights untouched; the
    previous eval.json is kept as eval-<n>.json, the overrides in evals.jsonl
    """
    from distillscope.cli.inputs import preflight
    from distillscope.store import checkpoint_dir
    from distillscope.study.reevaluate import evaluation_config, reevaluate  # torch-free

    if not run_dir.is_dir():
        what = "is not a directory" if run_dir.exists() else "does not exist"
        raise FileNotFoundError(f"{run_dir} {what}; give a run directory written by train")
    if not (checkpoint_dir(run_dir) / "model.safetensors").is_file():
        raise FileNotFoundError(f"{run_dir} has no trained checkpoint; run `distillscope train`")
    # the task files, held-out rows and extras it reads; one line, before the model loads
    preflight([evaluation_config(run_dir, list(overrides or []))[1]], trained=True)
    with console.status("evaluating") as status:
        metrics = reevaluate(
            run_dir,
            list(overrides or []),
            on_eval=lambda message: status.update(f"evaluating: {message}"),
        )
    print_eval(run_dir, metrics)
