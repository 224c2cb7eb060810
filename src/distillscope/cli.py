"""The ``distillscope`` command line.

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

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from distillscope import __version__
from distillscope.cli_analyze import analyze_app
from distillscope.cli_output import ProgressLog, print_table
from distillscope.cli_teacher_cache import teacher_cache_app
from distillscope.cli_testbed import testbed_app
from distillscope.store import PROGRESS_FILE

if TYPE_CHECKING:
    from distillscope.study.executors import ExecutorSpec
    from distillscope.study.spec import UntilDecided

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n")[0])
console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # one error, one line


#: Errors a user can act on (bad config, missing or corrupt file, locked directory): exit 2.
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, PermissionError, KeyError)
_debug = False


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err.args[0] if err.args else err).split())
    return text if len(text) <= 500 else text[:499] + "…"


def is_user_error(err: BaseException) -> bool:
    """An error the user can act on: a bad input, a locked directory, or a missing optional
    extra whose message names its install command."""
    from distillscope.study.lock import StudyLockedError

    extra = isinstance(err, ImportError) and "pip install" in str(err)
    return extra or isinstance(err, (*USER_ERRORS, StudyLockedError))


def describe_error(err: BaseException) -> str:
    """An error's one line: a user error's own message, an internal one prefixed by its type."""
    return _one_line(err) if is_user_error(err) else f"{type(err).__name__}: {_one_line(err)}"


def friendly_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Every error becomes one red line: exit 2 for user errors, 1 for internal ones.

    ``distillscope --debug COMMAND`` re-raises instead, with the full traceback.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except KeyboardInterrupt:
            if _debug:
                raise
            err_console.print("[yellow]interrupted[/yellow] (Ctrl-C)", highlight=False)
            raise typer.Exit(130) from None
        except Exception as err:
            if _debug:
                raise
            user = is_user_error(err)
            what = "error" if user else f"internal error ({type(err).__name__})"
            hint = "" if user else " — rerun with --debug for the traceback"
            # escaped: a message may hold brackets (an extra's name, a path) that rich would
            # read as markup and drop
            message = escape(_one_line(err))
            err_console.print(f"[red]{what}:[/red] {message}{hint}", highlight=False)
            raise typer.Exit(2 if user else 1) from None

    return wrapper


def with_threads(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command a ``--threads N`` option: torch's intra-op threads of the command and of
    each study worker (:func:`~distillscope.study.executors.set_threads`); 0 keeps the
    default (all cores; a study's pool: cores / workers each)."""
    import inspect

    option = typer.Option(0, "--threads", min=0, help="torch CPU threads (0: the default)")
    signature = inspect.signature(fn)
    threads = inspect.Parameter("threads", inspect.Parameter.KEYWORD_ONLY, default=option)

    @functools.wraps(fn)
    def wrapper(*args: Any, threads: int = 0, **kwargs: Any) -> Any:
        if threads:
            from distillscope.study.executors import set_threads

            set_threads(threads)
        return fn(*args, **kwargs)

    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), threads.replace(annotation=int)]
    )
    wrapper.__annotations__ = {**fn.__annotations__, "threads": int}
    return wrapper


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
    global _debug
    _debug = debug


def _progress():
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,  # elsewhere: ProgressLog's plain lines
    )


def _relaunch_if_asked(launcher: str, num_processes: int, fsdp: bool) -> None:
    """Check --launcher/--fsdp; with --launcher accelerate, run this command again under
    `accelerate launch` (every process without --launcher) and exit with its status."""
    if launcher not in ("none", "accelerate"):
        raise ValueError(f"--launcher must be none or accelerate, got {launcher!r}")
    if fsdp and launcher != "accelerate":
        raise ValueError(
            "--fsdp shards the student over several processes: add --launcher accelerate "
            "(under `accelerate launch`, pass its --use_fsdp instead)"
        )
    if launcher == "accelerate":
        import subprocess

        from distillscope.train.distributed import accelerate_command

        command = accelerate_command(sys.argv[1:], num_processes, fsdp=fsdp)
        raise typer.Exit(subprocess.run(command, check=False).returncode)


