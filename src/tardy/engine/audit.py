"""Audit a staged model: every audit over its restated intervals, in one Spark query.

SQLMesh renders each audit of the model for each interval (``@this_model`` is the staged
table restricted to the interval, other models resolve to their staged or prod tables). An
audit whose render depends on the interval only through ``@this_model`` (the built-in
audits, any audit of the model's own rows) runs once, over the union of the intervals
(``sqlmesh_api.over_union``); an audit that also reads another table by the interval's
bounds (a reconciliation) runs once per interval. The queries are combined into one
``UNION ALL`` of row counts, so a model's audits cost one statement whatever the number of
intervals, and a model restated on k intervals pays one branch per audit plus k per
reconciliation, not k per audit. An audit fails when its query returns rows, as in
SQLMesh. Each audit keeps the ``blocking`` setting the project declares (see
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
    interval: list[str]  # the first and last day it read (of ``spans``)
    rows: int  # rows the audit query returned: 0 = passed
    blocking: bool
    spans: list[list[str]]  # the intervals it covered: all of them when run over their union

    @property
    def failed(self) -> bool:
        return self.rows > 0

    @property
    def span_label(self) -> str:
        """``first..last``, and how many intervals when it ran over their union (the days
        between them were not read)."""
        label = f"{self.interval[0]}..{self.interval[1]}"
        return label if len(self.spans) <= 1 else f"{label} ({len(self.spans)} intervals)"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class AuditFailed(RestatementFailed):
    """A blocking audit failed on the staged data."""

    def __init__(self, results: list[AuditResult]) -> None:
        self.results = results
        self.failures = [r for r in results if r.failed and r.blocking]
        names = "; ".join(
            f"audit {f.audit} on {f.model} for {f.span_label} ({f.rows} rows)"
            for f in self.failures
        )
        super().__init__(f"blocking audit failed: {names}")


def run(
    spark: SparkSession,
    renderer: sqlmesh_api.Renderer,
    snapshot: Snapshot,
    intervals: list[list[str]],
    variables: dict[str, t.Any] | None = None,
    rows: str | None = None,
) -> list[AuditResult]:
    """Every audit of the model over ``intervals``, counted in one query; ``variables``
    are the render variables of the model's write (``stage.KeyRestriction.variables``);
    ``rows``: where ``@this_model`` reads the model's rows of the intervals, when not its
    staged name (``stage.StagedTable.staged_table``)."""
    blocking = sqlmesh_api.declared_blocking(snapshot)
    queries = renderer.audits_over(snapshot, intervals, variables, rows)
    if not queries:
        return []
    branches = [
        f"SELECT {case} AS _case, COUNT(*) AS _rows FROM "
        f"({item.query.sql(dialect='spark', identify=True)}) AS _audit_{case}"
        for case, item in enumerate(queries)
    ]
    counts = {
        row._case: int(row._rows) for row in spark.sql(" UNION ALL ".join(branches)).collect()
    }
    return [
        AuditResult(
            audit=item.audit,
            model=snapshot.model.name,
            interval=[min(s[0] for s in item.spans), max(s[1] for s in item.spans)],
            rows=counts[case],
            blocking=blocking.get(item.audit, True),
            spans=item.spans,
        )
        for case, item in enumerate(queries)
    ]
