"""The readable summary of a data home: rows per layer, lateness (every source, and each),
quarantine (every source's, by reason), the headline model's weekly totals.

``tardy summary`` prints it with ``tardy.rendering.summary.render_summary``.
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass, field

from pyspark.sql import SparkSession

from tardy.ingest.tables import arrivals, bronze_tables
from tardy.quarantine.listing import Count
from tardy.sql import literal

if t.TYPE_CHECKING:
    from sqlmesh import Context


@dataclass
class Summary:
    rows: dict[str, int]
    lateness: dict[str, object]  # over every source; ``by_source``: the same per source
    quarantined: dict[str, int]  # by reason, every source's quarantine
    # Per week (Monday first) of the headline model (``tardy.project.headline``): its rows and
    # each of its measures summed (decimal text), the headline's measure first.
    weekly: list[dict[str, object]]
    quarantined_by_model: dict[str, dict[str, int]] = field(default_factory=dict)
    # Open and reviewed per source and reason (``tardy quarantine``).
    quarantine_review: list[Count] = field(default_factory=list)
    headline_model: str = ""  # the model ``weekly`` is of

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


# A record is late when it arrived after its event day, beyond grace when more than the grace
# window's days after it; only records with an event time not after their arrival count.
LATENESS_SQL = """
SELECT
  source_system,
  GROUPING(source_system) = 1 AS is_total,
  COUNT(*) AS records,
  COUNT_IF(arrival_date > CAST(event_ts AS DATE)) AS late,
  COUNT_IF(DATEDIFF(arrival_date, CAST(event_ts AS DATE)) > {grace_days}) AS beyond_grace,
  PERCENTILE(UNIX_SECONDS(arrival_ts) - UNIX_SECONDS(event_ts), 0.95) / 3600 AS p95_h
FROM ({bronze})
WHERE event_ts IS NOT NULL AND event_ts <= arrival_ts
GROUP BY ROLLUP(source_system)
"""


def summarize(context: Context, spark: SparkSession, grace_days: int) -> Summary:
    from tardy.project.headline import headline
    from tardy.quarantine.listing import counts, read
    from tardy.reporting.gather import quarantine_models

    rows = {table: spark.table(table).count() for table in layers(context)}
    # Every declared source's records, and all of them (the ROLLUP's total), in one statement.
    lateness: dict[str, object] = {"grace_days": grace_days}
    by_source: dict[str, dict[str, object]] = {}
    for row in spark.sql(
        LATENESS_SQL.format(bronze=arrivals(spark), grace_days=grace_days)
    ).collect():
        records = int(row.records) or 1
        shares: dict[str, object] = {
            "records_with_event_ts": int(row.records),
            "late_share": round(int(row.late) / records, 4),
            "beyond_grace_share": round(int(row.beyond_grace) / records, 4),
            "p95_lag_hours": round(float(row.p95_h or 0), 1),
        }
        if row.is_total:
            lateness.update(shares)
        else:
            by_source[row.source_system] = shares
    if "records_with_event_ts" not in lateness:  # no record with an event time yet
        lateness.update(records_with_event_ts=0, late_share=0.0, beyond_grace_share=0.0)
        lateness["p95_lag_hours"] = 0.0
    lateness["by_source"] = by_source
    # Every source's quarantine (the models with a ``reason`` column), by model and reason,
    # in one statement.
    reasons = " UNION ALL ".join(
        f"SELECT {literal(model)} AS model, reason FROM {model}"
        for model in quarantine_models(context)
    )
    by_model: dict[str, dict[str, int]] = {}
    if reasons:
        query = f"SELECT model, reason, COUNT(*) AS n FROM ({reasons}) GROUP BY model, reason"
        for row in spark.sql(query + " ORDER BY model, reason").collect():
            by_model.setdefault(row.model, {})[row.reason] = int(row.n)
    quarantined: dict[str, int] = {}
    for reason, n in sorted((r, n) for by in by_model.values() for r, n in by.items()):
        quarantined[reason] = quarantined.get(reason, 0) + n
    weekly = _weekly(context, spark)
    review = counts(read(context, spark).records)
    lead = headline(context)
    return Summary(
        rows, lateness, quarantined, weekly, by_model, review, lead.model if lead else ""
    )


def _weekly(context: Context, spark: SparkSession) -> list[dict[str, object]]:
    """The headline model per week: ``week_start``, ``rows`` and each measure's sum (one
    statement; none before its table exists)."""
    from tardy.project.headline import headline

    lead = headline(context)
    if lead is None or not spark.catalog.tableExists(lead.model):
        return []
    measures = sorted(lead.measures, key=lambda m: m != lead.measure)
    sums = "".join(f", CAST(SUM(`{m}`) AS STRING) AS `{m}`" for m in measures)
    rows = spark.sql(
        f"SELECT CAST(DATE_TRUNC('WEEK', `{lead.time_column}`) AS DATE) AS week_start, "
        f"COUNT(*) AS rows{sums} FROM {lead.model} GROUP BY 1 ORDER BY 1"
    ).collect()
    return [
        {
            "week_start": row.week_start.isoformat(),
            "rows": int(row.rows),
            **{m: row[m] if row[m] is not None else "0" for m in measures},
        }
        for row in rows
    ]
