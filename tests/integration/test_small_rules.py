"""Rules of the engine on the ``small`` template (two stores, ten days, prod planned), in the
worker's own engine: the fast tier's guards of rules whose fuller stories are long
(``test_lakehouse`` on the ``timeline`` template).

- Exact interval writes: tardy's insert-overwrite strategy is the adapter's, and every
  overwrite of silver that the template's stock plan made carries its interval predicate
  (``REPLACE WHERE``; docs/facts.md, fact 2).
- The circuit breaker: late sales that move a closed day by more than the threshold stop the
  restatement before promotion, prod unchanged and the trip logged; accepted, the same
  change is promoted.
- A verbatim resend (a sale sent again byte for byte) restates nothing; the same line with
  another quantity is a change of its day.
- A blocking audit that fails on the staged rows stops the restatement, prod unchanged and
  the failure logged.
"""

from __future__ import annotations

import json
import typing as t
from datetime import timedelta
from pathlib import Path

import pytest
from children import SMALL, SMALL_CLOCK, SMALL_CONFIG, late_sales
from cluster_story import silver_writes


@pytest.fixture(scope="module")
def home_root(engine: t.Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small-rules") / "home"
    SMALL.copy_to(engine, root)
    return root


@pytest.fixture(scope="module")
def opened(engine: t.Any, home_root: Path) -> t.Any:
    return engine.open(home_root)


def _prints(context: t.Any, spark: t.Any) -> dict[str, t.Any]:
    from tardy.consumers.fingerprint import fingerprints

    return {name: fp.as_dict() for name, fp in fingerprints(context, spark).items()}


def test_every_overwrite_of_silver_carries_its_interval_predicate(opened: t.Any) -> None:
    from tardy.project import exact_writes

    _, context, spark = opened
    assert exact_writes.is_enabled()
    assert context.engine_adapter.INSERT_OVERWRITE_STRATEGY is exact_writes.STRATEGY
    overwrites = [w for w in silver_writes(spark) if w.get("mode") == "Overwrite"]
    assert overwrites, "the template's plan wrote silver"
    assert all("event_date" in w.get("predicate", "") for w in overwrites), overwrites


def test_the_breaker_stops_a_large_change_and_accepting_it_promotes(opened: t.Any) -> None:
    from tardy.engine import log
    from tardy.engine.outcome import BreakerTripped
    from tardy.ingest import ingest
    from tardy.ingest.landing import arrival_dir_name
    from tardy.requests.restatements import restate

    home, context, spark = opened
    assert restate(context, spark, "baseline").status in ("nothing_to_do", "promoted")
    batch = home.landing / "pos" / arrival_dir_name(SMALL_CLOCK.replace(hour=2))
    batch.mkdir(parents=True)
    (batch / "late.jsonl").write_text(late_sales("BIG", SMALL_CONFIG.start, days=(3,)))
    assert ingest(spark, home.landing).files_ingested == 1
    before = _prints(context, spark)

    with pytest.raises(BreakerTripped, match="closed day"):
        restate(context, spark, "late sales", threshold=0.001)
    assert _prints(context, spark) == before  # prod untouched
    tripped = [row for row in log.entries(spark) if row["action"] == "breaker_tripped"]
    assert len(tripped) == 1, tripped

    done = restate(
        context, spark, "late sales, reviewed", threshold=0.001, accept_large_change=True
    )
    assert str(done.status) == "promoted", done.status
    assert done.diff is not None and done.diff.breaker, "the accepted change tripped it"
    late_day = (SMALL_CONFIG.start + timedelta(days=3)).isoformat()
    assert {trip.day for trip in done.diff.breaker} == {late_day}
    after = _prints(context, spark)
    assert after["gold.daily_store_revenue"] != before["gold.daily_store_revenue"]


def test_a_verbatim_resend_restates_nothing(opened: t.Any) -> None:
    """A closed day's sale sent again byte for byte (a new arrival, another file): no root,
    nothing restated, prod and its versions unchanged. The same line with another quantity
    (the control) is a change of that day."""
    from prod_checks import content_hashes

    from tardy.engine.detect import detect
    from tardy.ingest import ingest
    from tardy.ingest.landing import arrival_dir_name
    from tardy.requests.restatements import restate

    home, context, spark = opened
    day = SMALL_CONFIG.start + timedelta(days=2)
    sale = spark.sql(
        "SELECT s.transaction_id, b.source_file, b.line_number "
        "FROM silver.sales_transactions s JOIN bronze.pos_events b "
        f"ON b.record_id = s.source_record_id WHERE s.event_date = DATE'{day}' "
        "AND s.record_type = 'sale' AND s.version_count = 1 ORDER BY s.transaction_id"
    ).first()
    assert sale is not None, "the template has a sale of a closed day"
    path = Path(sale.source_file)
    path = path if path.is_absolute() else home.landing / path
    line = path.read_text().splitlines()[sale.line_number - 1]
    assert sale.transaction_id in line
    before = content_hashes(context, spark)

    resend = home.landing / "pos" / arrival_dir_name(SMALL_CLOCK.replace(hour=3))
    resend.mkdir(parents=True)
    (resend / "resend.jsonl").write_text(line + "\n")
    assert ingest(spark, home.landing).files_ingested == 1
    assert not any(detect(context, spark).roots.values())
    outcome = restate(context, spark, "a verbatim resend")
    assert str(outcome.status) == "nothing_to_do" and outcome.promoted == {}
    assert content_hashes(context, spark) == before

    changed = resend.with_name(arrival_dir_name(SMALL_CLOCK.replace(hour=3, minute=30)))
    changed.mkdir(parents=True)
    (changed / "changed.jsonl").write_text(json.dumps({**json.loads(line), "quantity": 99}))
    assert ingest(spark, home.landing).files_ingested == 1
    roots = detect(context, spark).roots
    assert roots["silver.sales_transactions"] == [[day.isoformat(), day.isoformat()]]
    done = restate(context, spark, "the control: a changed quantity", accept_large_change=True)
    assert str(done.status) == "promoted"


def test_a_failed_blocking_audit_stops_the_restatement_with_prod_untouched(opened: t.Any) -> None:
    """Prod's quarantine of a day loses its rows, and a late sale lands on that day: silver's
    reconciliation with bronze cannot hold for it, so the restatement stops before promotion,
    prod as it was, and the log names the audit."""
    from prod_checks import physical_table

    from tardy.engine import log
    from tardy.engine.outcome import RestatementError
    from tardy.ingest import ingest
    from tardy.ingest.landing import arrival_dir_name
    from tardy.requests.restatements import restate

    home, context, spark = opened
    quarantine = physical_table(context, "silver.sales_quarantine")
    # A closed day's (restated, not left to the next run): the last quarantined before day 6.
    closed = SMALL_CONFIG.start + timedelta(days=5)
    q_day = spark.sql(
        f"SELECT MAX(report_date) FROM {quarantine} WHERE report_date <= DATE'{closed}'"
    ).first()[0]
    assert q_day is not None, "the template quarantined no sale of a closed day"
    batch = home.landing / "pos" / arrival_dir_name(SMALL_CLOCK.replace(hour=4))
    batch.mkdir(parents=True)
    offset = (q_day - SMALL_CONFIG.start).days
    (batch / "audit.jsonl").write_text(late_sales("AUDIT", SMALL_CONFIG.start, (offset,), 1))
    assert ingest(spark, home.landing).files_ingested == 1
    version = spark.sql(f"DESCRIBE HISTORY {quarantine} LIMIT 1").first().version
    spark.sql(f"DELETE FROM {quarantine} WHERE report_date = DATE'{q_day}'")
    damaged = _prints(context, spark)
    try:
        with pytest.raises(
            RestatementError,
            match=f"reconciles_with_bronze on silver.sales_transactions for {q_day}",
        ):
            restate(context, spark, "audit gate", accept_large_change=True)
        assert _prints(context, spark) == damaged  # prod untouched
        failed = [e for e in log.entries(spark) if e["action"] == "audit_failed"]
        assert len(failed) == 1, failed
        assert {(f["audit"], f["model"]) for f in failed[0]["audit_results"][0]["failed"]} == {
            ("reconciles_with_bronze", "silver.sales_transactions")
        }
    finally:
        spark.sql(f"RESTORE TABLE {quarantine} TO VERSION AS OF {version}")


def test_a_fact_reader_whose_lookback_misses_the_grace_window_is_refused(
    opened: t.Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watermark advances past in-grace records because each reader's next run
    recomputes the grace window: with a grace window longer than the readers' lookback (3),
    detection refuses, naming them; with the project's own (3) it answers."""
    from tardy.engine.detect import detect
    from tardy.engine.facts import FactSourceError

    _, context, spark = opened
    assert int(context.config.variables["grace_days"]) == 3
    assert detect(context, spark).bronze_version >= 0
    monkeypatch.setitem(context.config.variables, "grace_days", 4)
    with pytest.raises(FactSourceError, match=r"silver\.sales_transactions.*grace_days \(4\)"):
        detect(context, spark)
