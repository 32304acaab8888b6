"""Is the data home open in another process? (the embedded default admits one at a time)

On the embedded default, SQLMesh's DuckDB state and the Derby metastore each admit one
process per data home: a second process fails deep inside SQLMesh (DuckDB's "Could not set
lock") or Hive (Derby's XSDB6, after retries and thousands of log lines). Both hold their
files with POSIX locks, which the kernel lists in /proc/locks with the holder's pid: the CLI
looks there first and refuses at once (``HomeBusy``, exit 3), naming the process. Linux only;
elsewhere nothing is found and the command goes on as before.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tardy.errors import HomeBusy
from tardy.runtime import warm

HOME_FILES = {
    "state.duckdb": "SQLMesh state (DuckDB, state.duckdb)",
    "metastore_db/dbex.lck": "Derby metastore (metastore_db)",
}
ORPHAN_GRACE = 15.0  # seconds to let a Spark JVM whose driver died finish exiting


def _proc(pid: int, name: str) -> str:
    try:
        return Path(f"/proc/{pid}/{name}").read_text()
    except OSError:
        return ""


def _parent(pid: int) -> int:
    stat = _proc(pid, "stat")
    return int(stat.rsplit(")", 1)[1].split()[1]) if ")" in stat else 0


def _lock_holders(path: Path) -> set[int]:
    """Pids holding a lock on ``path`` (Linux ``/proc/locks``; empty elsewhere)."""
    try:
        info = path.stat()
        locks = Path("/proc/locks").read_text()
    except OSError:
        return set()
    key = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    pids = set()
    for line in locks.splitlines():
        fields = line.split()  # "1: POSIX  ADVISORY  WRITE 20679 fe:00:10118850 0 EOF"
        if len(fields) >= 6 and fields[1] != "->" and fields[5] == key:
            pids.add(int(fields[4]))
    return {pid for pid in pids if pid > 0}


def _driver(pid: int) -> int | None:
    """The process behind a lock holder: itself, or for a Spark JVM the Python driver that
    started it; None when that driver is gone (a JVM exiting after its driver died, adopted
    by init or a subreaper)."""
    if _proc(pid, "comm").strip() != "java":
        return pid
    parent = _parent(pid)
    try:
        exe = os.readlink(f"/proc/{parent}/exe")
    except OSError:
        return None
    return parent if Path(exe).name.startswith("python") else None


def _mine(pid: int) -> bool:
    """Whether ``pid`` is this process or one it started (its Spark JVM)."""
    for _ in range(64):
        if pid == os.getpid():
            return True
        if pid <= 1:
            return False
        pid = _parent(pid)
    return False


def _command(pid: int) -> str:
    argv = [a for a in _proc(pid, "cmdline").split("\0") if a]
    return " ".join(Path(a).name if "/" in a else a for a in argv)[:100] or "unknown"


def home_busy(root: Path, wait: float = ORPHAN_GRACE) -> HomeBusy | None:
    """A refusal when another process has the data home's embedded state or metastore open;
    waits up to ``wait`` seconds for a Spark JVM that is only exiting (its driver died)."""
    deadline = time.monotonic() + wait
    engine = warm.server_pids(root)  # the warm engine holds the metastore for every command
    while True:
        busy = {
            what: pid
            for name, what in HOME_FILES.items()
            for pid in sorted(_lock_holders(root / name))
            if not _mine(pid) and pid not in engine
        }
        if not busy:
            return None
        drivers = {_driver(pid) for pid in busy.values()}
        if drivers == {None} and time.monotonic() < deadline:
            time.sleep(0.25)
            continue
        holders = sorted({_driver(pid) or pid for pid in busy.values()})
        who = "; ".join(f"pid {pid}: {_command(pid)}" for pid in holders)
        return HomeBusy(
            f"the data home {root} is open in another process ({who}): its embedded "
            f"{' and '.join(busy)} {'admit' if len(busy) > 1 else 'admits'} one process at a "
            "time; wait for that process to finish, then run this command again"
        )
