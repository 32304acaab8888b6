"""The data product card of a published model (``tardy card TABLE``): what a consumer needs
to know before reading it.

From the model's metadata: its description and owner (SQLMesh's ``description`` and
``owner``). From its publications (``tardy.consumers.versions``): the current version, when it
was last published and by what, and ``last_restated_at``: the latest version a restatement
produced. From the data watermark (``tardy.consumers.status``): the day it is final through, the
last day of its last final period (``Closure.key``: a weekly rollup is final through a Sunday).
And the lateness of the declared sources it reads (``sources.yaml``, through the DAG: the bronze
tables upstream of it).

Cost: two statements (the publications, the lateness of every source) after the project is
loaded.
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from tardy.errors import InputError

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

    from tardy.consumers.status import SourceStatus


class NotPublished(InputError):
    pass


@dataclass
class Card:
    table: str
    description: str | None
    owner: str | None
    current_version: str | None  # ``TABLE@vN``; None before the first publication
    last_published_at: str | None
    last_produced_by: str | None
    last_restated_at: str | None  # the latest version a restatement produced
    last_restatement_id: str | None
    final_through: str | None  # a day; None while bronze is empty
    first_provisional_day: str | None
    sources: list[SourceStatus] = field(default_factory=list)  # the sources it reads
    statements: int = 0

    def as_dict(self) -> dict[str, t.Any]:
        return asdict(self)


def card(context: Context, spark: SparkSession, table_name: str) -> Card:
    """The card of the published model ``table_name``."""
    from tardy.engine.sqlmesh_api import published_snapshots

    snapshots = published_snapshots(context)
    if table_name not in snapshots:
        names = ", ".join(sorted(snapshots)) or "none"
        raise NotPublished(f"{table_name} is not a published model (published: {names})")
    return cards(context, spark, [table_name])[0]


def cards(
    context: Context, spark: SparkSession, table_names: t.Sequence[str] | None = None
) -> list[Card]:
    """The cards of the published models (``table_names``, or all of them), in name order:
    two statements for all of them (the publications, the lateness of every source)."""
    from sqlglot import exp

    from tardy.consumers.status import lateness
    from tardy.consumers.versions import publications
    from tardy.engine import sqlmesh_api
    from tardy.engine.closure import Closure
    from tardy.engine.meter import Meter
    from tardy.engine.sqlmesh_api import published_snapshots
    from tardy.lateness.grace import data_watermark
    from tardy.project import sources as declared_sources

    snapshots = published_snapshots(context)
    names = sorted(snapshots if table_names is None else table_names)
    meter = Meter(spark)
    with meter.step("card"):
        history = publications(spark, names[0] if len(names) == 1 else None)
        grace = int(context.config.variables["grace_days"])
        per_source, overall = lateness(spark, grace)
    max_arrival = overall.max_arrival_ts
    watermark = data_watermark(datetime.fromisoformat(max_arrival), grace) if max_arrival else None
    closure = Closure(context, sqlmesh_api.model_snapshots(context)) if watermark else None
    declared = declared_sources.declared().sources.values()
    out = []
    for table_name in names:
        model = snapshots[table_name].model
        mine_history = [p for p in history if p.table_name == table_name]
        latest = mine_history[-1] if mine_history else None
        restated = [p for p in mine_history if p.restated]
        final_through = first_provisional = None
        if watermark is not None and closure is not None:
            first_day = watermark.date()
            final_through = (closure.key(table_name, first_day) - timedelta(days=1)).isoformat()
            first_provisional = first_day.isoformat()
        upstream = [exp.to_table(fqn, dialect="spark") for fqn in context.dag.upstream(model.fqn)]
        read = {f"{table.db}.{table.name}" for table in upstream}
        mine = {s.name for s in declared if s.bronze in read}
        out.append(
            Card(
                table=table_name,
                description=model.description,
                owner=model.owner,
                current_version=latest.name if latest else None,
                last_published_at=latest.published_at if latest else None,
                last_produced_by=latest.produced_by if latest else None,
                last_restated_at=restated[-1].published_at if restated else None,
                last_restatement_id=restated[-1].produced_by if restated else None,
                final_through=final_through,
                first_provisional_day=first_provisional,
                sources=[s for s in per_source if s.source_system in mine],
                statements=meter.statements["card"],
            )
        )
    return out
