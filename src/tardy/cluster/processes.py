"""The cluster's processes: started detached with a pid file and a log, recognised by their
command line, waited for until ready, stopped by process group.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tardy.cluster.settings import HOST, ClusterError, Component, Settings, components


@dataclass(frozen=True)
class ComponentState:
    component: Component
    pid: int | None

    @property
    def running(self) -> bool:
        return self.pid is not None and port_open(self.component.port)

    @property
    def state(self) -> str:
        if self.pid is None:
            return "stopped"
        return "running" if port_open(self.component.port) else "starting (port closed)"


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def live_pid(component: Component) -> int | None:
    """The component's pid when its pid file names a live process of that component; a stale
    pid file (no such process, or another program under a recycled pid) counts as none."""
    try:
        pid = int(component.pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if component.marker in cmdline(pid) else None


def state_of(settings: Settings) -> list[ComponentState]:
    return [ComponentState(c, live_pid(c)) for c in components(settings)]


def tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_until(
    component: Component, ready: Callable[[], bool], alive: Callable[[], bool], timeout: float
) -> None:
    """Poll ``ready`` until true; fail fast with the log's tail if the process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if not alive():
            raise ClusterError(
                f"{component.name} exited while starting; log {component.log}:\n"
                + tail(component.log)
            )
        time.sleep(0.5)
    raise ClusterError(
        f"{component.name} not ready after {timeout:.0f} s (port {component.port}); "
        f"log {component.log}:\n" + tail(component.log)
    )


def spawn(component: Component, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` detached (own session: its process group is the component's, executors
    included), output appended to the component's log, and write its pid file."""
    component.log.parent.mkdir(parents=True, exist_ok=True)
    component.pid_file.parent.mkdir(parents=True, exist_ok=True)
    with component.log.open("ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} start\n".encode())
        log.flush()
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    component.pid_file.write_text(f"{process.pid}\n")
    return process


def terminate(pid: int, timeout: float = 20.0) -> None:
    """SIGTERM the process group led by ``pid`` (our spawns lead their own), then SIGKILL."""
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return

    def send(sig: signal.Signals) -> None:
        try:
            if group == pid:
                os.killpg(group, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            pass

    send(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or _is_zombie(pid):
            break
        time.sleep(0.25)
    else:
        send(signal.SIGKILL)
    if group == pid:  # executors and other members left behind
        send(signal.SIGKILL)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
