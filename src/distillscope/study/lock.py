"""One study process per study directory, and pool workers that die with it.

``StudyLock`` holds an advisory ``fcntl.flock`` on ``STUDY/.lock`` for the life of the study
process and writes its PID, host and start time there. The kernel drops the lock when the
process dies (even by SIGKILL), so a lock file left by a dead process is stale by construction
and is simply taken over; a live holder is named in a one-line :class:`StudyLockedError`.

``watch_parent`` runs in each spawned pool worker: a daemon thread polls ``os.getppid()`` and
ends the worker within :data:`PARENT_POLL_S` seconds after its parent dies, so a killed study
never leaves a worker running its queue (and writing run directories) behind it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType

from distillscope.store import LOCK_FILE

PARENT_POLL_S = 0.5


class StudyLockedError(RuntimeError):
    """Another live process holds the study directory (its PID, host and start are named)."""


class StudyLock:
    """``with StudyLock(out):`` — exclusive use of a study directory by this process."""

    def __init__(self, study_dir: Path) -> None:
        self.path = Path(study_dir) / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> StudyLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StudyLockedError(
                f"{self.path.parent} is in use by PID {holder.get('pid', '?')} on "
                f"{holder.get('host', '?')} since {holder.get('started', '?')}; wait for it "
                "to finish or stop it"
            ) from None
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        self._fd = fd
        return self

    def __exit__(
        self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def is_held(study_dir: Path) -> bool:
    """Whether a live process holds ``study_dir``'s lock: its study (and so its pool workers,
    which die with it) is running. Probed by taking the lock without blocking and releasing it
    at once; no lock file means no study ever ran there."""
    path = Path(study_dir) / LOCK_FILE
    if not path.is_file():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _read_holder(fd: int) -> dict:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode(errors="replace") or "{}")
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


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
