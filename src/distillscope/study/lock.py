"""One study process per study directory; its pool workers die with it
(``distillscope.workers``).

``StudyLock`` holds an advisory ``fcntl.flock`` on ``STUDY/.lock`` for the life of the study
process and writes its PID, host and start time there. The kernel drops the lock when the
process dies (even by SIGKILL), so a lock file left by a dead process is stale by construction
and is simply taken over; a live holder is named in a one-line :class:`StudyLockedError`.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType

from distillscope.store import LOCK_FILE


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
