"""The ``distillscope`` command line.

Each command is defined in its own module of ``cli/`` and registered here:

distillscope train configs/testbed-onpd-forward.yaml optim.lr=3e-4 --out runs/a
distillscope eval runs/a [eval.items=50]  # evaluate (again) a trained run
distillscope train … --threads 4      # torch CPU threads (train, eval, study: per worker)
distillscope study                    # the quick preset on the shipped testbed, then report
distillscope study --preset paper-qwen model.teacher=DIR model.student=DIR
distillscope study status DIR         # progress of a study
distillscope study plan --rehearse …  # each distinct run 2 steps on tiny copies of the models
distillscope presets [show NAME]      # the shipped study presets, or one's YAML to copy
distillscope config                   # every run-config field: type, default, description
distillscope report DIR               # (re)write DIR/report/ from the results store
distillscope testbed info            # sizes and build-time accuracies of the shipped testbed
distillscope testbed eval            # measure the shipped testbed again (HF generate)
distillscope testbed build --out DIR # train a testbed from scratch
distillscope testbed build --like DIR --out OUT  # a tiny random copy of your checkpoint
distillscope analyze gradients|estimators RUN_DIR  # §5 bounds, KL-estimator bias
distillscope serve-teacher DIR --port 8000  # a teacher's top-k log-probs over HTTP
distillscope teacher-cache build CONFIG --out DIR  # teacher outputs once, for many runs
"""

from __future__ import annotations

import typer

from distillscope import __version__
from distillscope.cli import (
    analyze_cmd,
    config_cmd,
    eval_cmd,
    report_cmd,
    serve_teacher_cmd,
    study_cmd,
    teacher_cache_cmd,
    testbed_cmd,
    train_cmd,
)
from distillscope.cli.errors import set_debug
from distillscope.cli.output import console

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n")[0])


def _print_version(value: bool) -> None:
    if value:
        console.print(f"distillscope {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="print the version"
    ),
    debug: bool = typer.Option(False, "--debug", help="show full tracebacks of errors"),
) -> None:
    set_debug(debug)


app.command("train")(train_cmd.train)
app.command("eval")(eval_cmd.evaluate)
# --help is read from the arguments: `study plan --help` is the plan's own help
study_settings = {"ignore_unknown_options": True, "help_option_names": []}
app.command("study", context_settings=study_settings)(study_cmd.study)
app.command("config")(config_cmd.config)
app.command("presets")(config_cmd.presets)
app.command("report")(report_cmd.report)
app.command("serve-teacher")(serve_teacher_cmd.serve_teacher)
app.add_typer(testbed_cmd.testbed_app(), name="testbed")
app.add_typer(analyze_cmd.analyze_app(), name="analyze")
app.add_typer(teacher_cache_cmd.teacher_cache_app(), name="teacher-cache")


def main() -> None:
    """Console-script entry point."""
    app()
