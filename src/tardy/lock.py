"""One restatement at a time: a lock the operating system releases when its holder dies.

``$TARDY_HOME/restatements/LOCK`` is held with ``flock(LOCK_EX | LOCK_NB)`` on an open file.
The kernel arbitrates: two processes can never both hold it, and it is released when its
holder exits however it exits (``kill -9`` included), so there is no stale lock to detect,
no pid to probe and no takeover race. (Before: an ``O_EXCL`` file holding a pid; a file
half-written by a crash read as pid -1, which ``os.kill`` calls alive, and two processes
finding the same stale file could both replace it.)

While held, the file records its holder (restatement id, pid, host, since) for messages; a
clean release empties it. A record found by the next taker was left by a holder that died
holding the lock: it is returned as the stale holder (``restatement_id`` "unknown" when the
crash left it half-written), and the caller recovers what the log says was interrupted.

Scope: processes on one host, or hosts sharing a file system whose locks are coherent
(Linux NFSv4 maps ``flock`` to byte-range locks). Several driver hosts sharing only a
metastore need a lock with the same semantics in a shared database (a PostgreSQL session
advisory lock is also released when its holder's connection dies): the cluster issue.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from tardy.errors import Refused


class LockedError(Refused):
    """Another restatement holds the lock."""


@dataclass(frozen=True)
class Holder:
    restatement_id: str
    pid: int
    host: str
    since: str


UNKNOWN = Holder("unknown", -1, "", "")


def lock_path(home: Path) -> Path:
    return home / "restatements" / "LOCK"


def _read(fd: int) -> Holder | None:
    """The holder recorded in the lock file; None when empty, UNKNOWN when half-written."""
    data = os.pread(fd, 4096, 0)
    if not data.strip():
        return None
    try:
        return Holder(**json.loads(data))
    except (ValueError, TypeError):
        return UNKNOWN


def _write(fd: int, holder: Holder | None) -> None:
    os.ftruncate(fd, 0)
    if holder is not None:
        os.pwrite(fd, json.dumps(asdict(holder)).encode(), 0)
    os.fsync(fd)


def _open(home: Path) -> int:
    path = lock_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by children


def holder(home: Path) -> Holder | None:
    """Who holds the lock now, or None when nobody does."""
    if not lock_path(home).exists():
        return None
    fd = _open(home)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd) or UNKNOWN  # held; its record may not be written yet
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextmanager
def exclusive(home: Path, restatement_id: str) -> Iterator[Holder | None]:
    """Hold the lock for ``restatement_id``; yields the holder that died holding it, if any.

    Raises LockedError when a live process holds it.
    """
    fd = _open(home)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            current = _read(fd) or UNKNOWN
            raise LockedError(
                f"restatement {current.restatement_id} is running (pid {current.pid} on "
                f"{current.host or 'this host'}, since {current.since or 'just now'}); "
                "wait for it to finish"
            ) from None
        stale = _read(fd)
        now = datetime.now(UTC).isoformat()
        me = Holder(restatement_id, os.getpid(), socket.gethostname(), now)
        _write(fd, me)
        try:
            yield stale
        finally:
            _write(fd, None)
    finally:
        os.close(fd)  # releases the lock
