"""``distillscope train``: distil one run's student into a run directory, then evaluate it.

distillscope train configs/testbed-onpd-forward.yaml optim.lr=3e-4 --out runs/a
distillscope train my-run.yaml --rehearse        # 2 steps on tiny copies of the models
distillscope train … --launcher accelerate --num-processes 2 [--fsdp]   # docs/scaling.md
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from distillscope.cli.errors import friendly_errors
from distillscope.cli.option_groups import grouped, option, with_threads
from distillscope.cli.output import console, err_console, print_eval
from distillscope.cli.progress import ProgressLog, progress_bar


@dataclass(frozen=True)
class Launch:
    """How ``train`` starts its processes (docs/scaling.md)."""

    launcher: str = option(
        "none", help="accelerate: re-launch through `accelerate launch` (docs/scaling.md)"
    )
    num_processes: int = option(2, help="--launcher accelerate: processes of the run")
    fsdp: bool = option(
        False, help="--launcher accelerate: shard the student's layers with FSDP (docs/scaling.md)"
    )

    def relaunch_if_asked(self) -> None:
        """Check the options; with ``--launcher accelerate``, run this command again under
        `accelerate launch` (every process without --launcher) and exit with its status."""
        if self.launcher not in ("none", "accelerate"):
            raise ValueError(f"--launcher must be none or accelerate, got {self.launcher!r}")
        if self.fsdp and self.launcher != "accelerate":
            raise ValueError(
                "--fsdp shards the student over several processes: add --launcher accelerate "
                "(under `accelerate launch`, pass its --use_fsdp instead)"
            )
        if self.launcher == "accelerate":
            import subprocess

            from distillscope.train.distributed import accelerate_command

            command = accelerate_command(sys.argv[1:], self.num_processes, fsdp=self.fsdp)
            raise typer.Exit(subprocess.run(command, check=False).returncode)


@friendly_errors
@with_threads
@grouped(Launch, "launch")
def train(
    # a str, not a Path: the first override may be a URL, whose "//" a Path would collapse
    config: str = typer.Argument(None, help="run config YAML (default: all defaults)"),
    overrides: list[str] = typer.Argument(None, help="section.field=value overrides"),
    out: Path = typer.Option(Path("distillscope-runs/train"), help="run directory"),
    skip_eval: bool = typer.Option(False, help="train only; run `distillscope eval` later"),
    overwrite: bool = typer.Option(False, help="clear a run directory of another config first"),
    rehearse: bool = typer.Option(
        False, help="instead: 2 steps and a 2-item evaluation on tiny copies of the models"
    ),
    force: bool = typer.Option(
        False, help="evaluate a finished run again (without it, train returns at once)"
    ),
    launch: Launch = Launch(),
) -> None:
    """Distil the student of CONFIG into a run directory, then evaluate it.

    A finished run of the same config in --out is left as it is (--force evaluates it again;
    --overwrite trains it from scratch); an interrupted one resumes from its last checkpoint.
    """
    from distillscope.cli.inputs import preflight, run_config
    from distillscope.config import check_machine

    launch.relaunch_if_asked()
    cfg = run_config(config, overrides)
    check_machine(cfg)  # before a rehearsal or a finished run's evaluation is shown
    if rehearse:
        from distillscope.cli.study_plan import rehearse_or_exit, train_plan

        rehearse_or_exit(train_plan(cfg))
        return
    if not (force or overwrite) and _finished(out, cfg, skip_eval):
        return
    preflight([cfg])  # a missing model, a bad task file, …: one line, nothing written
    metrics = _train(cfg, out, overwrite, skip_eval)
    from distillscope.store import read_status
    from distillscope.train.distributed import Ranks

    if not Ranks.current(cfg).writes:  # rank 0 of several processes reports
        return
    if skip_eval and read_status(out)["status"] == "trained":
        console.print(f"trained {out}; evaluate with `distillscope eval {out}`")
        return
    print_eval(out, metrics)


def _train(cfg: Any, out: Path, overwrite: bool, skip_eval: bool) -> dict:
    """Run ``cfg`` into ``out`` with a progress bar (a log off a terminal); its metrics.
    Ctrl-C marks the run interrupted (resumable) and exits 130."""
    from distillscope.study.run_one import run_one  # torch: only once the config is valid
    from distillscope.train.distributed import Ranks

    with progress_bar() as bar:
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
            return run_one(
                cfg, out, on_step=on_step, overwrite=overwrite, skip_eval=skip_eval, on_eval=on_eval
            )
        except KeyboardInterrupt:
            from distillscope.study.run_one import mark_interrupted

            bar.stop()
            if Ranks.current(cfg).writes:
                err_console.print(f"[yellow]{escape(mark_interrupted(out))}[/yellow]")
            raise typer.Exit(130) from None


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
    print_eval(out, {k: v for k, v in read_eval(out).items() if isinstance(v, int | float)})
    return True