@app.command("train")
@friendly_errors
@with_threads
def train_cmd(
    # a str, not a Path: the first override may be a URL, whose "//" a Path would collapse
    config: str = typer.Argument(None, help="run config YAML (default: all defaults)"),
    overrides: list[str] = typer.Argument(None, help="section.field=value overrides"),
    out: Path = typer.Option(Path("distillscope-runs/train"), help="run directory"),
    skip_eval: bool = typer.Option(False, help="train only; run `distillscope eval` later"),
    overwrite: bool = typer.Option(False, help="clear a run directory of another config first"),
    launcher: str = typer.Option(
        "none", help="accelerate: re-launch through `accelerate launch` (docs/scaling.md)"
    ),
    num_processes: int = typer.Option(2, help="--launcher accelerate: processes of the run"),
    fsdp: bool = typer.Option(
        False, help="--launcher accelerate: shard the student's layers with FSDP (docs/scaling.md)"
    ),
    rehearse: bool = typer.Option(
        False, help="instead: 2 steps and a 2-item evaluation on tiny copies of the models"
    ),
    force: bool = typer.Option(
        False, help="evaluate a finished run again (without it, train returns at once)"
    ),
) -> None:
    """Distil the student of CONFIG into a run directory, then evaluate it.

    A finished run of the same config in --out is left as it is (--force evaluates it again;
    --overwrite trains it from scratch); an interrupted one resumes from its last checkpoint.
    """
    from distillscope.config import check_machine, load_run_config
    from distillscope.study.preflight import preflight_runs  # torch-free

    _relaunch_if_asked(launcher, num_processes, fsdp)
    overrides = list(overrides or [])
    if config is not None and "=" in config and not Path(config).exists():
        config, overrides = None, [config, *overrides]  # `train optim.lr=3e-4`: no file
    cfg = load_run_config(config, overrides)
    check_machine(cfg)
    if rehearse:
        from distillscope.cli_study import train_plan

        _rehearse_or_exit(train_plan(cfg))
        return
    if not (force or overwrite) and _finished(out, cfg, skip_eval):
        return
    preflight_runs([cfg])  # a missing model, a bad task file, …: one line, nothing written
    from distillscope.study.run_one import run_one  # torch: only once the config is valid
    from distillscope.train.distributed import Ranks

    with _progress() as bar:
        steps = cfg.rlvr.steps if cfg.rlvr is not None else cfg.optim.steps  # RLVR: GRPO steps
        task = bar.add_task(f"train {cfg.name}: loading the models", total=steps)
        log = ProgressLog.for_steps(f"train {cfg.name}", steps, console, out)

        def on_step(step: int, row: dict) -> None:
            loss = f"loss {row['train/loss']:.4f}"
            bar.update(task, completed=step + 1, description=f"train {cfg.name} {loss}")
            log.update(step + 1, loss)

        def on_eval(message: str) -> None:
            bar.update(task, description=f"evaluate {cfg.name}: {message}")
            log.note(f"evaluate: {message}")

        try:
            metrics = run_one(
                cfg, out, on_step=on_step, overwrite=overwrite, skip_eval=skip_eval, on_eval=on_eval
            )
        except KeyboardInterrupt:
            from distillscope.study.run_one import mark_interrupted

            bar.stop()
            if Ranks.current(cfg).writes:
                err_console.print(f"[yellow]{escape(mark_interrupted(out))}[/yellow]")
            raise typer.Exit(130) from None
    if not Ranks.current(cfg).writes:  # rank 0 of several processes reports
        return
    from distillscope.store import read_status

    if skip_eval and read_status(out)["status"] == "trained":
        console.print(f"trained {out}; evaluate with `distillscope eval {out}`")
        return
    _print_eval(out, metrics)


def _finished(out: Path, cfg: Any, skip_eval: bool) -> bool:
    """Whether ``out`` holds ``cfg``'s run finished already (evaluated; with ``skip_eval``
    trained): then its evaluation is printed with how to redo it, and ``train`` returns."""
    from distillscope.store import holds_finished, read_eval

    config = cfg.model_dump(mode="json")
    if skip_eval and holds_finished(out, config, "trained"):
        console.print(f"{out} holds this run trained already; evaluate it with `distillscope eval`")
        return True
    if not holds_finished(out, config, "done"):
        return False
    console.print(
        f"{out} holds this run finished already (eval.json); nothing to do — `distillscope eval "
        f"{out} eval.…=…` evaluates it with other settings, --force evaluates it again, "
        "--overwrite trains it from scratch",
        highlight=False,
    )
    _print_eval(out, {k: v for k, v in read_eval(out).items() if isinstance(v, int | float)})
    return True


