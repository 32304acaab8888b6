"""Processes and ports of this machine, as the warm engine sees them (``/proc``, loopback).

A process is recognised by its command line, never by a pid written in a file alone: pids
and ports are recycled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path


def argv_of(pid: int) -> list[str]:
    """The command line of ``pid``; empty when it is gone (or not ours to read)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def port_answers(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def stop_group(pid: int, timeout: float = 20.0) -> None:
    """SIGTERM the process group ``pid`` leads, SIGKILL what is left after ``timeout``, and
    wait until it is gone."""
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    _signal_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
