"""One restatement at a time: an exclusive lock file in the data home.

``$TARDY_HOME/restatements/LOCK`` is created with ``O_CREAT | O_EXCL`` (atomic on a local or
POSIX shared file system) and holds the restatement id, pid and host of its holder. A lock whose
holder is a dead process on this host is stale: the next ``tardy restate`` (or ``promote``)
takes it over and finishes or discards the interrupted restatement. A lock held by a live
process, or by another host, is a refusal.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path


class LockedError(RuntimeError):
    """Another restatement holds the lock."""


@dataclass(frozen=True)
class Holder:
    restatement_id: str
    pid: int
    host: str
    since: str

    @property
    def alive(self) -> bool:
        if self.host != socket.gethostname():
            return True  # cannot tell: assume it is
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def lock_path(home: Path) -> Path:
    return home / "restatements" / "LOCK"


def holder(home: Path) -> Holder | None:
    try:
        return Holder(**json.loads(lock_path(home).read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError):  # a half-written lock file: its writer died at once
        return Holder("unknown", -1, socket.gethostname(), "")


@contextmanager
def exclusive(home: Path, restatement_id: str) -> Iterator[Holder | None]:
    """Hold the lock for ``restatement_id``; yields the stale holder it took over, if any.

    Raises LockedError when a live process holds it.
    """
    path = lock_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    me = Holder(restatement_id, os.getpid(), socket.gethostname(), datetime.now(UTC).isoformat())
    stale: Holder | None = None
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            current = holder(home)
            if current is None:
                continue
            if current.alive:
                raise LockedError(
                    f"restatement {current.restatement_id} is running (pid {current.pid} on "
                    f"{current.host}, since {current.since}); wait for it to finish"
                ) from None
            stale = current
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as handle:
            json.dump(me.__dict__, handle)
        break
    try:
        yield stale
    finally:
        if holder(home) == me:
            path.unlink(missing_ok=True)
