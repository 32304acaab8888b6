"""Content hashes of the project's tables: order-independent, comparable across data homes.

A table's fingerprint is its row count and the sum of ``xxhash64`` over every column of every
row (as DECIMAL(38,0), so it cannot overflow): equal content gives equal fingerprints
whatever the file layout, partitioning or Delta history.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from tardy.engine.delta import single_row

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


@dataclass(frozen=True)
class Fingerprint:
    rows: int
    hash: str

    def as_dict(self) -> dict[str, object]:
        return {"rows": self.rows, "hash": self.hash}


def table_fingerprint(spark: SparkSession, table: str) -> Fingerprint:
    columns = ", ".join(f"`{name}`" for name in spark.table(table).columns)
    hashed = f"SUM(CAST(xxhash64({columns}) AS DECIMAL(38,0)))"
    row = single_row(spark.sql(f"SELECT COUNT(*) AS n, {hashed} AS h FROM {table}"))
    return Fingerprint(rows=int(row.n), hash=str(row.h if row.h is not None else 0))


def model_tables(context: Context) -> list[str]:
    """The project's SQLMesh models (not external ones), by their environment view names."""
    return sorted(
        model.name
        for model in context.models.values()
        if not model.kind.is_external and not model.kind.is_symbolic
    )


def fingerprints(context: Context, spark: SparkSession) -> dict[str, Fingerprint]:
    """Every model's fingerprint in one statement (a ``UNION ALL`` of each table's count and
    hash sum; ``xxhash64(*)`` is ``xxhash64`` of the table's columns in order, the same value
    as ``table_fingerprint``'s)."""
    tables = model_tables(context)
    if not tables:
        return {}
    hashed = "SUM(CAST(xxhash64(*) AS DECIMAL(38,0)))"
    query = " UNION ALL ".join(
        f"SELECT {i} AS i, COUNT(*) AS n, {hashed} AS h FROM {table}"
        for i, table in enumerate(tables)
    )
    rows = {row.i: row for row in spark.sql(query).collect()}
    return {
        table: Fingerprint(rows=int(rows[i].n), hash=str(rows[i].h if rows[i].h is not None else 0))
        for i, table in enumerate(tables)
    }
