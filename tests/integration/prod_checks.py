"""Checks of a data home's prod against the independent oracle (``oracle.py``), the stock
restatement of bronze, and the batches the restatement tests land: shared by the long story
(``test_lakehouse``, on the ``timeline`` template) and its fast-tier guards
(``test_small_story``, on the ``small`` template).
"""

from __future__ import annotations

import json
import typing as t
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

import oracle
import pandas as pd
from timeline import last_complete_day

from tardy.consumers.fingerprint import fingerprints
from tardy.ingest import ingest
from tardy.ingest.landing import arrival_dir_name

Daily = dict[tuple[date, int], tuple[int, int, Decimal]]


def expected_daily(files: t.Iterable[Path], landing: Path) -> Daily:
    day = oracle.daily(oracle.silver(oracle.records(sorted(files), landing)))
    return {
        key: (int(row.transactions), int(row["items"]), row.revenue) for key, row in day.iterrows()
    }


def actual_daily(spark: t.Any) -> Daily:
    rows = spark.table("gold.daily_store_revenue").collect()
    return {(r.event_date, r.store_id): (r.transactions, r["items"], r.revenue) for r in rows}


def content_hashes(context: t.Any, spark: t.Any) -> dict[str, dict[str, object]]:
    return {name: fp.as_dict() for name, fp in fingerprints(context, spark).items()}


def restatement_start(day: date, first: date) -> date:
    """Weekly and monthly rollups rebuild a period only from its first day (see their models);
    never before the data's ``first`` day."""
    return max(first, min(day - timedelta(days=day.weekday()), day.replace(day=1)))


def restate_bronze(context: t.Any, first_day: date, clock: datetime, first: date) -> None:
    """Stock `sqlmesh plan --restate-model bronze.pos_events --start .. --end ..`."""
    context.plan(
        "prod",
        restate_models=["bronze.pos_events"],
        start=restatement_start(first_day, first).isoformat(),
        end=last_complete_day(clock),
        execution_time=clock,
        auto_apply=True,
        no_prompts=True,
    )


def assert_prod_equals_recomputation(
    spark: t.Any, files: t.Iterable[Path], landing: Path, first: date, through: date
) -> None:
    """Silver, its quarantine, daily, weekly and monthly gold and the features (``first`` to
    ``through``) equal the oracle's recomputation from ``files``."""
    recs = oracle.records(sorted(files), landing)
    sil = oracle.silver(recs)
    actual_silver = spark.table("silver.sales_transactions").toPandas().set_index("transaction_id")
    columns = ["event_date", "store_id", "quantity", "unit_price", "discount", "net_amount"]
    pd.testing.assert_frame_equal(
        actual_silver.sort_index()[columns + ["record_type"]],
        sil[columns + ["record_type"]].astype(actual_silver[columns + ["record_type"]].dtypes),
        check_names=False,
    )
    assert list(actual_silver.sort_index().source_record_id) == list(sil.record_id)

    quarantined = {
        r.reason: r.n
        for r in spark.sql(
            "SELECT reason, COUNT(*) AS n FROM silver.sales_quarantine GROUP BY reason"
        ).collect()
    }
    assert quarantined == oracle.quarantine_counts(recs)

    day = oracle.daily(sil)
    assert actual_daily(spark) == {
        k: (int(r.transactions), int(r["items"]), r.revenue) for k, r in day.iterrows()
    }
    for unit, table, column in (
        ("week", "gold.weekly_store_revenue", "week_start"),
        ("month", "gold.monthly_store_revenue", "month_start"),
    ):
        expected = {
            k: (int(r.transactions), int(r["items"]), r.revenue)
            for k, r in oracle.rollup(day, unit).iterrows()
        }
        actual = {
            (r[column], r.store_id): (r.transactions, r["items"], r.revenue)
            for r in spark.table(table).collect()
        }
        assert actual == expected, table

    features = {
        (r.feature_date, r.store_id): (r.revenue_7d, r.revenue_28d, r.transactions_28d)
        for r in spark.table("gold.store_features").collect()
    }
    assert features == oracle.features(day, first, through)


def sale_line(row: t.Any, record_type: str, event_ts: datetime) -> str:
    """A landing line re-sending silver's ``row`` as ``record_type`` at ``event_ts``."""
    return json.dumps(
        {
            "transaction_id": row.transaction_id,
            "record_type": record_type,
            "store_id": row.store_id,
            "product_id": row.product_id,
            "quantity": row.quantity,
            "unit_price": float(row.unit_price),
            "discount": float(row.discount),
            "event_ts": event_ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )


def empty_a_day(
    spark: t.Any, landing: Path, day: date, to_day: date, clock: datetime
) -> tuple[Path, str]:
    """Land a batch that voids every transaction of `day` but one, and moves that one to
    `to_day` with a correction: after it, `day` has no sale at all. Returns the file and the
    moved transaction id."""
    rows = spark.sql(
        f"SELECT * FROM silver.sales_transactions WHERE event_date = DATE'{day}' "
        "ORDER BY transaction_id"
    ).collect()
    assert len(rows) > 1
    moved, voided = rows[0], rows[1:]
    batch = landing / "pos" / arrival_dir_name(clock - timedelta(hours=1))
    batch.mkdir(parents=True, exist_ok=True)
    path = batch / f"manual-{day}.jsonl"
    lines = [sale_line(r, "void", r.event_ts) for r in voided]
    lines.append(sale_line(moved, "correction", datetime.combine(to_day, time(12))))
    path.write_text("\n".join(lines) + "\n")
    assert ingest(spark, landing).files_ingested == 1
    return path, moved.transaction_id


def rows_on(spark: t.Any, table: str, column: str, day: date) -> int:
    return spark.sql(f"SELECT 1 FROM {table} WHERE {column} = DATE'{day}'").count()


def days_of_transaction(spark: t.Any, transaction_id: str) -> list[date]:
    return [
        r.event_date
        for r in spark.sql(
            "SELECT event_date FROM silver.sales_transactions "
            f"WHERE transaction_id = '{transaction_id}'"
        ).collect()
    ]


def physical_table(context: t.Any, model: str) -> str:
    """The Spark name of ``model``'s prod physical table."""
    from tardy.engine.sqlmesh_api import prod_snapshots, spark_name

    return spark_name(prod_snapshots(context)[model].table_name())


# A new sale of two items at 5.00 (a landing line without its event time), for late batches.
LATE_SALE = {
    "transaction_id": "LATE-1",
    "record_type": "sale",
    "store_id": 1,
    "product_id": 1,
    "quantity": 2,
    "unit_price": 5.0,
    "discount": 0.0,
}


def view_hash(spark: t.Any, name: str) -> tuple[int, int]:
    """Row count and an order-free content hash of a table or view."""
    row = spark.sql(
        f"SELECT COUNT(*), SUM(CAST(xxhash64(*) AS DECIMAL(38, 0))) FROM {name}"
    ).first()
    return int(row[0]), int(row[1] or 0)