@app.command("eval")
@friendly_errors
@with_threads
def eval_cmd(
    run_dir: Path = typer.Argument(..., help="a run directory written by train"),
    overrides: list[str] = typer.Argument(None, help="eval.field=value overrides"),
) -> None:
    """Evaluate the trained student of RUN_DIR (docs/method.md §8) and write RUN_DIR/eval.json.

    distillscope eval runs/a eval.items=50 eval.forgetting.limit=20   # weights untouched; the
    previous eval.json is kept as eval-<n>.json, the overrides in evals.jsonl
    """
    from distillscope.config import check_machine
    from distillscope.store import checkpoint_dir
    from distillscope.study.reevaluate import evaluation_config, reevaluate  # torch-free

    if not run_dir.is_dir():
        what = "is not a directory" if run_dir.exists() else "does not exist"
        raise FileNotFoundError(f"{run_dir} {what}; give a run directory written by train")
    if not (checkpoint_dir(run_dir) / "model.safetensors").is_file():
        raise FileNotFoundError(f"{run_dir} has no trained checkpoint; run `distillscope train`")
    check_machine(evaluation_config(run_dir, list(overrides or []))[1])
    with console.status("evaluating") as status:
        metrics = reevaluate(
            run_dir,
            list(overrides or []),
            on_eval=lambda message: status.update(f"evaluating: {message}"),
        )
    _print_eval(run_dir, metrics)


# --help is read from the arguments: `study plan --help` is the plan's own help
@app.command("study", context_settings={"ignore_unknown_options": True, "help_option_names": []})
@friendly_errors
@with_threads
def study_cmd(
    args: list[str] = typer.Argument(
        None,
        help="[STUDY.yaml] [section.field=value …] — overrides apply to every run; "
        "`status DIR` shows a study's progress; `plan …` checks a study and prints its runs; "
        "`plan --rehearse …` runs each distinct configuration 2 steps on tiny model copies; "
        "--overwrite replaces another study's spec in --out (its unchanged runs resume); "
        "--until-decided [--max-seeds N] adds seeds where claims lack power (docs/studies.md); "
        "--no-calibrate writes the report without calibrating its scorecard",
    ),
    preset: str = typer.Option(None, help="smoke | quick | paper | paper-llama | paper-qwen"),
    out: Path = typer.Option(None, help="study directory (default distillscope-runs/<time>)"),
    executor: str = typer.Option("pool", help="pool (local processes) | sequential | ray"),
    workers: int = typer.Option(2, help="pool: worker processes (each gets cores/workers threads)"),
    address: str = typer.Option(None, help="ray: cluster address (default: start a local one)"),
    cpus_per_run: float = typer.Option(1.0, help="ray: CPUs requested per run"),
    gpus_per_run: float = typer.Option(0.0, help="ray: GPUs requested per run"),
    report: bool = typer.Option(True, help="write the report when the study ends"),
    only: str = typer.Option(
        None, help="comma-separated experiments (or the RLVR stage) to run; the rest wait"
    ),
) -> None:
    """Run a controlled study (default: the quick preset); the same --out resumes it.

    distillscope study --preset paper-qwen model.teacher=/models/q7b model.student=/models/q1.5b

    distillscope study --preset paper --only main,rlvr --out DIR   # a subset; DIR keeps the rest

    distillscope study plan --preset paper-qwen model.teacher=…    # what it would run; no output

    distillscope study plan --rehearse --preset paper-qwen …  # each distinct run, tiny models
    """
    from distillscope.study.executors import ExecutorSpec
    from distillscope.study.spec import expand, load_spec

    args = list(args or [])
    if "--help" in args or "-h" in args:
        _study_help(plan=args[:1] == ["plan"])
    if args[:1] == ["status"]:
        from distillscope.study.run_study import study_runs

        if len(args) != 2:
            raise ValueError("usage: distillscope study status DIR")
        _print_status(Path(args[1]), study_runs(Path(args[1])))
        return
    from distillscope.study.planner import parse_noise_from
    from distillscope.study.sequential import parse_flags

    plan = args[:1] == ["plan"]
    args, policy = parse_flags(args[1:] if plan else args)  # --until-decided, --max-seeds N
    args, noise_from = parse_noise_from(args)  # plan: the noise of a finished study
    # flags read from the arguments: study takes 10 options already
    rehearse, overwrite = "--rehearse" in args, "--overwrite" in args
    calibrate = "--no-calibrate" not in args  # the report's calibration (`report --help`)
    args = [a for a in args if a not in ("--rehearse", "--overwrite", "--no-calibrate")]
    if rehearse and not plan:
        raise ValueError("--rehearse goes with plan: distillscope study plan --rehearse …")
    unknown = [a for a in args if a.startswith("-") and "=" not in a]
    if unknown:
        raise ValueError(f"no such option: {unknown[0]} (see distillscope study --help)")
    files = [a for a in args if "=" not in a]
    overrides = [a for a in args if "=" in a]
    if len(files) > 1:
        raise ValueError(f"give one study file, got {files[:3]}; overrides look like key=value")
    if files and preset:
        raise ValueError("give a study file or --preset, not both")
    execution = ExecutorSpec(executor, workers, address, cpus_per_run, gpus_per_run)  # checked
    # A bad study file or override: one line in a fraction of a second, before any worker
    # starts importing torch (a pool's shutdown would wait for those imports).
    expand(load_spec(files[0] if files else preset or "quick", overrides))
    if plan:
        execution = ExecutorSpec("sequential")  # nothing runs: start no workers
    # Started first: a pool's workers import torch and transformers while this process plans.
    with execution.started() as running:
        chosen = None if only is None else [n.strip() for n in only.split(",") if n.strip()]
        if plan:
            from distillscope.cli_study import plan_study  # rehearsal: torch, once checked

            if plan_study(files, overrides, preset, chosen, rehearse, describe_error, noise_from):
                raise typer.Exit(2)
            return
        _study(files, overrides, preset, out, running, report, chosen, overwrite, calibrate, policy)


