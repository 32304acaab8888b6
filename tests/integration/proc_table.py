"""The machine's process table as the tests read it (``/proc``)."""

from __future__ import annotations

from pathlib import Path


def command_lines() -> dict[int, str]:
    """Every process's command line (``/proc/<pid>/cmdline``, its arguments joined by
    spaces), by pid; a process that ends while it is read is left out."""
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            found[int(proc.name)] = line
    return found
