"""Write one fixture study of tests/test_store_versions.py with the distillscope on PYTHONPATH.

Run with the code of the version it stands for (the checkout of the commit that wrote it)::

    git worktree add --detach /tmp/v2 3a1d9e1
    PYTHONPATH=/tmp/v2/src python tests/data/store_versions/write_study.py v2-done
    PYTHONPATH=/tmp/v2/src python tests/data/store_versions/write_study.py v2-killed --kill

It runs ``study.yaml`` (beside this file) into ``OUT`` (beside it too); ``--relative`` runs
``study-relative.yaml`` instead, whose ``task.file`` is relative: it is copied into ``OUT``,
``colors.jsonl`` into ``OUT/tasks/``, and the study runs from the copy with ``OUT`` as its working
directory (before schema version 4 a relative path was read from the working directory, since
from the study file's: both are ``OUT``), e.g.
``PYTHONPATH=/tmp/v3/src python tests/data/store_versions/write_study.py v3-relative --relative``.
``--kill`` ends the
process at once (``os._exit``, as SIGKILL would) in the last step of the study's last run (step 1
of 0–1), which leaves that run ``running`` with its metrics but no checkpoint or evaluation. The
weights of finished runs are deleted (a finished run is never reloaded to resume or report a
study): the checkpoints but their ``meta.json``, and the exported ``student/``; a finished
study's ``.lock`` too (a killed one keeps it, as a killed process leaves it). Only the APIs every
version has are used (``load_spec``, ``run_study(spec, out, on_step=...)``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from distillscope.study.run_study import run_study
from distillscope.study.spec import load_spec

HERE = Path(__file__).parent
KILLED = "main_policy-teacher"  # the study's last run (runs are ordered by their id)


def run(out: Path, kill: bool, study: Path = HERE / "study.yaml") -> None:
    """Run ``study`` into ``out``; when ``kill``, end the process in the last run's last step."""

    def on_step(run_id: str, step: int, row: dict) -> None:
        if kill and run_id.startswith(KILLED) and step == 1:
            os._exit(0)

    run_study(load_spec(study), out, on_step=on_step)


def main(name: str, kill: bool, relative: bool) -> None:
    """Write the study ``HERE / name`` (in a child process, which ``kill`` ends), then delete
    its weights."""
    out = HERE / name
    if out.exists():
        sys.exit(f"{out} exists: delete it first")
    flags = ["--kill"] if kill else []
    if relative:  # the task file inside the study directory, read from it as the cwd
        (out / "tasks").mkdir(parents=True)
        shutil.copy(HERE / "colors.jsonl", out / "tasks" / "colors.jsonl")
        shutil.copy(HERE / "study-relative.yaml", out / "study-relative.yaml")
        flags.append("--relative")
    cmd = [sys.executable, __file__, str(out), "--child", *flags]
    subprocess.run(cmd, check=True, cwd=out if relative else None)
    for weights in out.glob("runs/*/checkpoint/*"):
        if weights.name != "meta.json":
            weights.unlink()
    for export in out.glob("runs/*/student"):  # the final weights, exported
        shutil.rmtree(export)
    if not kill:
        (out / ".lock").unlink(missing_ok=True)


if __name__ == "__main__":
    if "--child" in sys.argv:
        out = Path(sys.argv[1])
        study = out / "study-relative.yaml" if "--relative" in sys.argv else HERE / "study.yaml"
        run(out, "--kill" in sys.argv, study)
    else:
        main(sys.argv[1], "--kill" in sys.argv[2:], "--relative" in sys.argv[2:])
