"""The outbox and its sinks (``tardy.outbox.notifications``) against a real HTTP server on
loopback, started here: an event reaches the webhook once whatever its failures, an event
raised while the server is down is delivered by the next delivery, a process killed after
raising an event loses none, and a repeated delivery is not a second event."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import typing as t
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from webhook import Hook  # the tests' loopback webhook (tests/integration/webhook.py)

from tardy.errors import InputError
from tardy.outbox.notifications import (
    FILE_SINK,
    Event,
    EventKind,
    FileSink,
    Outbox,
    WebhookSink,
    backlog,
    webhook_url,
)


@pytest.fixture
def hook() -> t.Iterator[Hook]:
    server = Hook(fail=2)
    yield server
    server.close()


def published(version: int) -> Event:
    return Event(
        EventKind.PUBLICATION,
        f"gold.daily_store_revenue v{version} published",
        about=f"gold.daily_store_revenue@v{version}",
        table="gold.daily_store_revenue",
        version=version,
        detail={"changed_days": ["2026-01-10"]},
    )


LATER = datetime.now(UTC) + timedelta(hours=2)  # past any first backoff


def lines(home: Path) -> list[dict[str, t.Any]]:
    return [json.loads(line) for line in (home / FILE_SINK).read_text().splitlines()]


def test_a_webhook_failing_twice_receives_the_event_once(tmp_path: Path, hook: Hook) -> None:
    sink = WebhookSink(hook.url, timeout_seconds=2, attempts=3, backoff_seconds=0.01)
    outbox = Outbox(tmp_path, [FileSink(tmp_path / FILE_SINK), sink])
    event = published(2)
    outbox.put(event)
    done = outbox.deliver(budget_seconds=10)
    assert (done.delivered, done.pending, done.errors) == (2, 0, [])
    assert hook.tried == 3 and len(hook.accepted) == 1
    key, body = hook.accepted[0]
    assert key == body["key"] == event.key
    assert body["text"] == "gold.daily_store_revenue v2 published"
    assert (body["event"], body["table"], body["version"]) == ("publication", event.table, 2)
    assert [line["key"] for line in lines(tmp_path)] == [event.key]
    assert outbox.pending() == {"file": [], "webhook": []}


def test_an_event_raised_while_the_server_is_down_is_delivered_by_the_next_delivery(
    tmp_path: Path,
) -> None:
    down = Hook()
    down.close()  # nothing listens on its port now: connection refused
    sink = WebhookSink(down.url, timeout_seconds=1, attempts=2, backoff_seconds=0.01)
    outbox = Outbox(tmp_path, [sink])
    outbox.put(published(3), published(4))
    first = outbox.deliver(budget_seconds=5)
    assert (first.delivered, first.pending) == (0, 2) and "ConnectionError" in first.errors[0]
    up = Hook(port=down.port)
    try:
        # Both wait for their next attempt (the backoff across commands), then go.
        assert outbox.deliver(budget_seconds=5).delivered == 0 and up.tried == 0
        second = outbox.deliver(budget_seconds=5, now=LATER)
    finally:
        up.close()
    assert (second.delivered, second.pending, second.errors) == (2, 0, [])
    # Oldest first, each once.
    assert [body["version"] for _, body in up.accepted] == [3, 4]


RAISE_AND_HANG = """
import sys, time
from pathlib import Path
from tardy.outbox.notifications import Event, EventKind, FileSink, Outbox
home = Path(sys.argv[1])
Outbox(home, [FileSink(home / "notifications.jsonl")]).put(
    Event(EventKind.ALERT, "late_ratio above its limit", about="alert:pos:2026-01-10")
)
print("raised", flush=True)
time.sleep(60)
"""


def test_an_event_put_and_never_delivered_by_its_command_is_delivered_by_the_next(
    tmp_path: Path,
) -> None:
    """The outbox is on disk once ``put`` returns: a command that stops before delivering
    (its Outbox never delivers) leaves the event for the next command's delivery. The long
    tier kills a process there, and a real `tardy promote` between publication and delivery
    (``integration/test_interrupted_promotion``)."""
    Outbox(tmp_path, [FileSink(tmp_path / FILE_SINK)]).put(
        Event(EventKind.ALERT, "late_ratio above its limit", about="alert:pos:2026-01-10")
    )
    assert not (tmp_path / FILE_SINK).exists()  # not delivered by the command that raised it
    outbox = Outbox(tmp_path, [FileSink(tmp_path / FILE_SINK)])
    assert outbox.deliver().delivered == 1
    assert [line["text"] for line in lines(tmp_path)] == ["late_ratio above its limit"]
    assert outbox.deliver().delivered == 0  # once


@pytest.mark.long  # a real process killed; its fast guard: the test above
def test_a_process_killed_after_raising_an_event_loses_none(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", RAISE_AND_HANG, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "raised"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert not (tmp_path / FILE_SINK).exists()  # killed before it delivered
    outbox = Outbox(tmp_path, [FileSink(tmp_path / FILE_SINK)])
    assert outbox.deliver().delivered == 1
    assert [line["text"] for line in lines(tmp_path)] == ["late_ratio above its limit"]


def test_a_delivery_repeated_after_a_kill_is_not_a_second_event(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / FILE_SINK)
    outbox = Outbox(tmp_path, [sink])
    event = published(5)
    outbox.put(event)
    outbox.put(event)  # raised again (a command re-run): kept once
    (pending,) = outbox.pending()["file"]
    # A kill after the sink appended and before the outbox file was deleted:
    sink.send(json.loads(pending.read_text()), deadline=float("inf"))
    assert outbox.deliver().delivered == 1
    assert [line["key"] for line in lines(tmp_path)] == [event.key]


def test_a_second_delivery_at_once_leaves_the_outbox_to_the_first(tmp_path: Path) -> None:
    import fcntl

    outbox = Outbox(tmp_path, [FileSink(tmp_path / FILE_SINK)])
    outbox.put(published(6))
    with (tmp_path / "outbox" / ".lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        done = outbox.deliver()
    assert done.busy and done.delivered == 0
    assert outbox.deliver().delivered == 1


def test_the_webhook_url_comes_from_the_environment_or_an_owner_only_file(
    tmp_path: Path,
) -> None:
    assert webhook_url({"TARDY_WEBHOOK_URL": " https://hooks.example/a "}) == (
        "https://hooks.example/a"
    )
    secret = tmp_path / "webhook"
    secret.write_text("https://hooks.example/T0/secret\n")
    secret.chmod(0o644)
    with pytest.raises(InputError, match="chmod 600"):
        webhook_url({"TARDY_WEBHOOK_URL_FILE": str(secret)})
    secret.chmod(0o600)
    assert webhook_url({"TARDY_WEBHOOK_URL_FILE": str(secret)}) == (
        "https://hooks.example/T0/secret"
    )
    assert webhook_url({}) is None


def test_a_later_command_delivers_with_the_settings_raised_under_never_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    hook = Hook(fail=3)  # more failures than the default attempts (3) absorb
    try:
        _deliver_later(tmp_path, hook, monkeypatch)
    finally:
        hook.close()


def _deliver_later(tmp_path: Path, hook: Hook, monkeypatch: pytest.MonkeyPatch) -> None:
    from tardy.outbox.notifications import SINK_SETTINGS, deliver_pending, notify

    monkeypatch.setenv("TARDY_WEBHOOK_URL", hook.url)
    settings = {"webhook": {"timeout_seconds": 2, "attempts": 4, "backoff_seconds": 0.01}}
    notify(tmp_path, settings, published(7))
    kept = (tmp_path / "outbox" / "webhook" / SINK_SETTINGS).read_text()
    assert hook.url not in kept and json.loads(kept)["attempts"] == 4
    monkeypatch.delenv("TARDY_WEBHOOK_URL")
    first = deliver_pending(tmp_path)  # no URL now: the webhook's event waits
    assert first is not None and first.delivered == 1 and len(lines(tmp_path)) == 1
    assert len(Outbox.of(tmp_path).pending()) == 1  # the file sink's folder only
    monkeypatch.setenv("TARDY_WEBHOOK_URL", hook.url)
    second = deliver_pending(tmp_path)
    # The hook fails three times: delivered within one delivery by the 4 kept attempts.
    assert second is not None and (second.delivered, second.pending) == (1, 0)
    assert [body["version"] for _, body in hook.accepted] == [7]


def test_a_publication_whose_event_a_kill_lost_is_announced_by_the_next_publish(
    tmp_path: Path,
) -> None:
    """``announce`` as ``tardy.consumers.publish.publish`` calls it: the publications recorded
    before (``known``) and the new ones. The state a kill between the publication's commit and its
    event leaves (v2 recorded, its key in no ledger) is caught up by the next call."""
    from tardy.outbox.notifications import announce

    settings = {"file": True}
    # A data home from before notifications: its publications are adopted, not announced.
    assert announce(tmp_path, settings, known=[published(1)], new=[]) == []
    assert [e.version for e in announce(tmp_path, settings, [published(1)], [published(2)])] == [2]
    # v3 was appended, then the process was killed before it announced it: the next publish
    # (v4) finds v3 known and never announced.
    caught = announce(tmp_path, settings, [published(v) for v in (1, 2, 3)], [published(4)])
    assert [e.version for e in caught] == [3, 4]
    assert announce(tmp_path, settings, [published(v) for v in (1, 2, 3, 4)], []) == []
    Outbox.of(tmp_path).deliver()
    assert [line["version"] for line in lines(tmp_path)] == [2, 3, 4]


def on(table: str, version: int) -> Event:
    return Event(
        EventKind.PUBLICATION,
        f"{table} v{version} published",
        about=f"{table}@v{version}",
        table=table,
        version=version,
    )


def test_an_event_refused_for_good_is_a_dead_letter_and_the_next_events_go(
    tmp_path: Path,
) -> None:
    """A 400 for one event: it moves to the dead letters with its reason, the events after it
    (its own table's too) are delivered, it is never sent again by a delivery, and
    ``retry_dead`` sends it once the server accepts it."""
    refusing = {2}
    hook = Hook(answer=lambda body: 400 if body["version"] in refusing else None)
    try:
        sink = WebhookSink(hook.url, timeout_seconds=2, attempts=3, backoff_seconds=0.01)
        outbox = Outbox(tmp_path, [sink])
        outbox.put(on("gold.a", 1), on("gold.a", 2), on("gold.a", 3))
        done = outbox.deliver(budget_seconds=10)
        assert (done.delivered, done.dead, done.pending) == (2, 1, 0)
        assert [body["version"] for _, body in hook.accepted] == [1, 3]
        assert [b["version"] for b in hook.bodies].count(2) == 1  # a 400 is not retried
        (letter,) = backlog(tmp_path).dead
        assert (letter.sink, letter.table, letter.reason) == (
            "webhook",
            "gold.a",
            "webhook: HTTP 400",
        )
        assert letter.text == "gold.a v2 published"
        assert outbox.deliver(budget_seconds=5, now=LATER).delivered == 0  # dead stays dead
        assert len(hook.bodies) == 3
        refusing.clear()
        retried = outbox.retry_dead()
        assert (retried.retried, retried.delivered, retried.dead) == (1, 1, 0)
        assert [body["version"] for _, body in hook.accepted] == [1, 3, 2]
        assert backlog(tmp_path).dead == [] and backlog(tmp_path).pending == {}
    finally:
        hook.close()


def test_a_transient_failure_waits_for_its_next_attempt_and_holds_back_only_its_table(
    tmp_path: Path,
) -> None:
    """A 503 (then 204): the event is kept with its attempts and next attempt time; until
    then neither it nor the later events of its table are sent, another table's are; once
    due, each is delivered once and in order."""
    hook = Hook(answer=lambda body: 503 if body["version"] == 1 and len(hook.bodies) == 1 else None)
    try:
        sink = WebhookSink(hook.url, timeout_seconds=2, attempts=1, backoff_seconds=0.01)
        outbox = Outbox(tmp_path, [sink])
        outbox.put(on("gold.a", 1), on("gold.a", 2), on("gold.b", 1))
        first = outbox.deliver(budget_seconds=10)
        assert (first.delivered, first.pending, first.errors) == (1, 2, ["webhook: HTTP 503"])
        assert [(b["table"], b["version"]) for _, b in hook.accepted] == [("gold.b", 1)]
        waiting = json.loads(sorted(outbox.pending()["webhook"])[0].read_text())
        assert waiting["_delivery"]["attempts"] == 1
        assert waiting["_delivery"]["next_attempt_at"] > datetime.now(UTC).isoformat()
        again = outbox.deliver(budget_seconds=10)  # not due yet: nothing sent
        assert (again.delivered, again.pending, len(hook.bodies)) == (0, 2, 2)
        due = outbox.deliver(budget_seconds=10, now=LATER)
        assert (due.delivered, due.pending, due.errors) == (2, 0, [])
        got = [(b["table"], b["version"]) for _, b in hook.accepted]
        assert got == [("gold.b", 1), ("gold.a", 1), ("gold.a", 2)]
        assert [key for key, _ in hook.accepted].count(on("gold.a", 1).key) == 1
    finally:
        hook.close()


def test_a_sink_that_fails_never_holds_another_back(tmp_path: Path) -> None:
    down = Hook()
    down.close()
    sinks = [WebhookSink(down.url, timeout_seconds=1, attempts=5, backoff_seconds=0.2)]
    outbox = Outbox(tmp_path, [*sinks, FileSink(tmp_path / FILE_SINK)])
    outbox.put(on("gold.a", 1), on("gold.a", 2))
    done = outbox.deliver(budget_seconds=2)
    assert done.delivered == 2 and done.pending == 2  # the file sink's two; the webhook's wait
    assert [line["version"] for line in lines(tmp_path)] == [1, 2]
    assert backlog(tmp_path).pending == {"webhook": 2}


TARGET_CONFIG = '''
"""A project whose SQLMesh config names a notification target of its own (a custom class)."""
import json
import os
from pathlib import Path

from sqlmesh.core.notification_target import GenericNotificationTarget

from tardy.project.context import sqlmesh_config


class Recorder(GenericNotificationTarget):
    fail: bool = False

    def send(self, notification_status, msg, **kwargs):
        if self.fail and not Path(os.environ["TARDY_TEST_TARGET_UP"]).exists():
            raise ConnectionError("the target is down")
        with open(os.environ["TARDY_TEST_TARGET"], "a") as out:
            out.write(json.dumps({"status": notification_status.value, "msg": msg}) + "\\n")


config = sqlmesh_config(Path(__file__).parent)
config = config.copy(update={"notification_targets": [Recorder(fail=True)]})
'''


def test_a_projects_sqlmesh_notification_target_receives_a_publication_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``notification_targets`` in the project's config (``config.py``, a custom target
    class): a publication's event reaches it through the target's own ``send``, behind the
    outbox: while the target fails the event waits; once it accepts, delivered once."""
    import shutil

    from tardy.consumers.publish import published
    from tardy.consumers.versions import Publication
    from tardy.outbox.notifications import announce, deliver_pending
    from tardy.project.context import notification_targets
    from tardy.project.home import project_root

    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    shutil.copy(project_root() / "project.yaml", project)
    (project / "config.py").write_text(TARGET_CONFIG)
    received, up = tmp_path / "received.jsonl", tmp_path / "up"
    monkeypatch.setenv("TARDY_PROJECT", str(project))
    monkeypatch.setenv("TARDY_TEST_TARGET", str(received))
    monkeypatch.setenv("TARDY_TEST_TARGET_UP", str(up))
    (target,) = notification_targets()
    assert type(target).__name__ == "Recorder"

    publication = Publication(
        table_name="gold.daily_totals",
        version=2,
        physical_table="db.gold__daily_totals__1",
        delta_version=7,
        time_column="day",
        produced_by="restatement:r-1",
        changed_days=["2026-01-10"],
        revisions={"2026-01-10": 1},
        rows=12,
        sha256="ab" * 32,
        published_at="2026-01-31T12:00:00+00:00",
    )
    home = tmp_path / "home"
    announce(home, {}, [], [published(publication)], targets=notification_targets)
    first = deliver_pending(home, targets=notification_targets)
    assert first is not None and first.pending == 1 and not received.exists()
    assert "ConnectionError: the target is down" in first.errors[0]
    up.touch()
    later = datetime.now(UTC) + timedelta(hours=2)  # past its backoff
    from tardy.outbox.notifications import Outbox

    done = Outbox.of(home, notification_targets).deliver(now=later)
    assert (done.delivered, done.pending) == (1, 0)
    (line,) = [json.loads(x) for x in received.read_text().splitlines()]
    assert line == {"status": "info", "msg": published(publication).text}
    assert line["msg"].startswith("gold.daily_totals@v2 published")
    assert Outbox.of(home, notification_targets).deliver(now=later).delivered == 0


def test_a_silence_is_one_event_however_long_it_grows() -> None:
    from tardy.outbox.notifications import alerted

    def silent(hours: float, last: str = "2026-01-10T13:00:00") -> Event:
        detail = {"source": "pos", "metric": "source_silent", "value": hours, "hours": [last]}
        return alerted(f"source pos: silent for {hours} h", detail, "2026-01-10T12:59:00")

    assert silent(30.0).key == silent(31.5).key  # the same silence, checked again later
    assert silent(30.0).key != silent(30.0, last="2026-01-12T08:00:00").key  # a new one
    lag = {"source": "pos", "metric": "late_ratio", "value": 0.2}
    assert alerted("a", lag, "t1").key != alerted("a", {**lag, "value": 0.3}, "t1").key
