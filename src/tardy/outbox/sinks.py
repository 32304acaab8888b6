"""The sinks an outbox delivers to (``tardy.outbox.notifications``): the file sink, the
webhook, and the project's SQLMesh ``notification_targets``; each ``send`` delivers one event
(``Event.as_dict``) or raises ``DeliveryError`` (``RefusedForGood`` when trying again cannot
help). Settings: ``project.yaml``'s ``notifications`` (module docstring of the outbox)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import time
import typing as t
from dataclasses import dataclass
from pathlib import Path

from tardy.errors import InputError

FILE_SINK = "notifications.jsonl"
WEBHOOK_URL = "TARDY_WEBHOOK_URL"
WEBHOOK_URL_FILE = "TARDY_WEBHOOK_URL_FILE"
WARNINGS = ("alert", "quarantine_rejected")  # the events a SQLMesh target gets as warnings


class DeliveryError(Exception):
    """A sink did not accept an event now: it stays in the outbox, tried again later."""


class RefusedForGood(DeliveryError):
    """A sink refused an event for good (an HTTP 4xx but 408 and 429): a dead letter."""


def refused_for_good(status_code: int) -> bool:
    """Whether an HTTP answer refuses the event for good (re-sending it cannot help)."""
    return 400 <= status_code < 500 and status_code not in (408, 429)


class Sink(t.Protocol):
    name: str

    def send(self, event: dict[str, t.Any], deadline: float) -> None:
        """Deliver ``event`` (``Event.as_dict``) before ``deadline`` (``time.monotonic``), or
        raise ``DeliveryError`` (``RefusedForGood`` when trying again cannot help)."""


@dataclass
class FileSink:
    """JSON lines, each key at most once."""

    path: Path
    name: str = "file"

    def send(self, event: dict[str, t.Any], deadline: float) -> None:
        try:
            with self.path.open("a+", encoding="utf-8") as out:
                out.seek(0)
                if any(json.loads(ln).get("key") == event["key"] for ln in out if ln.strip()):
                    return  # delivered before a kill kept its outbox file
                out.write(json.dumps(event, sort_keys=True) + "\n")
                out.flush()
                os.fsync(out.fileno())
        except OSError as error:  # a full disk, a read-only home: tried again later
            raise DeliveryError(f"{self.name}: {error}") from error


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
            retry_if_exception,
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
            if refused_for_good(response.status_code):
                raise RefusedForGood(f"{self.name}: HTTP {response.status_code}")
            if not 200 <= response.status_code < 300:
                raise DeliveryError(f"{self.name}: HTTP {response.status_code}")

        retrying = Retrying(
            stop=stop_after_attempt(self.attempts)
            | stop_before_delay(max(0.0, deadline - time.monotonic())),
            wait=wait_exponential(multiplier=self.backoff_seconds),
            retry=retry_if_exception(
                lambda e: isinstance(e, DeliveryError) and not isinstance(e, RefusedForGood)
            ),
            reraise=True,
        )
        try:
            retrying(post)
        except RetryError as error:  # stopped before any attempt raised
            raise DeliveryError(f"{self.name}: no time left") from error


@dataclass
class TargetSink:
    """One of the project's SQLMesh ``notification_targets``, sent through its own ``send``
    (a Slack message, an e-mail, the console, a custom class): an alert or a rejection as a
    warning, the rest as information. Any error of the target is a transient failure."""

    target: t.Any  # a sqlmesh.core.notification_target.BaseNotificationTarget
    name: str

    @classmethod
    def of(cls, target: t.Any) -> TargetSink:
        """The sink of ``target``, named by its type and a digest of its settings (stable
        while the config is; no secret in the name)."""
        settings = json.dumps(target.dict(), sort_keys=True, default=str)
        digest = hashlib.sha256(f"{type(target).__qualname__}\n{settings}".encode())
        kind = re.sub(r"[^a-z0-9]+", "_", str(getattr(target, "type_", "target")).lower())
        return cls(target, f"{TARGET_PREFIX}{kind}-{digest.hexdigest()[:8]}")

    def send(self, event: dict[str, t.Any], deadline: float) -> None:
        from sqlmesh.core.notification_target import NotificationStatus

        warn = event["event"] in WARNINGS
        status = NotificationStatus.WARNING if warn else NotificationStatus.INFO
        try:
            self.target.send(status, event["text"])
        except Exception as error:  # the target's own error, whatever its library
            first = (str(error).splitlines() or [""])[0][:200]
            raise DeliveryError(f"{self.name}: {type(error).__name__}: {first}") from error


TARGET_PREFIX = "sqlmesh-"  # a SQLMesh notification target's outbox folder: sqlmesh-<type>-<id>


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


Targets = t.Callable[[], t.Sequence[t.Any]]  # the project's SQLMesh notification targets


def _no_targets() -> t.Sequence[t.Any]:
    return ()


def targets_of(config: t.Any) -> Targets:
    """The notification targets of a SQLMesh ``Config`` (``context.config``)."""
    return lambda: list(config.notification_targets)


def sinks(
    home: Path, settings: t.Mapping[str, t.Any] | None = None, targets: Targets = _no_targets
) -> list[Sink]:
    """The sinks ``settings`` (``project.yaml``'s ``notifications``) turn on: the file sink
    unless ``file: false``, the webhook when its URL is set, and each of the project's
    SQLMesh notification ``targets`` unless ``sqlmesh_targets: false``."""
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
    if settings.get("sqlmesh_targets", True):
        out += [TargetSink.of(target) for target in targets()]
    return out
