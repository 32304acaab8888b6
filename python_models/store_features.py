"""gold.store_features: rolling 7- and 28-day revenue features per store and day (PySpark).

Loaded through ``models/python_models.py`` (SQLMesh only imports ``models/``).
"""

from __future__ import annotations

import typing as t
from datetime import datetime, timedelta
from pathlib import Path

from sqlglot import parse_one
from sqlmesh import ExecutionContext, model
from sqlmesh.core.model.kind import ModelKindName

from tardy.lateness.grace import grace_days

WINDOW_DAYS = 28


@model(
    "gold.store_features",
    kind=dict(
        name=ModelKindName.INCREMENTAL_BY_TIME_RANGE,
        time_column="feature_date",
        # The grace window (`grace_days` in project.yaml, the one place: `tardy grace`): each
        # run recomputes the features of the days whose daily revenue a late row may still
        # have changed.
        lookback=grace_days(Path(__file__).resolve().parents[1]),
    ),
    cron="@daily",
    owner="data_science",
    # A feature day reads the WINDOW_DAYS daily days ending on it: tardy's restatement closure
    # (tardy.engine.closure) restates the WINDOW_DAYS feature days after a changed daily day.
    # Published too: consumers read its versions by number (tardy publish, tardy versions).
    # Its own measure: what a diff, a restatement and a release note show (tardy.project.headline).
    tags=[f"restate_window={WINDOW_DAYS}", "published", "measure=revenue_28d"],
    grain=["feature_date", "store_id"],
    depends_on=["gold.daily_store_revenue"],
    columns={
        "feature_date": "date",
        "store_id": "int",
        "revenue_1d": "decimal(18,2)",
        "revenue_7d": "decimal(18,2)",
        "revenue_28d": "decimal(18,2)",
        "transactions_7d": "bigint",
        "transactions_28d": "bigint",
        "avg_ticket_28d": "decimal(18,2)",
        "active_days_28d": "int",
    },
    column_descriptions={
        "feature_date": "Day the features describe; windows end on and include it",
        "store_id": "Store",
        "revenue_1d": "Revenue of the feature day (0 when the store sold nothing)",
        "revenue_7d": "Revenue of the 7 days ending on feature_date",
        "revenue_28d": "Revenue of the 28 days ending on feature_date",
        "transactions_7d": "Transactions of the 7 days ending on feature_date",
        "transactions_28d": "Transactions of the 28 days ending on feature_date",
        "avg_ticket_28d": "revenue_28d / transactions_28d",
        "active_days_28d": "Days with at least one sale among the 28",
    },
    audits=[
        ("not_null", {"columns": parse_one("(feature_date, store_id, revenue_28d)")}),
        ("unique_combination_of_columns", {"columns": parse_one("(feature_date, store_id)")}),
    ],
    description=(
        "Rolling store features for forecasting. A change to a day's revenue changes the "
        f"features of that day and the {WINDOW_DAYS - 1} days after it."
    ),
)
def execute(
    context: ExecutionContext,
    start: datetime,
    end: datetime,
    execution_time: datetime,
    **kwargs: t.Any,
) -> t.Any:
    from pyspark.sql import functions as F

    first, last = start.date(), end.date()
    daily = (
        context.spark.table(context.resolve_table("gold.daily_store_revenue"))
        .where(F.col("event_date").between(first - timedelta(days=WINDOW_DAYS - 1), last))
        .select("event_date", "store_id", "revenue", "transactions")
        .alias("d")
    )
    days = context.spark.sql(
        f"SELECT explode(sequence(DATE'{first}', DATE'{last}', INTERVAL 1 DAY)) AS feature_date"
    )
    spine = days.crossJoin(daily.select("store_id").distinct()).alias("s")
    joined = spine.join(
        daily,
        (F.col("d.store_id") == F.col("s.store_id"))
        & F.col("d.event_date").between(
            F.date_sub(F.col("s.feature_date"), WINDOW_DAYS - 1), F.col("s.feature_date")
        ),
    )
    age = F.datediff(F.col("s.feature_date"), F.col("d.event_date"))

    def window_sum(column: str, days: int) -> t.Any:
        return F.sum(F.when(age < days, F.col(f"d.{column}")).otherwise(0))

    revenue_28d = window_sum("revenue", 28).cast("decimal(18,2)")
    transactions_28d = window_sum("transactions", 28).cast("bigint")
    # An empty result is still returned (never yielded nothing), so that the interval is
    # replaced by it: SQLMesh skips the write when a Python model yields no DataFrame.
    return joined.groupBy(F.col("s.feature_date"), F.col("s.store_id")).agg(
        window_sum("revenue", 1).cast("decimal(18,2)").alias("revenue_1d"),
        window_sum("revenue", 7).cast("decimal(18,2)").alias("revenue_7d"),
        revenue_28d.alias("revenue_28d"),
        window_sum("transactions", 7).cast("bigint").alias("transactions_7d"),
        transactions_28d.alias("transactions_28d"),
        F.when(transactions_28d > 0, revenue_28d / transactions_28d)
        .cast("decimal(18,2)")
        .alias("avg_ticket_28d"),
        F.count_distinct(F.col("d.event_date")).cast("int").alias("active_days_28d"),
    )
