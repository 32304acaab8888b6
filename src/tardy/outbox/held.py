"""Held events (``tardy.outbox.notifications``): an event whose commit a kill may cut
off (a restatement staged, records rejected) is written to ``outbox/held/<key>.json`` before
the commit, ``flock``-ed by its writer while it lives, and released into the sinks once the
commit is done; a later command that finds one whose writer is gone settles it by what was
committed (``orphans``: the caller releases or drops each)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import typing as t
from dataclasses import dataclass
from pathlib import Path

from tardy.outbox.notifications import (
    HELD,
    OUTBOX,
    Event,
    EventKind,
    Targets,
    _no_targets,
    _write,
    notify,
)


@dataclass
class Held:
    """An event kept before the commit it announces (``hold``): released into the sinks once
    the commit is done, or dropped; a writer killed in between leaves it to ``settle``."""

    path: Path
    event: Event
    awaits: dict[str, t.Any]
    settings: dict[str, t.Any] | None
    _handle: t.IO[str] | None = None

    def release(self, event: Event | None = None, targets: Targets = _no_targets) -> None:
        """The commit is done: keep ``event`` (default: the held one) for the sinks."""
        notify(self.path.parents[2], self.settings, event or self.event, targets=targets)
        self.drop()

    def drop(self) -> None:
        """What it announces did not happen (or is announced otherwise)."""
        self.path.unlink(missing_ok=True)


@contextlib.contextmanager
def hold(
    home: Path,
    settings: t.Mapping[str, t.Any] | None,
    event: Event,
    awaits: dict[str, t.Any],
) -> t.Iterator[Held]:
    """Keep ``event`` held (``outbox/held/<key>.json``, with what its commit is: ``awaits``)
    while the block commits; the file is locked by this process until the block ends, so
    that ``settle`` leaves it alone while its writer lives. The block releases or drops it;
    one that raises (or is killed) leaves it for ``settle``."""
    path = home / OUTBOX / HELD / f"{event.key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"event": event.as_dict(), "about": event.about, "awaits": awaits}
    body["settings"] = dict(settings or {})
    _write(path, body)
    with path.open("r", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        held = Held(path, event, awaits, dict(settings or {}), handle)
        try:
            yield held
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def orphans(home: Path, kind: EventKind) -> list[Held]:
    """The held events of ``kind`` whose writer is gone (killed between hold and release)."""
    out = []
    for path in sorted((home / OUTBOX / HELD).glob("*.json")):
        with path.open("r", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its writer is still at work
            try:
                body = json.loads(handle.read())
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        raw = body["event"]
        if raw["event"] != kind:
            continue
        event = Event(
            EventKind(raw["event"]),
            raw["text"],
            about=body["about"],
            table=raw.get("table"),
            version=raw.get("version"),
            detail=raw.get("detail") or {},
            raised_at=raw["raised_at"],
        )
        out.append(Held(path, event, body["awaits"], body.get("settings")))
    return out
