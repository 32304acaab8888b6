"""The lateness series and the alerts against each source's own history, on real Spark +
Delta, with a feed this test writes (no SQLMesh plan: bronze alone).

Eight days of hourly batches from two sources (``pos``: sales, ``partner``: the same record,
another source system), three records an hour each, lagging 2 to 6 hours; then ``pos``'s
lag jumps to 30-34 hours for its last six hours and ``partner``'s only in its last hour.
Some records are unmeasured (no event time, or one after the arrival) and some arrive days
late. The library's ``ingest()`` does not extend the series: the first ``extend`` backfills
it. Checked against an independent computation from the landing files (Python and numpy,
not Spark): every hour's rows, measured rows, lag percentiles and late-day buckets; then
one more batch is covered by itself (the extension reads its date only); then
``status --check``'s baseline alerts: ``pos``'s jump raises ``lag_p99_vs_baseline`` naming
its owner, ``partner``'s one-hour spike nothing.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

START = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday
HOURS = 8 * 24
JUMP = {"pos": 6, "partner": 1}  # each source's last hours with the jumped lag
OWNERS = {"pos": "store-systems@example.com", "partner": "partner-integrations@example.com"}


def _record(source: str, hour: int, i: int) -> dict[str, object]:
    """The ``i``-th record of ``source``'s batch of ``hour``: its lag by the plan above; every
    13th record lacks its event time, every 17th has it after the arrival, every 29th
    arrives five days late."""
    arrival = START + timedelta(hours=hour)
    n = hour * 3 + i
    lag = timedelta(hours=2 + (hour + i) % 5)
    if hour >= HOURS - JUMP[source]:
        lag = timedelta(hours=30 + (hour + i) % 5)
    if n % 29 == 0:
        lag = timedelta(days=5, hours=i)
    event: str | None = (arrival - lag).isoformat().replace("+00:00", "Z")
    if n % 13 == 0:
        event = None
    elif n % 17 == 0:
        event = (arrival + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    return {
        "transaction_id": f"T-{source}-{hour}-{i}",
        "record_type": "sale",
        "store_id": 1,
        "product_id": 1,
        "quantity": 1,
        "unit_price": 1.0,
        "discount": 0.0,
        "event_ts": event,
        "corrects_transaction_id": None,
    }


def _land(landing: Path, source: str, hour: int, name: str = "batch") -> None:
    from tardy.ingest.landing import arrival_dir_name

    folder = landing / source / arrival_dir_name(START + timedelta(hours=hour))
    folder.mkdir(parents=True, exist_ok=True)
    # Every file's content its own (a file whose content was ingested under any name is
    # skipped): the source, the hour and the file's name in each id.
    records = [
        {**_record(source, hour, i), "transaction_id": f"{name}-{source}-{hour}-{i}"}
        for i in range(3)
    ]
    lines = [json.dumps(record) for record in records]
    (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


def oracle(landing: Path) -> dict[tuple[str, datetime], dict[str, object]]:
    """Every (source, arrival hour) from the landing files: rows, measured rows, rows without
    an event time, the latest arrival, the lag percentiles (nearest rank: numpy's
    ``inverted_cdf``) and the late-day buckets (a record whose event day ended ``d > 0``
    before its arrival: ``ceil(d / 1 day)``)."""
    lags, buckets, rows, without, latest = _landed(landing)
    out = {}
    for key, n in rows.items():
        mine = lags.get(key, [])
        p = np.percentile(mine, [50, 95, 99], method="inverted_cdf") if mine else [None] * 3
        out[key] = {
            "rows": n,
            "measured_rows": len(mine),
            "without_event_ts": without[key],
            "max_arrival_ts": latest[key],
            "lag": [None if v is None else round(float(v), 9) for v in p],
            "days_late": dict(buckets.get(key, {})),
        }
    return out


def _landed(landing: Path) -> tuple[dict, dict, dict, dict, dict]:
    """Per (source, arrival hour) of the landing files: the measured lags, the late-day
    buckets, the rows, the rows without an event time and the latest arrival."""
    lags: dict[tuple[str, datetime], list[float]] = defaultdict(list)
    buckets: dict[tuple[str, datetime], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    rows: dict[tuple[str, datetime], int] = defaultdict(int)
    without: dict[tuple[str, datetime], int] = defaultdict(int)
    latest: dict[tuple[str, datetime], datetime] = {}
    for path in landing.rglob("*.jsonl"):
        source = path.parent.parent.name
        arrival = datetime.strptime(path.parent.name, "arrival_ts=%Y%m%dT%H%M%SZ")
        key = (source, arrival.replace(minute=0, second=0))
        latest[key] = max(latest.get(key, arrival), arrival)
        for line in path.read_text().splitlines():
            rows[key] += 1
            raw = json.loads(line)["event_ts"]
            if raw is None:
                without[key] += 1
                continue
            event = datetime.fromisoformat(raw.replace("Z", "+00:00")).replace(tzinfo=None)
            if event > arrival:
                continue
            lags[key].append((arrival - event).total_seconds() / 3600)
            day_end = datetime.combine(event.date() + timedelta(days=1), datetime.min.time())
            late = (arrival - day_end).total_seconds() / 86400
            buckets[key][max(0, math.ceil(late))] += 1
    return lags, buckets, rows, without, latest


@pytest.fixture(scope="module")
def fed(engine, tmp_path_factory: pytest.TempPathFactory):
    from tardy.ingest import ingest

    home, context, spark = engine.open(tmp_path_factory.mktemp("series") / "home")
    for source in JUMP:
        for hour in range(HOURS):
            _land(home.landing, source, hour)
    ingest(spark, home.landing)
    yield home, context, spark
    engine.release()


def test_the_series_matches_the_landing_files_and_follows_new_batches(fed) -> None:
    from tardy.lateness.series import extend, hours_of

    home, _, spark = fed
    backfill = extend(spark)  # the library's ingest did not extend it: the first backfills
    assert backfill.files == 2 * HOURS
    idle = extend(spark)  # nothing pending: one read, no DDL (the tables exist)
    assert (idle.files, idle.statements) == (0, 1)
    expected = oracle(home.landing)
    got = {
        (h.source_system, h.arrival_hour): {
            "rows": h.rows,
            "measured_rows": h.measured_rows,
            "without_event_ts": h.rows_without_event_ts,
            "max_arrival_ts": h.max_arrival_ts,
            "lag": [
                None if v is None else round(v, 9)
                for v in (h.lag_hours_p50, h.lag_hours_p95, h.lag_hours_p99)
            ],
            "days_late": h.days_late,
        }
        for h in hours_of(spark)
    }
    assert got == expected
    # Every kind of record is in the feed: unmeasured ones, and some late beyond 3 days.
    assert sum(v["rows"] - v["measured_rows"] for v in got.values()) > 0
    assert any(b > 3 for v in got.values() for b in v["days_late"])

    # One more file, for an hour the series holds: the extension covers that file, reads its
    # arrival date only, and recomputes the hour whole.
    from tardy.ingest import ingest

    _land(home.landing, "partner", 30, name="resent")
    ingest(spark, home.landing)
    more = extend(spark)
    hour = (START + timedelta(hours=30)).replace(tzinfo=None)
    assert (more.files, more.dates) == (1, {"bronze.pos_events": [hour.date().isoformat()]})
    again = {(h.source_system, h.arrival_hour): h.rows for h in hours_of(spark)}
    assert again == {**{k: v["rows"] for k, v in got.items()}, ("partner", hour): 6}


# The series as homes before its lags' sketches hold it.
SKETCHLESS_DDL = """
CREATE TABLE tardy.lateness_series (
  source_system STRING NOT NULL, arrival_hour TIMESTAMP NOT NULL, rows BIGINT NOT NULL,
  measured_rows BIGINT NOT NULL, lag_hours_p50 DOUBLE, lag_hours_p95 DOUBLE,
  lag_hours_p99 DOUBLE, days_late MAP<INT, BIGINT> NOT NULL
) USING delta
"""


def test_status_lateness_is_the_series_summed_also_after_an_older_series(fed) -> None:
    """``tardy status``'s lateness per source and overall is the series' hours added up (the
    percentiles from their merged sketches), equal to the landing files' own numbers; a
    series an older tardy wrote (no sketches, one hour only) is rebuilt first."""
    from tardy.consumers.status import lateness
    from tardy.lateness import series as lateness_series

    home, _, spark = fed
    spark.sql("DROP TABLE tardy.lateness_series")
    spark.sql(SKETCHLESS_DDL)
    spark.sql(
        "INSERT INTO tardy.lateness_series VALUES "
        "('pos', TIMESTAMP'2026-03-02 00:00:00', 1, 1, 1.0, 1.0, 1.0, MAP(0, 1L))"
    )
    lateness_series._ENSURED.clear()  # as a new process finds the home
    grace = 3
    sources, overall = lateness(spark, grace)

    lags, buckets, rows, without, latest = _landed(home.landing)
    for item in [*sources, overall]:
        keys = [k for k in rows if item.source_system in ("*", k[0])]
        mine = [lag for k in keys for lag in lags.get(k, [])]
        late = sum(n for k in keys for b, n in buckets.get(k, {}).items() if b > grace)
        n_rows, unset = sum(rows[k] for k in keys), sum(without[k] for k in keys)
        assert (item.rows, item.measured_rows, item.rows_without_event_ts) == (
            n_rows,
            len(mine),
            unset,
        ), item.source_system
        assert item.rows_event_after_arrival == n_rows - len(mine) - unset > 0
        assert (item.late_rows, item.late_ratio) == (late, late / len(mine))
        expected = np.percentile(mine, [50, 95, 99], method="inverted_cdf")
        got = [item.lag_hours_p50, item.lag_hours_p95, item.lag_hours_p99]
        assert got == pytest.approx(list(expected), rel=1e-12), item.source_system
        assert item.max_arrival_ts == max(latest[k] for k in keys).isoformat()
    assert [s.source_system for s in sources] == sorted(JUMP)
    assert "lag_sketch" in spark.table("tardy.lateness_series").columns


def test_a_lag_jump_of_six_hours_alerts_its_source_only_naming_its_owner(fed) -> None:
    from tardy.lateness.alerts import Metric, check_baseline, thresholds
    from tardy.lateness.baseline import measure
    from tardy.project.sources import declared

    _, context, spark = fed
    variables = context.config.variables
    owners = {name: s.owner for name, s in declared().sources.items()}
    assert {name: owners[name] for name in OWNERS} == OWNERS
    baseline = measure(spark, variables, owners, published=[])
    alerts = check_baseline(baseline, thresholds(variables, declared().tiers()))
    assert [(a.source, a.metric, a.owner) for a in alerts] == [
        ("pos", Metric.LAG_P99_VS_BASELINE, OWNERS["pos"])
    ]
    (alert,) = alerts
    # The window: the feed's last three hours; the partner's spike is in the last one only.
    last = START + timedelta(hours=HOURS - 1)
    assert alert.hours == tuple(
        (last - timedelta(hours=h)).replace(tzinfo=None).isoformat() for h in (2, 1, 0)
    )
    assert alert.value > 2 and OWNERS["pos"] in alert.message

    # The report reads the same: every hour of the series, the alert over its hours, and
    # each source's limit at twice the median of its hourly p99 lags before the window.
    from tardy.lateness.series import hours_of
    from tardy.reporting.gather import _lateness

    hours, drawn, limits = _lateness(context, spark, 3)
    assert [(h.source_system, h.arrival_hour) for h in hours] == [
        (h.source_system, h.arrival_hour.isoformat()) for h in hours_of(spark)
    ]
    assert [(a.source_system, a.metric, a.hours) for a in drawn] == [
        ("pos", "lag_p99_vs_baseline", list(alert.hours))
    ]
    window = last.replace(tzinfo=None) - timedelta(hours=2)  # the window's first hour
    expected: dict[str, list[float]] = {}
    for (source, hour), row in oracle(fed[0].landing).items():
        if window - timedelta(days=7) <= hour < window and row["lag"][2] is not None:
            expected.setdefault(source, []).append(row["lag"][2])
    assert limits == pytest.approx({s: 2 * float(np.median(v)) for s, v in expected.items()})


def _smallest_within(buckets: dict[int, int], target: float, low: int, high: int) -> int:
    measured = sum(buckets.values())
    for days in range(low, high + 1):
        if sum(n for b, n in buckets.items() if b > days) <= target * measured:
            return days
    return high


@pytest.mark.parametrize("daily_target", [0.05, 0.01])
def test_grace_suggests_the_window_the_landing_files_call_for(fed, daily_target: float) -> None:
    """Each source's suggestion is the smallest window within its tier's bounds whose late
    share (from the landing files, by the oracle's buckets) stays within its tier's target;
    the project's is the largest of them."""
    from tardy.lateness.alerts import thresholds
    from tardy.lateness.grace import fit
    from tardy.project.home import project_root
    from tardy.project.sources import declared

    home, context, spark = fed
    variables = dict(context.config.variables)
    tiers = {name: dict(tier) for name, tier in variables["lateness_alert_tiers"].items()}
    tiers["daily"]["late_ratio"] = daily_target
    variables["lateness_alert_tiers"] = tiers
    result = fit(spark, project_root(), variables, thresholds(variables, declared().tiers()))
    buckets: dict[str, dict[int, int]] = {}
    for (source, _), hour in oracle(home.landing).items():
        for b, n in hour["days_late"].items():
            mine = buckets.setdefault(source, {})
            mine[b] = mine.get(b, 0) + n
    expected = {}
    for source, mine in buckets.items():
        tier = declared().sources[source].lateness
        bounds = tiers[tier]["grace"]
        target = tiers[tier]["late_ratio"]
        expected[source] = _smallest_within(mine, target, bounds["min"], bounds["max"])
    assert {f.source_system: f.suggested for f in result.sources} == expected
    assert result.suggested == max(expected.values()) and result.current == 3
    if daily_target == 0.01:  # the five-day-late records call for a wider window
        assert expected["pos"] > 3


def test_grace_apply_yields_a_plan_that_changes_only_the_lookbacks(
    engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--apply``'s edit of project.yaml, planned on the small template's prod: the plan
    modifies directly exactly the models whose lookback derives from the window (their
    files say so), each lookback moved by the change; nothing is applied."""
    import re

    from children import SMALL, SMALL_CLOCK
    from test_code_change import copy_project

    from tardy.lateness.grace import write_grace_days

    project = copy_project(tmp_path / "project")
    write_grace_days(project, 5)
    derived = set()
    for path in (project / "models").rglob("*.sql"):
        text = path.read_text()
        if "@grace_lookback(" in text:
            derived.add(re.search(r"name ([\w.]+)", text).group(1))
    for path in (project / "python_models").glob("*.py"):
        text = path.read_text()
        if "lookback=grace_days(" in text:
            derived.add(re.search(r'@model\(\s*"([\w.]+)"', text).group(1))
    assert len(derived) >= 9, derived
    SMALL.copy_to(engine, tmp_path / "home")
    monkeypatch.setenv("TARDY_PROJECT", str(project))
    try:
        _, context, _ = engine.open(tmp_path / "home")
        plan = context.plan_builder(
            "prod", skip_tests=True, execution_time=SMALL_CLOCK
        ).build()  # the plan `sqlmesh plan` would show; nothing applied
        diff = plan.context_diff
        changed = {new.model.name: (new, old) for new, old in diff.modified_snapshots.values()}
        direct = {name for name, (new, _) in changed.items() if diff.directly_modified(new.name)}
        # Every model whose lookback derives from the window, its lookback moved by the
        # change; besides them only views (measured: silver.store_versions and
        # silver.store_quarantine, whose macros read the project's variables): no other
        # table is rebuilt.
        assert derived <= direct, (direct, derived)
        assert all(changed[name][0].model.kind.is_view for name in direct - derived), direct
        for name in derived:
            new, old = changed[name]
            assert new.model.kind.lookback == old.model.kind.lookback + 2, name
    finally:
        engine.release()


SILENT_HOURS = 30  # partner stops; pos keeps arriving


def test_a_source_silent_for_30_hours_alerts_naming_its_owner_and_not_before(
    engine, fed, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pos`` keeps arriving for 30 more hours while ``partner`` sends nothing: with now at
    the end of those hours, `tardy status --check` exits 4 with ``source_silent`` for
    ``partner`` only, naming its owner and its last arrival, silent exactly as long as the
    landing files say; with now before the gap, no source is silent. Runs last: it lands."""
    import tardy.consumers.status
    import tardy.project.context
    from tardy import cli
    from tardy.ingest import ingest

    home, context, spark = engine.open(fed[0].root)  # the test above opened another home
    for hour in range(HOURS, HOURS + SILENT_HOURS):
        _land(home.landing, "pos", hour, name="after")
    ingest(spark, home.landing)
    monkeypatch.setattr(tardy.project.context, "open_context", lambda *a, **k: context)
    # This home has bronze alone (no plan): status's per-tier part is its lateness over bronze,
    # measured for real; the alerts against history (the silence among them) are --check's own.
    monkeypatch.setattr(tardy.consumers.status, "status", _bronze_status)

    # The oracle: each source's last arrival from the landing folders' names.
    last: dict[str, datetime] = {}
    for path in home.landing.rglob("*.jsonl"):
        at = datetime.strptime(path.parent.name, "arrival_ts=%Y%m%dT%H%M%SZ")
        source = path.parent.parent.name
        last[source] = max(last.get(source, at), at)
    now = START.replace(tzinfo=None) + timedelta(hours=HOURS + SILENT_HOURS)

    def silent(at: datetime) -> list[dict]:
        monkeypatch.setenv("TARDY_NOW", at.isoformat() + "Z")
        code = cli.main(["status", "--check", "--json", "--fresh"])
        captured = capsys.readouterr()
        assert captured.out, captured.err
        alerts = json.loads(captured.out)["alerts"]
        assert code == (4 if alerts else 0)
        return [a for a in alerts if a["metric"] == "source_silent"]

    (alert,) = silent(now)
    assert (alert["source"], alert["owner"]) == ("partner", OWNERS["partner"])
    ended = last["partner"].replace(minute=0, second=0) + timedelta(hours=1)  # its hour's end
    assert alert["value"] == pytest.approx((now - ended).total_seconds() / 3600)
    assert alert["value"] > alert["threshold"] and alert["hours"] == [ended.isoformat()]
    assert OWNERS["partner"] in json.dumps(alert)
    # Before the gap (the end of partner's last hour), nobody is silent.
    assert silent(ended) == []


def _bronze_status(context, spark):
    from tardy.consumers.status import Status, lateness

    grace = int(context.config.variables["grace_days"])
    sources, overall = lateness(spark, grace)
    return Status(
        max_arrival_ts=overall.max_arrival_ts,
        data_watermark=None,
        grace_days=grace,
        last_final_day=None,
        first_provisional_day=None,
        sources=sources,
        overall=overall,
        pending_final={},
        pending_provisional={},
        absorbed_but_final={},
    )
