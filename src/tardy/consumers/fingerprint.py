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
    return {table: table_fingerprint(spark, table) for table in model_tables(context)}