def _study_help(plan: bool) -> None:
    """Print ``study --help`` (or ``study plan --help``: the plan's own) and exit 0."""
    if plan:
        from distillscope.cli_study import PLAN_HELP

        print(PLAN_HELP, end="")
        raise typer.Exit()
    from typer.main import get_command

    command = get_command(app).commands["study"]  # type: ignore[attr-defined]
    with command.make_context("distillscope study", []) as ctx:
        text = command.get_help(ctx)  # typer's rich help prints itself and returns ""
    if text:
        print(text)
    raise typer.Exit()


def _rehearse_or_exit(runs: list) -> None:
    """Rehearse ``runs`` (cli_study) and exit 2 when a configuration failed."""
    from distillscope.cli_study import rehearse_plan

    if rehearse_plan(runs, describe_error):
        raise typer.Exit(2)


def _study(
    files: list[str],
    overrides: list[str],
    preset: str | None,
    out: Path | None,
    executor: ExecutorSpec,
    report: bool,
    only: list[str] | None,
    overwrite: bool = False,
    calibrate: bool = True,
    policy: UntilDecided | None = None,
) -> None:
    from datetime import datetime

    from distillscope.config import check_machine
    from distillscope.study.preflight import preflight_runs
    from distillscope.study.run_study import run_study, select, study_status
    from distillscope.study.sequential import run_until_decided, with_policy
    from distillscope.study.spec import expand, load_spec

    study = with_policy(load_spec(files[0] if files else preset or "quick", overrides), policy)
    if study.until_decided is not None and only:
        raise ValueError("--until-decided runs the whole study: drop --only")
    out = out or Path("distillscope-runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    runs = select(study, expand(study), only)
    for r in runs:  # devices and dtypes this machine has, before any run starts
        check_machine(r.config)
    preflight_runs([r.config for r in runs])  # one line naming a bad input, before any output
    if overwrite:
        from distillscope.cli_study import print_change

        print_change(out, study)
    console.print(f"study [bold]{study.name}[/bold]: {len(runs)} runs into {out} ({executor.kind})")
    with _progress() as bar:
        runs_bar = bar.add_task("runs", total=len(runs))
        step_bar = bar.add_task("steps", total=None, visible=executor.kind == "sequential")
        steps_of = {r.run_id: r.config.optim.steps for r in runs}
        log = ProgressLog(
            f"study {study.name}", len(runs), "run", console, out / PROGRESS_FILE,
            echo=not console.is_terminal,
        )  # fmt: skip

        def on_run_done(run_id: str, status: str) -> None:
            bar.advance(runs_bar)
            log.update(int(bar.tasks[runs_bar].completed), f"({run_id}: {status})")
            if status != "done":
                console.print(f"  {escape(run_id)}: [red]{status}[/red]")

        def on_step(run_id: str, step: int, row: dict) -> None:
            bar.update(
                step_bar, completed=step + 1, total=steps_of[run_id], description=f"  {run_id[:40]}"
            )

        finished = study_status(out) if (out / "study.yaml").is_file() else {}
        ids = {r.run_id for r in runs}
        done = [i for s in ("done", "diverged") for i in finished.get(s, []) if i in ids]
        bar.update(runs_bar, completed=len(done))
        run = functools.partial(
            run_study, out=out, executor=executor, on_run_done=on_run_done, on_step=on_step,
            only=only, overwrite=overwrite,
        )  # fmt: skip
        if study.until_decided is None:
            run(study)
        else:  # look, add seeds where claims lack power, look again (study.sequential)
            from distillscope.results.stats import ALPHA
            from distillscope.scorecard.decide import claim_states

            def on_look(line: str, total: int) -> None:
                console.print(line, highlight=False)
                bar.update(runs_bar, total=total)

            run_until_decided(study, out, run, claim_states, ALPHA, on_look)
    console.print(f"results table: {out / 'results.parquet'}")
    from distillscope.study.baseline import BASELINE

    # the grid's runs only: the untrained-student baselines are not runs of the grid
    by = {s: [r for r in ids if not r.startswith(BASELINE)] for s, ids in study_status(out).items()}
    failed, total = len(by.get("failed", [])), sum(len(v) for v in by.values())
    if failed:
        console.print(f"[red]{failed} of {total} runs failed[/red] (reasons: runs/*/status.json)")
    if total and failed == total:
        raise typer.Exit(1)  # nothing to report on
    if report:
        _write_report(out, calibrate)


@app.command("config")
@friendly_errors
def config_cmd() -> None:
    """List every run-config field: dotted name, type or allowed values, default, description."""
    from distillscope.config import config_fields

    # Plain lines, one per field, so that `distillscope config | grep device` works.
    print("# run config fields: YAML sections, or section.field=value overrides")
    for name, kind, default, description in config_fields():
        print(f"{name} ({kind}; default {default}): {description}")


@app.command("presets")
@friendly_errors
def presets_cmd(
    action: str = typer.Argument(None, help="`show` to print a preset's YAML"),
    name: str = typer.Argument(None, help="with `show`: the preset"),
) -> None:
    """List the shipped study presets; `presets show NAME` prints one to copy and edit."""
    from distillscope.study.spec import list_presets, preset_path

    if action is None:
        title = "study presets (distillscope study --preset NAME [key=value …])"
        print_table(console, title, ("preset", "description"), list(list_presets().items()), wrap=1)
        return
    if action != "show" or name is None:
        raise ValueError("usage: distillscope presets [show NAME]")
    # print, not console.print: the YAML must come out byte for byte (no wrapping, no markup)
    print(preset_path(name).read_text(), end="")


@app.command("report")
@friendly_errors
def report_cmd(
    study_dir: Path = typer.Argument(..., help="a study directory"),
    calibrate: bool = typer.Option(
        True,
        help="first measure each scorecard rule's false-verdict rates and power by "
        "simulating the study's error structure (cached in calibration.json per design)",
    ),
    draws: int = typer.Option(None, min=1, help="synthetic tables per scenario (default 40)"),
) -> None:
    """Write STUDY_DIR/report/ (HTML, Markdown, figures, scorecard) from the results store."""
    _write_report(study_dir, calibrate, draws)


def _write_report(study_dir: Path, calibrate: bool = True, draws: int | None = None) -> None:
    from distillscope.report import write_report

    if not (study_dir / "results.parquet").is_file():
        raise FileNotFoundError(
            f"{study_dir} has no results.parquet; run `distillscope study` first"
        )
    _warn_if_spec_replaced(study_dir)
    if calibrate:
        from distillscope.scorecard.calibration_run import REPORT_DRAWS, ensure_calibration

        log_file = study_dir / PROGRESS_FILE
        log = ProgressLog(
            "report", 1, "table", err_console, log_file if log_file.is_file() else None
        )
        ensure_calibration(study_dir, draws or REPORT_DRAWS, say=log.note)
    paths = write_report(study_dir)
    console.print(f"report: {paths['html']}")


def _warn_if_spec_replaced(study_dir: Path) -> None:
    """Warn when study.yaml no longer plans the runs of results.parquet (the file was replaced)."""
    import pandas as pd

    from distillscope.study.baseline import plan_baselines
    from distillscope.study.spec import expand, load_spec

    if not (study_dir / "study.yaml").is_file():
        return
    spec = load_spec(study_dir / "study.yaml", stored=True)
    table_ids = set(pd.read_parquet(study_dir / "results.parquet", columns=["run_id"])["run_id"])
    runs = expand(spec)
    planned = {r.run_id for r in runs} | {b.run_id for b in plan_baselines(runs)}
    if table_ids != planned:
        err_console.print(
            f"[yellow]warning:[/yellow] {study_dir}/study.yaml (study {spec.name!r}) does not "
            f"plan the {len(table_ids)} runs of results.parquet ({len(table_ids - planned)} "
            "unplanned); it was replaced after the study ran, so names and claims may be wrong",
            highlight=False,
        )


def _print_status(out: Path, runs: list) -> None:
    """Every run of the study with its state and last step, then the count of each state."""
    from collections import Counter

    from distillscope.safeyaml import clip
    from distillscope.study.run_study import INTERRUPTED
    from distillscope.study.sequential import look_lines

    rows = []
    for r in runs:
        step = "eval" if not r.steps else f"{r.step or 0}/{r.steps}"
        reason = "status.json unreadable" if r.corrupt else clip(r.reason, 80)
        rows.append([r.run_id, r.state, step, reason])
    columns = ("run", "state", "step", "reason")
    print_table(console, f"study {out}: {len(runs)} runs", columns, rows, numeric=[2])
    counts = Counter(r.state for r in runs)
    console.print(", ".join(f"{n} {state}" for state, n in sorted(counts.items())), markup=False)
    for line in look_lines(out):  # study --until-decided: the looks made so far
        console.print(line, markup=False)
    if counts[INTERRUPTED]:
        console.print(
            f"{INTERRUPTED}: no study process holds {out}; rerun the study with --out {out} "
            "to resume them from their last checkpoint",
            markup=False,
        )


def _print_eval(run_dir: Path, metrics: dict) -> None:
    if not metrics:
        from distillscope.store import read_status

        st = read_status(run_dir)
        console.print(f"[red]{st['status']}[/red]: {st.get('reason', '')}")
        return
    rows = [[key, f"{value:.4f}"] for key, value in sorted(metrics.items())]
    print_table(console, f"evaluation of {run_dir}", ("metric", "value"), rows, numeric=[1])
    console.print(f"what the student wrote: {run_dir / 'samples.jsonl'}")
    if (run_dir / "student").is_dir():
        console.print(f"the student (from_pretrained): {run_dir / 'student'}")


@app.command("serve-teacher")
@friendly_errors
def serve_teacher_cmd(
    directory: str = typer.Argument(..., help="a local HF model directory, or testbed:teacher"),
    port: int = typer.Option(8000, help="TCP port (0: a free one)"),
    host: str = typer.Option("127.0.0.1", help="address to listen on (another one is exposed)"),
    topk_max: int = typer.Option(20, "--topk-max", help="the largest prompt_logprobs answered"),
    threads: int = typer.Option(0, help="CPU threads of the forward (0: torch's default)"),
    api_key: str = typer.Option(
        "",
        "--api-key",
        envvar="DISTILLSCOPE_TEACHER_API_KEY",
        show_default=False,
        help="admit only requests with Authorization: Bearer KEY (prefer the env var)",
    ),
) -> None:
    """Serve DIRECTORY's prompt log-probs over vLLM's OpenAI API subset (docs/scaling.md)."""
    import torch

    from distillscope.models import check_model_dir, resolve_model_path
    from distillscope.teacher.server import is_loopback, make_server, serve

    root = check_model_dir(resolve_model_path(directory))
    if threads > 0:  # 1 beside a training run on the same CPU cores (docs/scaling.md)
        torch.set_num_threads(threads)
    if not is_loopback(host) and api_key:
        err_console.print(f"[yellow]warning:[/yellow] listening on {host}, beyond this machine")
    server = make_server(root, host, port, topk_max, api_key or None)
    print(f"serving {root} at http://{host}:{server.server_port}/v1 (Ctrl-C stops)", flush=True)
    serve(server)


app.add_typer(testbed_app(friendly_errors), name="testbed")
app.add_typer(analyze_app(friendly_errors), name="analyze")
app.add_typer(teacher_cache_app(friendly_errors), name="teacher-cache")


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    sys.exit(main())
