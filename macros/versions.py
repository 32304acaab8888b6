"""What a record's *version* is, shared by the silver models of the fact sources.

A version is a record's content: every field but its arrival metadata (arrival time, file,
line, ingestion). A record whose content equals an earlier valid record's of the same key is
the same version again (a resend, a retry, a partner's replay): the model keeps the
version's first record and counts it once, so it changes no row (docs/architecture.md,
"Verbatim resends").

- ``@first_of_version(key, is_valid, field, ...)``: three projections over a query of a key's
  records (``record_id``, ``arrival_ts`` among its columns): ``content_rank`` (1 for a
  version's first record, by arrival then record id), ``content_arrival_ts`` and
  ``content_record_id`` (that first record's).
"""

from __future__ import annotations

from sqlglot import exp
from sqlmesh import macro
from sqlmesh.core.macros import MacroEvaluator


@macro()
def first_of_version(evaluator: MacroEvaluator, *content: exp.Expr) -> list[exp.Expr]:
    partition = ", ".join(column.sql(dialect="spark") for column in content)
    window = f"OVER (PARTITION BY {partition} ORDER BY arrival_ts, record_id)"
    return [
        exp.maybe_parse(f"{value} {window} AS {name}", dialect="spark")
        for value, name in (
            ("ROW_NUMBER()", "content_rank"),
            ("FIRST_VALUE(arrival_ts)", "content_arrival_ts"),
            ("FIRST_VALUE(record_id)", "content_record_id"),
        )
    ]
