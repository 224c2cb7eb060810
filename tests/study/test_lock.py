"""distillscope.workers.watch_parent: a pool worker ends when its study process is gone, including
a study killed while the worker was still starting."""

from __future__ import annotations

import os
import subprocess
import sys

WORKER = (
    "import os, sys, time\n"
    "from distillscope.workers import watch_parent\n"
    "watch_parent(int(sys.argv[1]))\n"
    "time.sleep(3)\n"
    "print('took a job')\n"
)


def _worker(parent: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WORKER, str(parent)], capture_output=True, text=True, timeout=60
    )


def test_a_worker_whose_parent_died_before_it_started_exits_at_once():
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], text=True, capture_output=True
    ).stdout  # a PID that is not this worker's parent
    done = _worker(int(gone))
    assert done.returncode == 1 and "took a job" not in done.stdout


def test_a_worker_whose_parent_lives_runs_on():
    done = _worker(os.getpid())  # the test process is the worker's parent
    assert done.returncode == 0 and "took a job" in done.stdout
