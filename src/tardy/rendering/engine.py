"""``tardy engine``: the data home's warm engine, its state and its log."""

from __future__ import annotations

import typing as t

from rich.console import Console
from rich.table import Table

from tardy.runtime.warm import EngineState

if t.TYPE_CHECKING:
    from tardy.runtime.warm import Status as EngineStatus


def render_engine(status: EngineStatus, console: Console) -> None:
    """``tardy engine``: the data home's engine, its clients and where its log is."""
    record = status.record
    if record is not None and status.state is EngineState.WEDGED and status.probe:
        console.print(
            f"Engine: wedged on {record.url} (pid {record.server_pid}): "
            f"{status.probe.statement} {status.probe.error}. The next command restarts it, "
            "or:",
            soft_wrap=True,
        )
        console.print("tardy engine stop --force", soft_wrap=True)
        console.print(f"Log: {status.log}", soft_wrap=True)
        return
    if record is None or status.state is not EngineState.RUNNING:
        console.print(f"Engine: {status.state.value}. Log: {status.log}", soft_wrap=True)
        return
    idle = "in use" if status.idle_for is None else f"idle {status.idle_for:.0f} s"
    console.print(
        f"Engine: running on {record.url} (pid {record.server_pid}), {idle}; "
        f"stops after {record.idle_seconds:.0f} s idle.",
        soft_wrap=True,
    )
    if status.clients:
        table = Table("pid", "command", box=None)
        for client in status.clients:
            table.add_row(str(client.pid), client.command[:60])
        console.print(table)
    console.print(f"Log: {status.log}", soft_wrap=True)
