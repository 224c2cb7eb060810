"""Write one fixture study of tests/test_store_versions.py with the distillscope on PYTHONPATH.

Run with the code of the version it stands for (the checkout of the commit that wrote it)::

    git worktree add --detach /tmp/v2 3a1d9e1
    PYTHONPATH=/tmp/v2/src python tests/data/store_versions/write_study.py v2-done
    PYTHONPATH=/tmp/v2/src python tests/data/store_versions/write_study.py v2-killed --kill

It runs ``study.yaml`` (beside this file) into ``OUT`` (beside it too); ``--kill`` ends the
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


def run(out: Path, kill: bool) -> None:
    """Run the study into ``out``; when ``kill``, end the process in the last run's last step."""

    def on_step(run_id: str, step: int, row: dict) -> None:
        if kill and run_id.startswith(KILLED) and step == 1:
            os._exit(0)

    run_study(load_spec(HERE / "study.yaml"), out, on_step=on_step)


def main(name: str, kill: bool) -> None:
    """Write the study ``HERE / name`` (in a child process, which ``kill`` ends), then delete
    its weights."""
    out = HERE / name
    if out.exists():
        sys.exit(f"{out} exists: delete it first")
    flags = ["--kill"] if kill else []
    subprocess.run([sys.executable, __file__, str(out), "--child", *flags], check=True)
    for weights in out.glob("runs/*/checkpoint/*"):
        if weights.name != "meta.json":
            weights.unlink()
    for export in out.glob("runs/*/student"):  # the final weights, exported
        shutil.rmtree(export)
    if not kill:
        (out / ".lock").unlink(missing_ok=True)


if __name__ == "__main__":
    if "--child" in sys.argv:
        run(Path(sys.argv[1]), "--kill" in sys.argv)
    else:
        main(sys.argv[1], "--kill" in sys.argv[2:])
