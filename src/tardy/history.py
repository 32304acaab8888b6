"""A transaction's story: every bronze record that arrived for it, and every restatement that
changed its rows (``tardy history <transaction_id>``).

The bronze records are read through the key index (``tardy.key_index``): its partition of the
key, then only the bronze arrival dates that hold the key's records, so the lookup does not
grow with history. A record belongs to the transaction when its natural key (its own id, or the
id it corrects or voids) is the transaction id. The restatements come from the change trail
(``tardy.engine.trail``): its rows whose ``row_key`` is the transaction id, in every model
keyed by it. The transaction's current rows are read from those models over the event days
its records name.

``tardy.render.render_history`` prints it.
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass, field
from datetime import date

from sqlglot import exp

from tardy.engine import sqlmesh_api, trail
from tardy.ingest.tables import indexed_table
from tardy.key_index import KEY_INDEX_TABLE, key_date_expression, records_of_literal_keys
from tardy.sql import date_list, literal

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

# The bronze columns a reader needs to follow a transaction, in the order shown.
RECORD_COLUMNS = (
    "arrival_ts",
    "record_type",
    "event_ts",
    "store_id",
    "product_id",
    "quantity",
    "unit_price",
    "discount",
    "corrects_transaction_id",
    "source_system",
    "source_file",
    "line_number",
    "parse_error",
)


@dataclass
class TransactionHistory:
    transaction_id: str
    records: list[dict[str, t.Any]]  # bronze, by arrival
    changes: list[dict[str, t.Any]]  # the change trail, oldest first
    current: dict[str, list[dict[str, t.Any]]] = field(default_factory=dict)  # model -> rows

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    @property
    def found(self) -> bool:
        return bool(self.records or self.changes)


def _text(row: dict[str, t.Any]) -> dict[str, t.Any]:
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in row.items()}


def records(spark: SparkSession, transaction_id: str) -> list[dict[str, t.Any]]:
    """Every bronze record of the transaction, oldest arrival first (two statements: the
    key index in the key's partition, bronze in the arrival dates it names); none when no
    source declares the key index."""
    table = indexed_table()
    if table is None:
        return []
    key_date = key_date_expression(exp.Literal.string(transaction_id)).sql("spark")
    dates = [
        row.arrival_date.isoformat()
        for row in spark.sql(
            f"SELECT DISTINCT arrival_date FROM {KEY_INDEX_TABLE} "
            f"WHERE key_date = {key_date} AND natural_key = {literal(transaction_id)}"
        ).collect()
    ]
    if not dates:
        return []
    where = records_of_literal_keys([transaction_id], dates).sql("spark")
    columns = ", ".join(RECORD_COLUMNS)
    rows = spark.sql(
        f"SELECT {columns} FROM {table} WHERE {where} ORDER BY arrival_ts, source_file, line_number"
    ).collect()
    return [_text(row.asDict()) for row in rows]


def keyed_models(context: Context) -> dict[str, str]:
    """Prod's models whose grain is one column, ``transaction_id``: model -> time column."""
    out = {}
    for snapshot in sqlmesh_api.prod_snapshots(context).values():
        if not snapshot.is_model or sqlmesh_api.grain(snapshot) != ["transaction_id"]:
            continue
        column = snapshot.model.time_column
        if column is not None:
            out[snapshot.model.name] = column.column.name
    return out


def history(context: Context, spark: SparkSession, transaction_id: str) -> TransactionHistory:
    found = records(spark, transaction_id)
    changes = [_text(row) for row in trail.changes(spark, row_key=transaction_id)]
    days = {date.fromisoformat(r["event_ts"][:10]) for r in found if r["event_ts"]}
    days |= {date.fromisoformat(c["event_date"]) for c in changes if c["event_date"]}
    current = {}
    for model, column in sorted(keyed_models(context).items()):
        rows = spark.sql(
            f"SELECT * FROM {model} WHERE {date_list(f'`{column}`', days)} "
            f"AND transaction_id = {literal(transaction_id)}"
        ).collect()
        current[model] = [_text(row.asDict()) for row in rows]
    return TransactionHistory(transaction_id, found, changes, current)
