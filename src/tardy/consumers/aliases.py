"""What consumers read by name: the latest publication, or only its final periods.

For every published model (tag ``published``, ``tardy.consumers.versions.published_snapshots``):

- ``<schema>_published.<table>`` (``tardy.consumers.versions``): the latest publication, provisional
  days included: speed;
- ``<schema>_final.<table>`` (here): the same rows of the periods that are final by the rule
  ``tardy status`` uses (``tardy.consumers.status``): a day D is final when ``D < date(W)``, ``W =
  max(arrival_ts over every declared bronze table) - grace_days``; a period (a week, a
  month) when its last day is. The view computes ``W`` from bronze when it is read, so it is
  never stale: accuracy.

A period ``k`` of a model ends before the day ``date(W)`` exactly when ``k < key(date(W))``,
``key`` being the model's time column as a function of the most upstream day
(``Closure.key_of``, from SQLMesh's column lineage: a weekly rollup's ``@period_first_day``):
no calendar rule is written here. A model whose time column derives from no parent (a Python
model) is keyed by the day itself.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp

from tardy.ingest.tables import arrivals

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

    from tardy.engine.closure import Closure

FINAL_SUFFIX = "_final"  # gold.daily_sales -> gold_final.daily_sales


def final_name(table_name: str) -> str:
    schema, table = table_name.split(".", 1)
    return f"{schema}{FINAL_SUFFIX}.{table}"


def final_view_sql(
    closure: Closure, table_name: str, source: str, grace_days: int, bronze: str
) -> str:
    """The ``CREATE OR REPLACE VIEW`` of ``table_name``'s final alias over ``source`` (its
    published view); ``bronze``: every declared bronze table's arrivals (``arrivals``)."""
    from tardy.engine import sqlmesh_api

    column = sqlmesh_api.time_column(closure.snapshots[table_name])
    key = closure.key_of(table_name, exp.column("first_provisional_day")).sql("spark")
    return f"""
CREATE OR REPLACE VIEW {final_name(table_name)}
COMMENT 'the final periods of {source}: those whose last day lies before max(bronze arrival_ts)
- {grace_days} grace days, computed when read'
AS
SELECT p.*
FROM {source} AS p
CROSS JOIN (
  SELECT {key} AS first_provisional_key
  FROM (
    SELECT CAST(MAX(arrival_ts) - MAKE_DT_INTERVAL({grace_days}) AS DATE) AS first_provisional_day
    FROM ({bronze})
  )
) AS w
WHERE p.`{column}` < w.first_provisional_key
"""


def point_final(context: Context, spark: SparkSession, tables: t.Iterable[str]) -> list[str]:
    """(Re)create the final alias of each published model in ``tables`` over its published
    view; returns their names. A view's schema is created when missing."""
    from tardy.consumers.versions import create_view, view_name
    from tardy.engine import sqlmesh_api
    from tardy.engine.closure import Closure

    closure = Closure(context, sqlmesh_api.model_snapshots(context))
    grace, bronze = int(context.config.variables["grace_days"]), arrivals(spark)
    names = []
    for table_name in tables:
        create = final_view_sql(closure, table_name, view_name(table_name), grace, bronze)
        create_view(spark, final_name(table_name), create)
        names.append(final_name(table_name))
    return names
