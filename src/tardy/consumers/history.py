"""A key's story: every bronze record that arrived for it, and every restatement that changed
its rows (``tardy history <key>``). A key is a declared fact source's natural key: a sale's
transaction id, a refund's id.

The fact sources, their bronze tables and the models reading them by key come from
``sources.yaml`` and the DAG (``tardy.engine.facts``). A record belongs to the key when its
natural key (the declaration's ``natural_key``: its own id, or the id it corrects) is the key.
In a key-indexed source the records are read through the key index (``tardy.key_index``):
its partition of the key, then only the bronze arrival dates that hold the key's records, so
the lookup does not grow with history; in another source, by its natural key over its bronze
table (one scan). The restatements come from the change trail (``tardy.engine.trail``): its
rows whose ``row_key`` is the key. The key's current rows are read from the models keyed by
it over the event days its records and changes name.

``tardy.rendering.history.render_history`` prints it.
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass, field
from datetime import date

from sqlglot import exp

from tardy.engine import facts, sqlmesh_api, trail
from tardy.ingest.tables import BronzeTable, bronze_tables
from tardy.key_index import key_date_expression, records_of_literal_keys
from tardy.sql import date_list, literal

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

# The bookkeeping columns shown with each record, after its arrival, event time and fields.
ORIGIN_COLUMNS = ("source_system", "source_file", "line_number", "parse_error")


@dataclass
class KeyHistory:
    key: str
    # bronze, by arrival; each record: ``bronze_table``, ``fields`` (the names of its
    # record's field columns but the event time), ``event_time`` (the parsed event time),
    # then its table's columns
    records: list[dict[str, t.Any]]
    changes: list[dict[str, t.Any]]  # the change trail, oldest first
    current: dict[str, list[dict[str, t.Any]]] = field(default_factory=dict)  # model -> rows

    def as_dict(self) -> dict[str, object]:
        # ``transaction_id``: the key's name in the JSON before any source but sales had one.
        return {"transaction_id": self.key, **asdict(self)}

    @property
    def found(self) -> bool:
        return bool(self.records or self.changes)


def _text(row: dict[str, t.Any]) -> dict[str, t.Any]:
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in row.items()}


def _where(spark: SparkSession, source: facts.FactSource, key: str) -> str | None:
    """The key's records in the source's bronze table, as a predicate (None: it has none)."""
    index = source.key_index
    if index is None:
        return f"{source.natural_key} = {literal(key)}"
    key_date = key_date_expression(exp.Literal.string(key)).sql("spark")
    lookup = index.arrival_dates_sql(f"key_date = {key_date}", f"natural_key = {literal(key)}")
    dates = [row.arrival_date.isoformat() for row in spark.sql(lookup).collect()]
    return records_of_literal_keys(index.key(), [key], dates).sql("spark") if dates else None


def _fields(table: BronzeTable) -> list[str]:
    """The columns of the record's fields but its event time (parsed apart)."""
    return [table.column(f) for f in table.fields if f != table.ts_field]


def _columns(table: BronzeTable) -> list[str]:
    return ["arrival_ts", table.ts_field, *_fields(table), *ORIGIN_COLUMNS]


def records(
    spark: SparkSession, sources: list[facts.FactSource], key: str
) -> list[dict[str, t.Any]]:
    """Every bronze record of the key in the fact sources, oldest arrival first (per source:
    the key index and bronze in the arrival dates it names, or one scan of bronze)."""
    tables = {table.name: table for table in bronze_tables()}
    found = []
    for source in sources:
        table = tables[source.table]
        where = _where(spark, source, key)
        if where is None:
            continue
        rows = spark.sql(
            f"SELECT {', '.join(_columns(table))} FROM {table.name} WHERE {where}"
        ).collect()
        found += [
            {
                "bronze_table": table.name,
                "fields": _fields(table),
                "event_time": row[table.ts_field],
                **row.asDict(),
            }
            for row in rows
        ]
    found.sort(key=lambda r: (r["arrival_ts"], r["source_file"], r["line_number"]))
    return [_text(record) for record in found]


def keyed_models(sources: list[facts.FactSource]) -> dict[str, tuple[str, str]]:
    """The models reading a fact source by its natural key: model -> (key column, time
    column)."""
    out = {}
    for source in sources:
        for reader in source.readers:
            column = reader.snapshot.model.time_column
            if not reader.by_record and column is not None:
                out[reader.name] = (reader.grain, column.column.name)
    return out


def history(context: Context, spark: SparkSession, key: str) -> KeyHistory:
    sources = facts.project_fact_sources(context, sqlmesh_api.model_snapshots(context))
    found = records(spark, sources, key)
    changes = [_text(row) for row in trail.changes(spark, row_key=key)]
    days = {date.fromisoformat(r["event_time"][:10]) for r in found if r["event_time"]}
    days |= {date.fromisoformat(c["event_date"]) for c in changes if c["event_date"]}
    current = {}
    for model, (key_column, time_column) in sorted(keyed_models(sources).items()):
        rows = spark.sql(
            f"SELECT * FROM {model} WHERE {date_list(f'`{time_column}`', days)} "
            f"AND `{key_column}` = {literal(key)}"
        ).collect()
        current[model] = [_text(row.asDict()) for row in rows]
    return KeyHistory(key, found, changes, current)
