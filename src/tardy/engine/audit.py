"""Audit a staged model: every audit over every restated interval, in one Spark query.

SQLMesh renders each audit of the model for each interval (``@this_model`` is the staged
table restricted to the interval, other models resolve to their staged or prod tables); the
renders are combined into one ``UNION ALL`` of row counts, so a model's audits cost one
statement whatever the number of intervals. An audit fails when its query returns rows, as
in SQLMesh. Each audit keeps the ``blocking`` setting the project declares (see
``sqlmesh_api.declared_blocking``). A model written by key is audited with the same render
variables as its write: an audit that reads them (``reconciles_with_bronze``) checks the
recomputed keys' rows, the others see the whole staged intervals.
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass

from tardy.engine import sqlmesh_api
from tardy.errors import RestatementFailed

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh.core.snapshot import Snapshot


@dataclass(frozen=True)
class AuditResult:
    audit: str
    model: str
    interval: list[str]
    rows: int  # rows the audit query returned: 0 = passed
    blocking: bool

    @property
    def failed(self) -> bool:
        return self.rows > 0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class AuditFailed(RestatementFailed):
    """A blocking audit failed on the staged data."""

    def __init__(self, results: list[AuditResult]) -> None:
        self.results = results
        self.failures = [r for r in results if r.failed and r.blocking]
        names = "; ".join(
            f"audit {f.audit} on {f.model} for {f.interval[0]}..{f.interval[1]} ({f.rows} rows)"
            for f in self.failures
        )
        super().__init__(f"blocking audit failed: {names}")


def run(
    spark: SparkSession,
    renderer: sqlmesh_api.Renderer,
    snapshot: Snapshot,
    intervals: list[list[str]],
    variables: dict[str, t.Any] | None = None,
) -> list[AuditResult]:
    """Every audit of the model for every interval, counted in one query; ``variables``
    are the render variables of the model's write (``stage.KeyRestriction.variables``)."""
    blocking = sqlmesh_api.declared_blocking(snapshot)
    cases: list[tuple[str, list[str]]] = []
    branches: list[str] = []
    for first, last in intervals:
        for name, query in renderer.audits(snapshot, first, last, variables):
            branches.append(
                f"SELECT {len(cases)} AS _case, COUNT(*) AS _rows FROM "
                f"({query.sql(dialect='spark', identify=True)}) AS _audit_{len(cases)}"
            )
            cases.append((name, [first, last]))
    if not branches:
        return []
    counts = {
        row._case: int(row._rows) for row in spark.sql(" UNION ALL ".join(branches)).collect()
    }
    return [
        AuditResult(
            audit=name,
            model=snapshot.model.name,
            interval=interval,
            rows=counts[i],
            blocking=blocking.get(name, True),
        )
        for i, (name, interval) in enumerate(cases)
    ]
