"""Experiment trackers beside ``metrics.jsonl`` (``log.trackers``): TensorBoard and W&B.

    log: {trackers: [tensorboard, wandb]}

Each row the loop appends to ``metrics.jsonl`` goes to every tracker too, at its ``step``, with
the same namespaced keys (:mod:`distillscope.metric_keys`; numbers only). Where they write:

- TensorBoard: ``RUN/tensorboard/``, or ``STUDY/tensorboard/<run_id>/`` for a run of a study
  (one log directory per run: ``tensorboard --logdir STUDY/tensorboard`` shows them together).
  A resumed run's writer purges the steps from its checkpoint on (``purge_step``), so a reader
  sees each step once, as the resumed run wrote it.
- W&B: ``RUN/wandb/``, offline unless ``WANDB_MODE`` says otherwise (no network is needed;
  ``wandb sync RUN/wandb/offline-run-*`` uploads later), project ``log.wandb_project``, name the
  run directory's, group the study directory's name for a run of a study. The id is fixed by
  the run directory and its config fingerprint; a resumed run logs from its checkpoint step on
  under that id — offline, into a second ``offline-run-*`` directory, so the steps the killed
  session logged after its last checkpoint are in both directories (the same numbers but for
  ``time/*`` and ``perf/*``); online, W&B drops a step below the resumed run's last logged one.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Protocol

from distillscope.config import TRACKER_MISSING, ConfigError, RunConfig
from distillscope.store import RUNS_DIR, STUDY_SPEC_FILE, read_fingerprint

TENSORBOARD_DIR = "tensorboard"
WANDB_DIR = "wandb"


class _Sink(Protocol):
    def log(self, step: int, scalars: dict[str, float]) -> None: ...

    def close(self) -> None: ...


class Trackers:
    """The run's trackers (none without ``log``): :meth:`log` each metrics row, :meth:`close`
    at the end. ``start`` is the step the run resumes from (0 for a fresh run)."""

    def __init__(self, cfg: RunConfig, run_dir: Path, start: int) -> None:
        names = cfg.log.trackers if cfg.log is not None else []
        self.sinks: list[_Sink] = [_OPEN[name](cfg, run_dir, start) for name in names]

    def log(self, row: dict[str, Any]) -> None:
        """Send ``row``'s numbers (every key but ``step``) to each tracker at ``row["step"]``."""
        if not self.sinks:
            return
        scalars = {k: float(v) for k, v in row.items() if k != "step" and _is_number(v)}
        for sink in self.sinks:
            sink.log(int(row["step"]), scalars)

    def close(self) -> None:
        """Flush and close every tracker (the W&B run is finished)."""
        for sink in self.sinks:
            sink.close()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def study_of(run_dir: Path) -> Path | None:
    """The study directory ``run_dir`` is a run of (``STUDY/runs/<run_id>``), or None."""
    parent = run_dir.resolve().parent
    if parent.name == RUNS_DIR and (parent.parent / STUDY_SPEC_FILE).is_file():
        return parent.parent
    return None


def tensorboard_dir(run_dir: Path) -> Path:
    """``STUDY/tensorboard/<run_id>`` for a run of a study, else ``RUN/tensorboard``."""
    study = study_of(run_dir)
    return run_dir / TENSORBOARD_DIR if study is None else study / TENSORBOARD_DIR / run_dir.name


class _TensorBoard:
    def __init__(self, cfg: RunConfig, run_dir: Path, start: int) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ConfigError(TRACKER_MISSING.format(name="tensorboard")) from None
        # purge_step: a reader drops what an earlier session wrote from `start` on
        self.writer = SummaryWriter(str(tensorboard_dir(run_dir)), purge_step=start)

    def log(self, step: int, scalars: dict[str, float]) -> None:
        for key, value in scalars.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()  # a killed run keeps every step it logged

    def close(self) -> None:
        self.writer.close()


class _WandB:
    def __init__(self, cfg: RunConfig, run_dir: Path, start: int) -> None:
        try:
            import wandb
        except ImportError:
            raise ConfigError(TRACKER_MISSING.format(name="wandb")) from None
        study = study_of(run_dir)
        self.run = wandb.init(
            project=cfg.log.wandb_project,
            dir=str(run_dir),
            name=run_dir.name,
            group=study.name if study is not None else None,
            id=wandb_id(run_dir),
            resume="allow",
            config=cfg.model_dump(mode="json"),
            mode=os.environ.get("WANDB_MODE", "offline"),
            reinit="finish_previous",  # a killed run of this process is closed first
            settings=wandb.Settings(
                silent=True, console="off", disable_git=True, save_code=False, x_disable_stats=True
            ),
        )

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self.run.log(scalars, step=step)

    def close(self) -> None:
        self.run.finish()


def wandb_id(run_dir: Path) -> str:
    """The W&B run id of ``run_dir``: fixed by its path and config fingerprint, so a resumed run
    logs under its own id and a run retrained under another config gets a new one."""
    key = f"{run_dir.resolve()}\0{read_fingerprint(run_dir).get('fingerprint', '')}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


_OPEN = {"tensorboard": _TensorBoard, "wandb": _WandB}
