"""Notifications: what the people reading the numbers hear, through an outbox in the data home.

An *event* (a publication, a restatement staged and awaiting review, an alert of ``tardy
status --check``) is raised by the command that caused it: ``Outbox.put`` writes it as one
file per sink under ``$TARDY_HOME/outbox/<sink>/`` (written to a temporary name, then renamed:
a kill leaves the whole file or none) before anything tries to deliver it. ``Outbox.deliver``
then sends the pending files of each sink, oldest first, and deletes each one its sink
accepted. A sink that fails keeps its file for the next command's delivery, so an event
raised while a server is down, or by a command killed before it delivered, is delivered
later; nothing is lost, and the command that raised it never fails for it.

Every event has a ``key`` (a digest of what it is about, so that raising the same event twice
yields the same key): the webhook sends it as the ``Idempotency-Key`` header, and the file
sink appends a key at most once, so a delivery repeated after a kill is not a second event.

Sinks (``project.yaml``'s ``notifications`` variable; ``sinks``):

- ``file`` (on by default): JSON lines in ``$TARDY_HOME/notifications.jsonl``, one object per
  event with ``key``, ``event``, ``table``, ``version``, ``text``, ``raised_at`` and ``detail``;
- ``webhook``: on whenever ``TARDY_WEBHOOK_URL`` is set (or ``TARDY_WEBHOOK_URL_FILE`` names a
  file only its owner can read, mode 0600: a URL with a secret never sits in the repo or on a
  command line). An HTTP POST of the event as JSON with a ``text`` field, as chat incoming
  webhooks take it; a timeout per request and retries with exponential backoff (``tenacity``)
  within the delivery's time budget;
- the project's SQLMesh ``notification_targets`` (its config: Slack webhook or API, SMTP,
  console, a custom class): each target is a sink, sent through the target's own ``send``
  (``notifications: {sqlmesh_targets: false}`` turns them off).

Delivery never jams. A sink's *permanent* refusal (an HTTP 4xx but 408 and 429) moves the
event to the dead letters (``outbox/dead/<sink>/``, with the reason), shown by ``tardy
status`` and sent again only by ``tardy notifications retry``. A *transient* failure keeps
the event in place with its attempts and the time of its next attempt, doubling from
``retry_after_seconds`` up to ``retry_max_seconds`` across commands. Per sink, events are
sent oldest first and an event waiting holds back only the later events of its own table;
each sink has its share of the delivery's budget, so one never holds another back.

An event whose commit a kill may cut off (a restatement staged, records rejected) is held
first, then released: ``tardy.outbox.held``. The sinks are ``tardy.outbox.sinks``'.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
import typing as t
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from tardy.errors import InputError
from tardy.outbox.sinks import (  # noqa: F401 - the outbox's sinks, imported from here too
    FILE_SINK,
    TARGET_PREFIX,
    WEBHOOK_URL,
    WEBHOOK_URL_FILE,
    DeliveryError,
    FileSink,
    RefusedForGood,
    Sink,
    Targets,
    TargetSink,
    WebhookSink,
    _no_targets,
    refused_for_good,
    sinks,
    targets_of,
    webhook_url,
)

OUTBOX = "outbox"
EVENT_FILES = "[0-9]*.json"  # <raised_at>-<key>.json: oldest first by name
DEAD = "dead"  # outbox/dead/<sink>/<event file>: what a sink refused for good
HELD = "held"  # outbox/held/<key>.json: an event whose commit a kill may have cut off
STATE = "_delivery"  # kept in a pending or dead file: attempts, next attempt, last error
RETRY_SETTINGS = "retry.json"  # the backoff across commands (``notifications.retry``)
RETRY_AFTER_SECONDS = 60.0
RETRY_MAX_SECONDS = 3600.0
LEDGER = "announced"  # the keys of every event kept so far, one a line (``announce``)
SINK_SETTINGS = "sink.json"  # a webhook folder's timeout, attempts and backoff (no URL)


class EventKind(StrEnum):
    PUBLICATION = "publication"
    RESTATEMENT_STAGED = "restatement_staged"
    ALERT = "alert"
    QUARANTINE_REJECTED = "quarantine_rejected"


@dataclass(frozen=True)
class Event:
    """One notification: ``text`` for people, the rest for tools."""

    event: EventKind
    text: str
    about: str  # what makes it this event (a publication's table and version, ...): its key
    table: str | None = None
    version: int | None = None
    detail: dict[str, t.Any] = field(default_factory=dict)
    raised_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    @property
    def key(self) -> str:
        return hashlib.sha256(f"{self.event}\n{self.about}".encode()).hexdigest()[:32]

    def as_dict(self) -> dict[str, t.Any]:
        out = asdict(self)
        del out["about"]
        return {"key": self.key, **out, "event": str(self.event)}


@dataclass
class Delivery:
    """What one ``deliver`` did."""

    delivered: int = 0
    pending: int = 0
    dead: int = 0  # moved to the dead letters by this delivery
    errors: list[str] = field(default_factory=list)
    busy: bool = False  # another process was delivering: left to it
    retried: int = 0  # dead letters put back by ``retry``

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Retry:
    """The backoff across commands: the n-th failure waits ``after * 2**(n-1)``, at most
    ``most`` seconds (``notifications.retry``: ``after_seconds``, ``max_seconds``)."""

    after: float = RETRY_AFTER_SECONDS
    most: float = RETRY_MAX_SECONDS

    @classmethod
    def of(cls, settings: t.Mapping[str, t.Any] | None) -> Retry:
        raw = (settings or {}).get("retry") or {}
        return cls(
            float(raw.get("after_seconds", RETRY_AFTER_SECONDS)),
            float(raw.get("max_seconds", RETRY_MAX_SECONDS)),
        )

    def wait(self, attempts: int) -> float:
        return min(self.most, self.after * 2 ** max(0, attempts - 1))


@dataclass(frozen=True)
class DeadLetter:
    """An event a sink refused for good."""

    sink: str
    key: str
    event: str
    table: str | None
    text: str
    reason: str
    dead_at: str
    path: Path

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["path"] = str(self.path)
        return out


@dataclass(frozen=True)
class Backlog:
    """What the outbox holds now: pending events per sink, the dead letters, held events."""

    pending: dict[str, int]
    dead: list[DeadLetter]
    held: int

    def as_dict(self) -> dict[str, object]:
        return {
            "pending": self.pending,
            "dead": [letter.as_dict() for letter in self.dead],
            "held": self.held,
        }


class Outbox:
    """The events raised and not yet delivered, one file per event and sink."""

    def __init__(self, home: Path, to: list[Sink], retry: Retry | None = None) -> None:
        self.root = home / OUTBOX
        self.sinks = to
        self.retry = retry or _kept_retry(self.root)

    @classmethod
    def of(cls, home: Path, targets: Targets = _no_targets) -> Outbox:
        """The outbox as earlier commands left it, its sinks from its folders: the file sink,
        the webhook with the settings it was raised under when its URL is set now, and the
        SQLMesh targets of ``targets`` whose folders exist (else their events wait). No URL
        or secret is ever written to the data home."""
        root = home / OUTBOX
        found: list[Sink] = []
        if (root / "file").is_dir():
            found.append(FileSink(home / FILE_SINK))
        settings = root / "webhook" / SINK_SETTINGS
        url = webhook_url() if settings.is_file() else None
        if url:
            found.append(WebhookSink(url, **json.loads(settings.read_text(encoding="utf-8"))))
        if any(_has_events(folder) for folder in root.glob(f"{TARGET_PREFIX}*")):
            found += [s for s in map(TargetSink.of, targets()) if (root / s.name).is_dir()]
        return cls(home, found)

    def put(self, *events: Event) -> None:
        """Keep ``events`` for every sink (each file complete or absent, whatever kills the
        process); an event already pending is kept once."""
        for sink in self.sinks:
            folder = self.root / sink.name
            folder.mkdir(parents=True, exist_ok=True)
            if isinstance(sink, WebhookSink):
                kept = {k: v for k, v in asdict(sink).items() if k not in ("url", "name")}
                (folder / SINK_SETTINGS).write_text(json.dumps(kept), encoding="utf-8")
            for event in events:
                final = folder / f"{event.raised_at.replace(':', '')}-{event.key}.json"
                if any(folder.glob(f"*-{event.key}.json")):
                    continue
                _write(final, event.as_dict())
        retry = self.root / RETRY_SETTINGS
        if self.sinks and not retry.exists():
            retry.write_text(json.dumps(asdict(self.retry)), encoding="utf-8")

    def pending(self) -> dict[str, list[Path]]:
        """Each sink's pending files, oldest first."""
        return {
            sink.name: sorted((self.root / sink.name).glob(EVENT_FILES))
            for sink in self.sinks
            if (self.root / sink.name).is_dir()
        }

    def deliver(self, budget_seconds: float = 3.0, now: datetime | None = None) -> Delivery:
        """Send what is pending and due (``now``: the wall clock), oldest first per sink,
        each sink within its share of ``budget_seconds``: an event refused for good goes to
        the dead letters, one that failed waits for its next attempt and holds back the
        later events of its table only. Never raises for a sink: its errors are in the
        result. Another process delivering: nothing (busy)."""
        done = Delivery()
        self.root.mkdir(parents=True, exist_ok=True)
        now = now or datetime.now(UTC)
        end = time.monotonic() + budget_seconds
        with _exclusive(self.root / ".lock") as held:
            if not held:
                done.busy = True
                return done
            files = self.pending()
            for n, sink in enumerate(self.sinks):
                share = (end - time.monotonic()) / (len(self.sinks) - n)
                self._deliver_to(
                    sink, files.get(sink.name, []), time.monotonic() + share, now, done
                )
        return done

    def _deliver_to(
        self, sink: Sink, waiting: list[Path], deadline: float, now: datetime, done: Delivery
    ) -> None:
        waits: set[str] = set()  # tables with an earlier event still waiting: kept in order
        for path in waiting:
            body = json.loads(path.read_text(encoding="utf-8"))
            state = body.pop(STATE, {})
            table = body.get("table") or path.name
            due = state.get("next_attempt_at")
            if table in waits or (due and due > now.isoformat()) or time.monotonic() >= deadline:
                waits.add(table)
                done.pending += 1
                continue
            try:
                sink.send(body, deadline)
            except RefusedForGood as error:
                self._bury(sink.name, path, body, state, str(error), now)
                done.errors.append(str(error))
                done.dead += 1
                continue
            except DeliveryError as error:
                attempts = int(state.get("attempts", 0)) + 1
                later = now.timestamp() + self.retry.wait(attempts)
                state = {
                    "attempts": attempts,
                    "last_error": str(error),
                    "next_attempt_at": datetime.fromtimestamp(later, UTC).isoformat(),
                }
                _write(path, {**body, STATE: state})
                done.errors.append(str(error))
                waits.add(table)
                done.pending += 1
                continue
            path.unlink()
            done.delivered += 1

    def _bury(
        self,
        sink: str,
        path: Path,
        body: dict[str, t.Any],
        state: dict[str, t.Any],
        reason: str,
        now: datetime,
    ) -> None:
        attempts = int(state.get("attempts", 0)) + 1
        grave = self.root / DEAD / sink / path.name
        grave.parent.mkdir(parents=True, exist_ok=True)
        state = {"attempts": attempts, "reason": reason, "dead_at": now.isoformat()}
        _write(grave, {**body, STATE: state})
        path.unlink()

    def retry_dead(
        self, key: str | None = None, budget_seconds: float = 10.0, now: datetime | None = None
    ) -> Delivery:
        """``tardy notifications retry``: put the dead letters (``key``: those whose key
        starts with it) back in their sinks' queues, make every pending event due now, and
        deliver."""
        moved = 0
        with _exclusive(self.root / ".lock") as held:
            if not held:
                return Delivery(busy=True)
            for grave in sorted((self.root / DEAD).glob(f"*/{EVENT_FILES}")):
                body = json.loads(grave.read_text(encoding="utf-8"))
                if key and not str(body.get("key", "")).startswith(key):
                    continue
                body.pop(STATE, None)
                _write(self.root / grave.parent.name / grave.name, body)
                grave.unlink()
                moved += 1
            for path in sorted(self.root.glob(f"*/{EVENT_FILES}")):
                body = json.loads(path.read_text(encoding="utf-8"))
                if path.parent.name not in (DEAD, HELD) and body.pop(STATE, None) is not None:
                    _write(path, body)
        if key and not moved:
            raise InputError(f"no dead letter has a key starting with {key!r} (tardy status)")
        done = self.deliver(budget_seconds, now)
        done.retried = moved
        return done


