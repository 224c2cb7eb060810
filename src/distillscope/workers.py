"""Pool workers that die with their parent process.

``watch_parent`` runs in each spawned pool worker (the study's runs, the report's calibration):
a daemon thread polls ``os.getppid()`` and ends the worker within :data:`PARENT_POLL_S` seconds
after its parent dies, so a killed study or report never leaves a worker running its queue (and
writing run directories, or burning the cores) behind it. A ``ProcessPoolExecutor`` passes it as
``initializer`` with the parent's PID, taken before the spawn::

    ProcessPoolExecutor(n, mp_context=get_context("spawn"), initializer=watch_parent,
                        initargs=(os.getpid(),))
"""

from __future__ import annotations

import os
import threading
import time

PARENT_POLL_S = 0.5


def watch_parent(parent: int | None = None) -> None:
    """In a worker process: exit at once (``os._exit``) when the parent process dies.

    ``parent``: the PID the parent passed at spawn (default: the parent now). Passed, it also
    catches a parent that died while the worker was still starting (its imports take seconds):
    the worker has then been re-parented already and exits before it takes a job.
    """
    parent = os.getppid() if parent is None else parent

    def poll() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=poll, name="distillscope-parent-watch", daemon=True).start()
