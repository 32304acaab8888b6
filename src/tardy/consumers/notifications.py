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
  within the delivery's time budget.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import time
import typing as t
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from tardy.errors import InputError

if t.TYPE_CHECKING:
    from tardy.consumers.notes import Note
    from tardy.consumers.versions import Publication

OUTBOX = "outbox"
FILE_SINK = "notifications.jsonl"
EVENT_FILES = "[0-9]*.json"  # <raised_at>-<key>.json: oldest first by name
LEDGER = "announced"  # the keys of every event kept so far, one a line (``announce``)
SINK_SETTINGS = "sink.json"  # a webhook folder's timeout, attempts and backoff (no URL)
WEBHOOK_URL = "TARDY_WEBHOOK_URL"
WEBHOOK_URL_FILE = "TARDY_WEBHOOK_URL_FILE"


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


class DeliveryError(Exception):
    """A sink did not accept an event (it stays in the outbox)."""


class Sink(t.Protocol):
    name: str

    def send(self, event: dict[str, t.Any], deadline: float) -> None:
        """Deliver ``event`` (``Event.as_dict``) before ``deadline`` (``time.monotonic``), or
        raise ``DeliveryError``."""


@dataclass
class FileSink:
    """JSON lines, each key at most once."""

    path: Path
    name: str = "file"

    def send(self, event: dict[str, t.Any], deadline: float) -> None:
        with self.path.open("a+", encoding="utf-8") as out:
            out.seek(0)
            if any(json.loads(line).get("key") == event["key"] for line in out if line.strip()):
                return  # delivered before a kill kept its outbox file
            out.write(json.dumps(event, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())


@dataclass
class WebhookSink:
    """An HTTP POST of the event as JSON (its ``text`` for chat webhooks)."""

    url: str
    timeout_seconds: float = 5.0
    attempts: int = 3
    backoff_seconds: float = 0.5
    name: str = "webhook"

    def send(self, event: dict[str, t.Any], deadline: float) -> None:
        import requests
        from tenacity import (
            RetryError,
            Retrying,
            retry_if_exception_type,
            stop_after_attempt,
            stop_before_delay,
            wait_exponential,
        )

        def post() -> None:
            timeout = min(self.timeout_seconds, max(0.1, deadline - time.monotonic()))
            try:
                response = requests.post(
                    self.url,
                    json=event,
                    headers={"Idempotency-Key": event["key"]},
                    timeout=timeout,
                )
            except requests.RequestException as error:
                raise DeliveryError(f"{self.name}: {type(error).__name__}") from error
            if not 200 <= response.status_code < 300:
                raise DeliveryError(f"{self.name}: HTTP {response.status_code}")

        retrying = Retrying(
            stop=stop_after_attempt(self.attempts)
            | stop_before_delay(max(0.0, deadline - time.monotonic())),
            wait=wait_exponential(multiplier=self.backoff_seconds),
            retry=retry_if_exception_type(DeliveryError),
            reraise=True,
        )
        try:
            retrying(post)
        except RetryError as error:  # stopped before any attempt raised
            raise DeliveryError(f"{self.name}: no time left") from error


@dataclass
class Delivery:
    """What one ``deliver`` did."""

    delivered: int = 0
    pending: int = 0
    errors: list[str] = field(default_factory=list)
    busy: bool = False  # another process was delivering: left to it


def webhook_url(environ: t.Mapping[str, str] | None = None) -> str | None:
    """The webhook's URL: ``TARDY_WEBHOOK_URL``, else the first line of the file
    ``TARDY_WEBHOOK_URL_FILE`` names, which must be readable by its owner only."""
    environ = os.environ if environ is None else environ
    if url := environ.get(WEBHOOK_URL, "").strip():
        return url
    named = environ.get(WEBHOOK_URL_FILE, "").strip()
    if not named:
        return None
    path = Path(named)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise InputError(
            f"{WEBHOOK_URL_FILE}: {path} is readable by others (mode {mode:o}); "
            f"`chmod 600 {path}`: a webhook URL carries its secret"
        )
    return path.read_text(encoding="utf-8").strip().splitlines()[0]


def sinks(home: Path, settings: t.Mapping[str, t.Any] | None = None) -> list[Sink]:
    """The sinks ``settings`` (``project.yaml``'s ``notifications``) turn on: the file sink
    unless ``file: false``, the webhook when its URL is set."""
    settings = settings or {}
    out: list[Sink] = []
    if settings.get("file", True):
        out.append(FileSink(home / FILE_SINK))
    url = webhook_url()
    if url:
        hook = settings.get("webhook") or {}
        out.append(
            WebhookSink(
                url,
                timeout_seconds=float(hook.get("timeout_seconds", 5.0)),
                attempts=int(hook.get("attempts", 3)),
                backoff_seconds=float(hook.get("backoff_seconds", 0.5)),
            )
        )
    return out


class Outbox:
    """The events raised and not yet delivered, one file per event and sink."""

    def __init__(self, home: Path, to: list[Sink]) -> None:
        self.root = home / OUTBOX
        self.sinks = to

    @classmethod
    def of(cls, home: Path) -> Outbox:
        """The outbox as earlier commands left it, its sinks from its folders: the file sink,
        and the webhook with the settings it was raised under when its URL is set now (else
        its events wait). The URL itself is never written to the data home."""
        root = home / OUTBOX
        found: list[Sink] = []
        if (root / "file").is_dir():
            found.append(FileSink(home / FILE_SINK))
        settings = root / "webhook" / SINK_SETTINGS
        url = webhook_url() if settings.is_file() else None
        if url:
            found.append(WebhookSink(url, **json.loads(settings.read_text(encoding="utf-8"))))
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
                body = json.dumps(event.as_dict(), sort_keys=True)
                final = folder / f"{event.raised_at.replace(':', '')}-{event.key}.json"
                if any(folder.glob(f"*-{event.key}.json")):
                    continue
                temporary = folder / f".{final.name}.tmp"
                temporary.write_text(body, encoding="utf-8")
                with temporary.open("rb") as written:
                    os.fsync(written.fileno())
                temporary.rename(final)

    def pending(self) -> dict[str, list[Path]]:
        """Each sink's pending files, oldest first."""
        return {
            sink.name: sorted((self.root / sink.name).glob(EVENT_FILES))
            for sink in self.sinks
            if (self.root / sink.name).is_dir()
        }

    def deliver(self, budget_seconds: float = 3.0) -> Delivery:
        """Send what is pending, oldest first per sink, within ``budget_seconds``; a sink
        that fails keeps its files, in order, for the next delivery. Never raises for a
        sink: its errors are in the result. Another process delivering: nothing (busy)."""
        done = Delivery()
        self.root.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + budget_seconds
        with _exclusive(self.root / ".lock") as held:
            if not held:
                done.busy = True
                return done
            files = self.pending()
            for sink in self.sinks:
                waiting = files.get(sink.name, [])
                for n, path in enumerate(waiting):
                    if time.monotonic() >= deadline:
                        done.pending += len(waiting) - n
                        break
                    try:
                        sink.send(json.loads(path.read_text(encoding="utf-8")), deadline)
                    except DeliveryError as error:
                        done.errors.append(str(error))
                        done.pending += len(waiting) - n
                        break
                    path.unlink()
                    done.delivered += 1
        return done


@contextlib.contextmanager
def _exclusive(path: Path) -> t.Iterator[bool]:
    """Whether this process got the outbox's delivery lock (released by any death)."""
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


def notify(home: Path, settings: t.Mapping[str, t.Any] | None, *events: Event) -> None:
    """Keep ``events`` in the outbox for the sinks ``settings`` turn on; delivered at the end
    of the command (``deliver_pending``) or by a later one."""
    if events:
        Outbox(home, sinks(home, settings)).put(*events)


def announce(
    home: Path, settings: t.Mapping[str, t.Any] | None, known: list[Event], new: list[Event]
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
    notify(home, settings, *[event for event in events if wanted(event, settings)])
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


def deliver_pending(home: Path, budget_seconds: float = 2.0) -> Delivery | None:
    """Deliver what this or an earlier command left in the outbox (None: it has none)."""
    if not (home / OUTBOX).is_dir():
        return None
    return Outbox.of(home).deliver(budget_seconds)


# -- the events --------------------------------------------------------------------------------


def published(publication: Publication, note: Note | None = None) -> Event:
    """A new published version of a model, with what its release note says (``material``
    None: an event caught up without its note)."""
    days = publication.changed_days
    changed = f"{len(days)} changed day(s), {days[0]}..{days[-1]}" if days else "no changed day"
    material = None if note is None or note.supersedes is None else note.material
    flag = {None: "", True: "; material", False: "; not material"}[material]
    return Event(
        EventKind.PUBLICATION,
        f"{publication.name} published ({changed}; produced by {publication.produced_by}{flag})",
        about=f"{publication.name}:{publication.sha256}",
        table=publication.table_name,
        version=publication.version,
        detail={
            "produced_by": publication.produced_by,
            "changed_days": days,
            "revisions": publication.revisions,
            "rows": publication.rows,
            "sha256": publication.sha256,
            "published_at": publication.published_at,
            "material": material,
            "note": note.files.get("md") if note else None,
        },
    )


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
    the latest arrival) is one event, however often it is checked."""
    return Event(
        EventKind.ALERT,
        message,
        about=f"alert:{sorted(detail.items())}:{data_state}",
        detail=detail,
    )


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