def _kept_retry(root: Path) -> Retry:
    kept = root / RETRY_SETTINGS
    if kept.is_file():
        raw = json.loads(kept.read_text(encoding="utf-8"))
        return Retry(float(raw["after"]), float(raw["most"]))
    return Retry()


def _has_events(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob(EVENT_FILES))


def _write(path: Path, body: dict[str, t.Any]) -> None:
    """``body`` as ``path``, whole or not at all (a temporary file renamed over it)."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(body, sort_keys=True), encoding="utf-8")
    with temporary.open("rb") as written:
        os.fsync(written.fileno())
    temporary.rename(path)


def backlog(home: Path) -> Backlog:
    """What the outbox of ``home`` holds (no sink is contacted): for ``tardy status``."""
    root = home / OUTBOX
    pending = {
        folder.name: len(list(folder.glob(EVENT_FILES)))
        for folder in sorted(root.iterdir() if root.is_dir() else [])
        if folder.is_dir() and folder.name not in (DEAD, HELD)
    }
    dead = []
    for grave in sorted(root.glob(f"{DEAD}/*/{EVENT_FILES}")):
        body = json.loads(grave.read_text(encoding="utf-8"))
        state = body.get(STATE, {})
        dead.append(
            DeadLetter(
                sink=grave.parent.name,
                key=body["key"],
                event=body["event"],
                table=body.get("table"),
                text=body["text"],
                reason=state.get("reason", ""),
                dead_at=state.get("dead_at", ""),
                path=grave,
            )
        )
    held = len(list(root.glob(f"{HELD}/*.json")))
    return Backlog({k: v for k, v in pending.items() if v}, dead, held)


@contextlib.contextmanager
def _exclusive(path: Path) -> t.Iterator[bool]:
    """Whether this process got the outbox's delivery lock (released by any death)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def notify(
    home: Path,
    settings: t.Mapping[str, t.Any] | None,
    *events: Event,
    targets: Targets = _no_targets,
) -> None:
    """Keep ``events`` in the outbox for the sinks ``settings`` turn on; delivered at the end
    of the command (``deliver_pending``) or by a later one."""
    if events:
        Outbox(home, sinks(home, settings, targets), Retry.of(settings)).put(*events)


