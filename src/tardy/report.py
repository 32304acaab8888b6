"""The readable summary of a data home: rows per layer, lateness, quarantine, weekly totals.

``tardy summary`` prints it with ``tardy.render.render_summary``.
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass

from pyspark.sql import SparkSession

from tardy.engine.delta import single_row
from tardy.ingest.tables import bronze_tables, main_table

if t.TYPE_CHECKING:
    from sqlmesh import Context


@dataclass
class Summary:
    rows: dict[str, int]
    lateness: dict[str, object]
    quarantined: dict[str, int]
    weekly: list[dict[str, object]]

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def layers(context: Context) -> list[str]:
    """Every layer's tables, upstream first: the bronze tables the declared sources land in
    (``sources.yaml``), then each model that is neither external nor a view
    (``context.dag``). The key index and the ledger are tardy's bookkeeping, not layers."""
    models = {m.fqn: m for m in context.models.values()}
    return [t.name for t in bronze_tables()] + [
        models[fqn].name
        for fqn in context.dag
        if fqn in models and not models[fqn].kind.is_view and not models[fqn].kind.is_external
    ]


def summarize(context: Context, spark: SparkSession, grace_days: int) -> Summary:
    from tardy.reporting import quarantine_models

    rows = {table: spark.table(table).count() for table in layers(context)}
    bronze = spark.sql(
        f"""
        SELECT
          COUNT(*) AS records,
          COUNT_IF(arrival_date > CAST(event_ts AS DATE)) AS late,
          COUNT_IF(DATEDIFF(arrival_date, CAST(event_ts AS DATE)) > {grace_days}) AS beyond_grace,
          PERCENTILE(UNIX_SECONDS(arrival_ts) - UNIX_SECONDS(event_ts), 0.95) / 3600 AS p95_h
        FROM {main_table()}
        WHERE event_ts IS NOT NULL AND event_ts <= arrival_ts
        """
    )
    late = single_row(bronze)
    records = int(late.records) or 1
    lateness: dict[str, object] = {
        "records_with_event_ts": int(late.records),
        "late_share": round(int(late.late) / records, 4),
        "beyond_grace_share": round(int(late.beyond_grace) / records, 4),
        "grace_days": grace_days,
        "p95_lag_hours": round(float(late.p95_h or 0), 1),
    }
    # Every source's quarantine (the models with a ``reason`` column), by reason, in one
    # statement.
    reasons = " UNION ALL ".join(
        f"SELECT reason FROM {model}" for model in quarantine_models(context)
    )
    quarantined = (
        {
            row.reason: int(row.n)
            for row in spark.sql(
                f"SELECT reason, COUNT(*) AS n FROM ({reasons}) GROUP BY reason ORDER BY reason"
            ).collect()
        }
        if reasons
        else {}
    )
    weekly = [
        {
            "week_start": row.week_start.isoformat(),
            "transactions": int(row.transactions),
            "revenue": str(row.revenue),
        }
        for row in spark.sql(
            """
            SELECT week_start, SUM(transactions) AS transactions, SUM(revenue) AS revenue
            FROM gold.weekly_store_revenue GROUP BY week_start ORDER BY week_start
            """
        ).collect()
    ]
    return Summary(rows, lateness, quarantined, weekly)
