"""`tardy status` on real Spark + Delta: the data watermark, final/provisional days, lateness.

Runs on a copy of the ``small`` template (``children.py``: two stores over ten days, prod
planned after every ingest) with two and a half more days of arrivals (late, duplicated and
corrected records among them) that no run has seen yet. It lands a few probe rows of its own
(source ``status_probe``) whose lateness is known by construction, and checks every number
against pandas on bronze.
"""

from __future__ import annotations

import json
import os
import typing as t
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from children import SMALL, SMALL_CLOCK, SMALL_CONFIG

from tardy.ingest import ingest
from tardy.ingest.landing import arrival_dir_name
from tardy.simulate import simulate

CONFIG = SMALL_CONFIG

GRACE = 3
LATER = SMALL_CLOCK + timedelta(days=2, hours=12)  # arrivals past the template's plan
PROBE = "status_probe"
VIEW = "tardy.daily_store_revenue_status"
SILVER, DAILY = "silver.sales_transactions", "gold.daily_store_revenue"
WEEKLY, MONTHLY = "gold.weekly_store_revenue", "gold.monthly_store_revenue"


def _sale(transaction_id: str, event_ts: datetime | None) -> str:
    record = {
        "transaction_id": transaction_id,
        "record_type": "sale",
        "store_id": 1,
        "product_id": 3,
        "quantity": 2,
        "unit_price": 4.5,
        "discount": 0.0,
    }
    if event_ts is not None:
        record["event_ts"] = event_ts.strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps(record)


def _declared() -> dict:
    """The sources.yaml this module uses, read as plain YAML (not by tardy.project.sources)."""
    from ruamel.yaml import YAML

    from tardy.project.sources import FILE_VARIABLE

    return YAML(typ="safe").load(Path(os.environ[FILE_VARIABLE]).read_text())


def _land(landing: Path, arrival: datetime, lines: list[str]) -> None:
    folder = landing / PROBE / arrival_dir_name(arrival.replace(tzinfo=UTC))
    folder.mkdir(parents=True)
    (folder / "probe.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module", autouse=True)