def announce(
    home: Path,
    settings: t.Mapping[str, t.Any] | None,
    known: list[Event],
    new: list[Event],
    targets: Targets = _no_targets,
) -> list[Event]:
    """Keep ``new`` events and any ``known`` one never kept before (returned), by the ledger
    of announced keys (``outbox/announced``): a process killed after it recorded what the
    events are about (a publication appended) and before it kept them leaves them to the next
    call. A data home without a ledger starts one with ``known`` as announced (no backlog).
    The ledger is appended after the events are kept: a kill between the two keeps them
    again, under the same keys (``put`` and the sinks keep a key once)."""
    ledger = home / OUTBOX / LEDGER
    ledger.parent.mkdir(parents=True, exist_ok=True)
    if not ledger.exists():
        _append_lines(ledger, [event.key for event in known])
    announced = set(ledger.read_text(encoding="utf-8").split())
    events = [event for event in [*known, *new] if event.key not in announced]
    events = list({event.key: event for event in events}.values())
    kept = [event for event in events if wanted(event, settings)]
    notify(home, settings, *kept, targets=targets)
    _append_lines(ledger, [event.key for event in events])
    return events


def wanted(event: Event, settings: t.Mapping[str, t.Any] | None) -> bool:
    """Whether the sinks get ``event``: every one, except with ``publications: material`` a
    publication its release note found not material (one whose note is unknown is sent)."""
    material_only = (settings or {}).get("publications", "all") == "material"
    return not (
        material_only
        and event.event == EventKind.PUBLICATION
        and event.detail.get("material") is False
    )


