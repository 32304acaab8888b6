"""Run a command and print what it cost: its wall time and the CPU-seconds (user + system) of
its whole process tree, every descendant included.

This process makes itself the child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): a process
that outlives its parent (a warm engine's supervisor, a JVM a test started) is re-parented
here instead of to init, and once the command has ended every such descendant is waited for,
so ``RUSAGE_CHILDREN`` counts it. Exits with the command's exit code. Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
ORPHAN_WAIT = 120.0  # seconds to wait for descendants still running after the command


def _reap(deadline: float) -> list[int]:
    """Wait for every remaining descendant (until ``deadline``); the pids still running."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return []
        if pid == 0:
            if time.monotonic() > deadline:
                return [int(p) for p in os.listdir("/proc") if p.isdigit() and _ours(int(p))]
            time.sleep(0.2)


def _ours(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1]) == os.getpid()
    except (OSError, ValueError, IndexError):
        return False


def main(argv: list[str]) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("measure: PR_SET_CHILD_SUBREAPER refused; orphans are not counted", file=sys.stderr)
    started = time.monotonic()
    code = subprocess.call(argv)
    wall = time.monotonic() - started
    left = _reap(time.monotonic() + ORPHAN_WAIT)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    minutes, seconds = divmod(round(wall), 60)
    print(
        f"CI wall time: {minutes} min {seconds} s ({wall:.0f} s); CPU-seconds of the process "
        f"tree: {cpu:.0f} (user {usage.ru_utime:.0f} + system {usage.ru_stime:.0f})"
    )
    if left:
        print(f"measure: descendants still running after the command, not counted: {left}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