def probe_source(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[None]:
    """The probe is a source of its own (its lateness measured apart): declared in a copy of
    the project's sources.yaml, as a sales source like ``pos``, for this module."""
    from ruamel.yaml import YAML

    from tardy.project.home import project_root
    from tardy.project.sources import FILE_VARIABLE

    yaml = YAML(typ="safe")
    declared = yaml.load((project_root() / "sources.yaml").read_text())
    declared["sources"][PROBE] = {**declared["sources"]["pos"], "lateness": "daily"}
    copy = tmp_path_factory.mktemp("sources") / "sources.yaml"
    with copy.open("w") as handle:
        yaml.dump(declared, handle)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(FILE_VARIABLE, str(copy))
        yield


@pytest.fixture(scope="module")
def data_home(engine, tmp_path_factory: pytest.TempPathFactory):
    """This module's home: a copy of the ``small`` template, opened in the worker's warm
    engine (conftest's ``context`` and ``spark`` are its)."""
    root = tmp_path_factory.mktemp("status") / "home"
    SMALL.copy_to(engine, root)
    return engine.open(root)[0]


@pytest.fixture(scope="module")
def lake(context, spark, data_home) -> SimpleNamespace:
    from tardy.consumers.status import ensure_status_view, status

    simulate(CONFIG, data_home.landing, through=LATER)  # arrivals no run has seen yet
    ingest(spark, data_home.landing)
    ensure_status_view(context, spark)  # before the probe: the view must follow new arrivals
    before = spark.sql("SELECT MAX(arrival_ts) AS m FROM bronze.pos_events").first().m
    midnight = datetime.combine(before.date(), time(0))
    # Arriving at `midnight`, a row of `edge` arrives exactly GRACE days after its day ended.
    edge = midnight.date() - timedelta(days=1 + GRACE)
    at = lambda day, hour=12: datetime.combine(day, time(hour))  # noqa: E731
    old_day = CONFIG.start + timedelta(days=1)
    _land(
        data_home.landing,
        midnight,
        [
            _sale("PROBE-EDGE-ON-TIME", at(edge)),
            _sale("PROBE-DAY-LATE", at(edge - timedelta(days=1))),
            _sale("PROBE-OLD", at(old_day)),
            _sale("PROBE-NO-EVENT-TS", None),
            _sale("PROBE-FUTURE", midnight + timedelta(hours=1)),
            '{"transaction_id": "PROBE-BROKEN", ',
        ],
    )
    _land(data_home.landing, midnight + timedelta(seconds=1), [_sale("PROBE-EDGE-LATE", at(edge))])
    newest = before + timedelta(hours=1)  # moves the watermark by one hour
    _land(data_home.landing, newest, [_sale("PROBE-NEWEST", before)])
    assert ingest(spark, data_home.landing).files_ingested == 3
    # The probe's declaration lists the record's fields in another order than the project's
    # (the copy's YAML is dumped sorted): each value still lands in its own column.
    probe = spark.sql(
        f"SELECT transaction_id, record_type FROM bronze.pos_events WHERE source_system = "
        f"'{PROBE}' AND parse_error IS NULL"
    ).collect()
    assert len(probe) == 7 and all(
        r.transaction_id.startswith("PROBE-") and r.record_type == "sale" for r in probe
    ), probe
    return SimpleNamespace(
        status=status(context, spark),
        edge=edge,
        old_day=old_day,
        midnight=midnight,
        newest=newest,
        bronze=_arrivals(spark),
    )


def _arrivals(spark) -> pd.DataFrame:
    """Every declared source's bronze records (sources.yaml read as plain YAML): its source,
    arrival and event time (the declared event_time field's column)."""
    tables = {body["bronze"]: body["event_time"] for body in _declared()["sources"].values()}
    return pd.concat(
        [
            spark.table(table)
            .selectExpr("source_system", "arrival_ts", f"`{event}` AS event_ts")
            .toPandas()
            for table, event in tables.items()
        ],
        ignore_index=True,
    )


def expected_watermark(bronze: pd.DataFrame) -> datetime:
    return (bronze.arrival_ts.max() - pd.Timedelta(days=GRACE)).to_pydatetime()


def test_data_watermark_is_the_latest_arrival_minus_the_grace_window(lake) -> None:
    result = lake.status
    watermark = expected_watermark(lake.bronze)
    assert lake.bronze.arrival_ts.max().to_pydatetime() == lake.newest
    assert result.grace_days == GRACE
    assert datetime.fromisoformat(result.max_arrival_ts) == lake.newest
    assert datetime.fromisoformat(result.data_watermark) == watermark
    assert date.fromisoformat(result.first_provisional_day) == watermark.date()
    assert date.fromisoformat(result.last_final_day) == watermark.date() - timedelta(days=1)


def test_lateness_per_source_matches_pandas(lake) -> None:
    b = lake.bronze
    valid = b.event_ts.notna() & (b.event_ts <= b.arrival_ts)
    closes = b.event_ts.dt.normalize() + pd.Timedelta(days=1 + GRACE)
    late = valid & (b.arrival_ts > closes)
    lag = (b.arrival_ts - b.event_ts).dt.total_seconds() / 3600
    result = lake.status
    assert [s.source_system for s in result.sources] == sorted(b.source_system.unique())
    assert PROBE in {s.source_system for s in result.sources}
    # A source of another bronze table, measured by its own event time.
    assert "store_master" in {s.source_system for s in result.sources}
    for item in [*result.sources, result.overall]:
        mask = b.source_system == item.source_system if item.source_system != "*" else b.index >= 0
        measured = int((mask & valid).sum())
        assert item.rows == int(mask.sum())
        assert item.measured_rows == measured
        assert item.rows_without_event_ts == int((mask & b.event_ts.isna()).sum())
        assert item.rows_event_after_arrival == int((mask & (b.event_ts > b.arrival_ts)).sum())
        assert item.rows == (
            item.measured_rows + item.rows_without_event_ts + item.rows_event_after_arrival
        )
        assert item.late_rows == int((mask & late).sum())
        assert item.late_ratio == pytest.approx(int((mask & late).sum()) / measured)
        p50, p95, p99 = np.percentile(lag[mask & valid], [50, 95, 99], method="inverted_cdf")
        assert item.lag_hours_p50 == pytest.approx(p50, rel=1e-9)
        assert item.lag_hours_p95 == pytest.approx(p95, rel=1e-9)
        assert item.lag_hours_p99 == pytest.approx(p99, rel=1e-9)
        assert datetime.fromisoformat(item.max_arrival_ts) == b.arrival_ts[mask].max()
    overall = result.overall
    assert overall.rows == len(b) and 0 < overall.late_rows < overall.measured_rows


def test_late_boundary_on_the_probe_rows(lake) -> None:
    """Arriving exactly GRACE days after the event day ended is on time; a second later, late."""
    probe = next(s for s in lake.status.sources if s.source_system == PROBE)
    assert (probe.rows, probe.rows_without_event_ts, probe.rows_event_after_arrival) == (8, 2, 1)
    # EDGE-ON-TIME on time; EDGE-LATE (1 s later), DAY-LATE and OLD late; NEWEST on time.
    assert (probe.measured_rows, probe.late_rows) == (5, 3)
    assert probe.late_ratio == pytest.approx(0.6)
    edge = (lake.midnight - datetime.combine(lake.edge, time(12))).total_seconds() / 3600
    old = (lake.midnight - datetime.combine(lake.old_day, time(12))).total_seconds() / 3600
    lags = [edge, edge + 1 / 3600, edge + 24, old, 1.0]
    assert edge == 12 + 24 * GRACE
    # Nearest rank: the smallest lag with at least that share of the five at or below it.
    assert probe.lag_hours_p50 == pytest.approx(sorted(lags)[2])
    assert probe.lag_hours_p99 == pytest.approx(max(lags))


def test_view_marks_days_before_the_watermark_date_final(lake, spark) -> None:
    watermark = expected_watermark(lake.bronze)
    rows = spark.table(VIEW).collect()
    assert len(rows) == spark.table(DAILY).count() > 0
    # The view was created before the probe landed: it follows bronze, never goes stale.
    assert {r.data_watermark for r in rows} == {watermark}
    for r in rows:
        whole_day_before = datetime.combine(r.event_date + timedelta(days=1), time(0)) <= watermark
        assert r.period_status == ("final" if whole_day_before else "provisional"), r
    final = {r.event_date for r in rows if r.period_status == "final"}
    provisional = {r.event_date for r in rows if r.period_status == "provisional"}
    assert max(final) == watermark.date() - timedelta(days=1)
    assert min(provisional) == watermark.date()
    gold_columns, view_columns = spark.table(DAILY).columns, spark.table(VIEW).columns
    assert view_columns[: len(gold_columns)] == gold_columns
    assert {"data_watermark", "period_status"} <= set(view_columns)


def _days(spans: list[list[str]]) -> set[date]:
    return {
        date.fromisoformat(a) + timedelta(days=i)
        for a, b in spans
        for i in range((date.fromisoformat(b) - date.fromisoformat(a)).days + 1)
    }


def test_pending_late_data_split_by_finality(lake) -> None:
    result = lake.status
    cut = expected_watermark(lake.bronze).date()
    impacted = result.detect["impacted"]
    absorbed = result.detect["absorbed_by_next_run"]
    for model in (SILVER, DAILY):
        days = _days(impacted[model])
        assert _days(result.pending_final[model]) == {d for d in days if d < cut}
        assert _days(result.pending_provisional[model]) == {d for d in days if d >= cut}
    assert _days(result.absorbed_but_final[SILVER]) == {
        d for d in _days(absorbed[SILVER]) if d < cut
    }
    # The probe's closed day is final and pending in every day-keyed model ...
    assert lake.old_day in _days(result.pending_final[SILVER]) & _days(result.pending_final[DAILY])
    # ... its partial first week (ends Sunday 2026-01-04) is final, January is not over.
    assert CONFIG.start in _days(result.pending_final[WEEKLY])
    assert CONFIG.start in _days(result.pending_provisional[MONTHLY])
    # The edge day is final; detect either restates it or leaves it to the next run: the
    # status says which, where finality and detect disagree.
    edge_sides = _days(result.pending_final[SILVER]) | _days(result.absorbed_but_final[SILVER])
    assert lake.edge in edge_sides


def test_split_by_finality_boundaries(lake, context) -> None:
    from tardy.consumers.status import split_by_finality
    from tardy.engine.closure import Closure
    from tardy.engine.sqlmesh_api import model_snapshots
    from tardy.lateness.grace import is_final

    for watermark in (datetime(2026, 1, 8), datetime(2026, 1, 8, 12)):
        assert is_final(date(2026, 1, 7), watermark)
        assert not is_final(date(2026, 1, 8), watermark)
    assert not is_final(date(2026, 1, 7), datetime(2026, 1, 7, 23, 59, 59))
    assert not is_final(date(2020, 1, 1), None)
    manifest = SimpleNamespace(
        impacted={
            DAILY: [["2026-01-06", "2026-01-09"]],
            # The project starts on Thursday 2026-01-01: its first week ends on Sunday 01-04.
            WEEKLY: [["2026-01-01", "2026-01-01"], ["2026-01-05", "2026-01-05"]],
            MONTHLY: [["2026-01-01", "2026-01-01"]],
        },
        absorbed_by_next_run={SILVER: [["2026-01-07", "2026-01-10"]]},
    )
    closure = Closure(context, model_snapshots(context))
    final, provisional, absorbed = split_by_finality(manifest, datetime(2026, 1, 8, 6), closure)
    assert final == {
        DAILY: [["2026-01-06", "2026-01-07"]],
        WEEKLY: [["2026-01-01", "2026-01-01"]],
        MONTHLY: [],
    }
    assert provisional == {
        DAILY: [["2026-01-08", "2026-01-09"]],
        WEEKLY: [["2026-01-05", "2026-01-05"]],  # that week ends on Sunday 2026-01-11
        MONTHLY: [["2026-01-01", "2026-01-01"]],
    }
    assert absorbed == {SILVER: [["2026-01-07", "2026-01-07"]]}


def _fake_open(context, opened: list):
    def open_context(gateway=None, *, load=True, progress_to_stderr=False):
        opened.append((gateway, progress_to_stderr))
        return context  # the session's context and Spark: no second session

    return open_context


def test_cli_status_json_prints_only_the_status(lake, context, monkeypatch, capsys) -> None:
    import tardy.project.context
    from tardy import cli

    opened: list = []
    monkeypatch.setattr(tardy.project.context, "open_context", _fake_open(context, opened))
    assert cli.main(["status", "--json", "--fresh"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload.pop("answer")["source"] == "computed"
    assert set(payload.pop("notifications")) == {"pending", "dead", "held"}  # the outbox's
    assert payload == json.loads(json.dumps(lake.status.as_dict(), default=str))
    assert opened == [(None, True)]  # SQLMesh's progress goes to stderr


def test_cli_status_table(lake, context, monkeypatch, capsys) -> None:
    import tardy.consumers.status
    import tardy.project.context
    from tardy import cli

    opened: list = []
    monkeypatch.setattr(tardy.project.context, "open_context", _fake_open(context, opened))
    monkeypatch.setattr(tardy.consumers.status, "status", lambda context, spark: lake.status)
    assert cli.main(["status", "--gateway", "local", "--fresh"]) == 0
    out = capsys.readouterr().out
    assert opened == [("local", False)]
    assert lake.status.data_watermark in out and lake.status.last_final_day in out
    assert "Lateness by source" in out and "tardy detect" in out


def test_pending_age_is_the_wait_of_the_oldest_late_row_since_the_watermark(lake, spark) -> None:
    from tardy.engine.watermark import read

    previous = read(spark).stamp
    b = lake.bronze
    valid = b.event_ts.notna() & (b.event_ts <= b.arrival_ts)
    late = valid & (b.arrival_ts > b.event_ts.dt.normalize() + pd.Timedelta(days=1 + GRACE))
    if previous is not None:
        late &= b.arrival_ts > pd.Timestamp(datetime.fromisoformat(previous))
    assert late.any() and any(lake.status.pending_final.values())
    waited = (b.arrival_ts.max() - b.arrival_ts[late].min()).total_seconds() / 3600
    assert lake.status.pending_age_hours == pytest.approx(waited, rel=1e-12)


def test_status_check_alerts_exactly_the_sources_past_their_tier(
    lake, context, monkeypatch, capsys
) -> None:
    """`tardy status --check` exits 4 naming every source and metric past its tier's limit
    (project.yaml), here the probe source (60 % late against 5 %), and exits 0 when the
    limits are loosened."""
    import tardy.consumers.status
    import tardy.project.context
    from tardy import cli

    monkeypatch.setattr(tardy.project.context, "open_context", _fake_open(context, []))
    monkeypatch.setattr(tardy.consumers.status, "status", lambda context, spark: lake.status)
    variables = context.config.variables
    # The tiers' alerts are this test's; those against each source's history are
    # test_lateness_series' (a lag far above its own baseline would also fire here).
    monkeypatch.setitem(variables, "lateness_baseline", {"lag_p99_factor": 1e9})
    tiers = variables["lateness_alert_tiers"]
    sources = {name: body["lateness"] for name, body in _declared()["sources"].items()}
    expected = {
        (s.source_system, metric)
        for s in lake.status.sources
        for metric in ("late_ratio", "lag_hours_p99")
        if getattr(s, metric) > tiers[sources[s.source_system]][metric]
    }
    if lake.status.pending_age_hours > variables["pending_late_data_max_age_hours"]:
        expected.add(("*", "pending_age_hours"))
    expected |= {
        (count.source, "quarantine_open_age_hours")
        for count in lake.status.quarantine_review
        if (count.oldest_open_hours or 0) > variables["quarantine_open_max_hours"]
    }
    assert (PROBE, "late_ratio") in expected

    assert cli.main(["status", "--check", "--json", "--fresh"]) == 4
    captured = capsys.readouterr()
    alerts = json.loads(captured.out)["alerts"]
    assert {(a["source"], a["metric"]) for a in alerts} == expected
    assert all(a["value"] > a["threshold"] for a in alerts)
    owner = _declared()["sources"][PROBE]["owner"]  # every alert of a source names its owner
    said = f"source {PROBE} (owner {owner}): late_ratio 60.00% > 5.00%"
    assert said in " ".join(captured.err.split())
    assert all(
        a["owner"] == _declared()["sources"][a["source"]].get("owner")
        for a in alerts
        if a["source"] != "*"
    )
    # Each alert was announced once (tardy.outbox.notifications' file sink), and checking
    # the same data again announces nothing new.
    announced = _alert_events()
    assert sorted((e["detail"]["source"], e["detail"]["metric"]) for e in announced) == sorted(
        expected
    )
    (probe,) = [
        e for e in announced if e["detail"]["source"] == PROBE and "late_ratio" in e["text"]
    ]
    assert probe["text"].startswith(said)
    assert cli.main(["status", "--check", "--json", "--fresh"]) == 4
    capsys.readouterr()
    assert _alert_events() == announced

    loose = {name: {"late_ratio": 1.0, "lag_hours_p99": 1e9} for name in tiers}
    monkeypatch.setitem(variables, "lateness_alert_tiers", loose)
    monkeypatch.setitem(variables, "pending_late_data_max_age_hours", 1e9)
    monkeypatch.setitem(variables, "quarantine_open_max_hours", 1e9)
    assert cli.main(["status", "--check", "--fresh"]) == 0
    assert "Check passed" in capsys.readouterr().out


def test_status_names_a_dead_letter_and_retry_delivers_it_once_accepted(
    lake, context, monkeypatch, capsys
) -> None:
    """A webhook refuses an event for good (HTTP 400): `tardy status` names it, its reason
    and the command to retry; `tardy notifications retry` delivers it once the server
    accepts (a real HTTP server on loopback), and status then shows no dead letter."""
    from webhook import Hook

    import tardy.consumers.status
    import tardy.project.context
    from tardy import cli
    from tardy.outbox.notifications import Event, EventKind, Outbox, WebhookSink
    from tardy.project.home import activate

    monkeypatch.setattr(tardy.project.context, "open_context", _fake_open(context, []))
    monkeypatch.setattr(tardy.consumers.status, "status", lambda context, spark: lake.status)
    refusing = [True]
    hook = Hook(answer=lambda body: 400 if refusing[0] else None)
    try:
        monkeypatch.setenv("TARDY_WEBHOOK_URL", hook.url)
        outbox = Outbox(activate().root, [WebhookSink(hook.url, attempts=1)])
        event = Event(EventKind.ALERT, "source probe: silent", about="dead-letter-probe")
        outbox.put(event)
        assert outbox.deliver(budget_seconds=5).dead == 1
        assert cli.main(["status", "--fresh"]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "dead letters" in out and "source probe: silent" in out
        assert "webhook: HTTP 400" in out and "tardy notifications retry" in out
        assert cli.main(["notifications", "retry"]) == 1  # still refused: says so
        assert "HTTP 400" in " ".join(capsys.readouterr().err.split())
        refusing[0] = False
        assert cli.main(["notifications", "retry", "--json"]) == 0
        retried = json.loads(capsys.readouterr().out)
        assert (retried["delivery"]["delivered"], retried["dead"]) == (1, [])
        assert [key for key, _ in hook.accepted] == [event.key]
        assert cli.main(["status", "--json", "--fresh"]) == 0
        assert json.loads(capsys.readouterr().out)["notifications"]["dead"] == []
    finally:
        hook.close()


def _alert_events() -> list[dict]:
    from tardy.project.home import activate

    sink = activate().root / "notifications.jsonl"
    events = [json.loads(line) for line in sink.read_text().splitlines()] if sink.exists() else []
    return [e for e in events if e["event"] == "alert"]


def _answer(argv: list[str], capsys) -> tuple[str, dict]:
    from tardy import cli

    assert cli.main([*argv, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    return payload.pop("answer")["source"], payload


def test_status_and_detect_answer_from_the_record_until_something_commits(
    lake, context, spark, data_home, monkeypatch, capsys, tmp_path
) -> None:
    """`tardy status` records its answer and detect's under the data home's state key
    (tardy.cli.recorded); the next status and detect answer from the record without opening the
    project, identical to a computed answer; a commit (here an ingest) makes the next one
    compute again, a recording that spans a commit records nothing, and a copy of the home
    does not answer from its source's record. Runs last: it ingests."""
    import tardy.project.context
    from tardy.cli.recorded import Answer, Recording, inputs_of, lookup

    opened: list = []
    monkeypatch.setattr(tardy.project.context, "open_context", _fake_open(context, opened))
    source, computed = _answer(["status", "--fresh"], capsys)
    assert (source, len(opened)) == ("computed", 1)
    source, recorded = _answer(["status"], capsys)
    assert (source, recorded, len(opened)) == ("recorded", computed, 1)  # nothing opened
    source, manifest = _answer(["detect"], capsys)
    assert (source, len(opened)) == ("recorded", 1)
    assert manifest == _answer(["detect", "--fresh"], capsys)[1] and len(opened) == 2

    copy = tmp_path / "copy"
    (copy / "recorded").mkdir(parents=True)
    record = data_home.root / "recorded" / "answers.json"
    (copy / "recorded" / "answers.json").write_bytes(record.read_bytes())
    assert lookup(copy, "local", Answer.STATUS) is None
    assert lookup(data_home.root, "local", Answer.STATUS) is not None
    assert lookup(data_home.root, "cluster", Answer.STATUS) is None

    recording = Recording(inputs_of(context, spark, data_home.root))
    _land(
        data_home.landing,
        lake.newest + timedelta(hours=1),
        [_sale("PROBE-AFTER", datetime.combine(lake.edge, time(12)))],
    )
    assert ingest(spark, data_home.landing).files_ingested == 1
    assert recording.commit({Answer.STATUS: computed}) is None  # bronze committed meanwhile
    source, detected = _answer(["detect"], capsys)
    assert (source, len(opened)) == ("computed", 3)
    assert detected["bronze_version"] > manifest["bronze_version"]
    source, after = _answer(["status"], capsys)
    assert (source, len(opened)) == ("computed", 4)
    assert after["overall"]["rows"] == computed["overall"]["rows"] + 1