def _append_lines(path: Path, lines: list[str]) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write("".join(f"{line}\n" for line in lines))
        out.flush()
        os.fsync(out.fileno())


def deliver_pending(
    home: Path, budget_seconds: float = 2.0, targets: Targets = _no_targets
) -> Delivery | None:
    """Deliver what this or an earlier command left in the outbox (None: it has none)."""
    if not (home / OUTBOX).is_dir():
        return None
    return Outbox.of(home, targets).deliver(budget_seconds)


# -- the events --------------------------------------------------------------------------------


def staged(restatement_id: str, evaluated: t.Iterable[str], environment: str | None) -> Event:
    """A restatement staged and awaiting review."""
    models = sorted(evaluated)
    return Event(
        EventKind.RESTATEMENT_STAGED,
        f"restatement {restatement_id} is staged and awaiting review ({', '.join(models)}): "
        f"`tardy promote {restatement_id}` or `tardy discard {restatement_id}`",
        about=f"staged:{restatement_id}",
        detail={"restatement_id": restatement_id, "models": models, "environment": environment},
    )


def alerted(message: str, detail: dict[str, t.Any], data_state: str | None) -> Event:
    """An alert of ``tardy status --check``; the same alert on the same data (``data_state``:
    the latest arrival) is one event, however often it is checked. A silence is one event
    per silence (its source and last arrival), though its length grows at every check."""
    if detail.get("metric") == "source_silent":
        about = f"alert:source_silent:{detail.get('source')}:{detail.get('hours')}"
    else:
        about = f"alert:{sorted(detail.items())}:{data_state}"
    return Event(EventKind.ALERT, message, about=about, detail=detail)


def rejected(
    source: str, owner: str | None, record_ids: t.Sequence[str], reason: str, steward: str
) -> Event:
    """Quarantined records a steward rejected: their source system's owner is told first."""
    to = f" (owner {owner})" if owner else ""
    return Event(
        EventKind.QUARANTINE_REJECTED,
        f"source {source}{to}: {len(record_ids)} quarantined record(s) rejected by {steward}: "
        f"{reason}",
        about=f"rejected:{sorted(record_ids)}:{reason}",
        detail={"source": source, "owner": owner, "records": list(record_ids), "reason": reason},
    )
