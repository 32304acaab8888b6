"""Audit a restatement's staged models: every audit over its restated intervals, all of
them in one Spark query.

SQLMesh renders each audit of a model (``@this_model`` is the staged table restricted to the
interval, other models resolve to their staged or prod tables). An audit whose render
depends on the interval only through ``@this_model`` (the built-in audits, any audit of the
model's own rows), or otherwise only through the project's interval macros (a
reconciliation written for them), is one query over the union of the intervals
(``sqlmesh_api.Renderer.audits_over``); any other audit is one query per interval. ``plan``
renders a model's audits while the restatement stages it (its parents staged, its children
not yet); ``count`` runs the planned audits of every model as one ``UNION ALL`` of row
counts, so a restatement's audits cost one statement whatever the number of models and
intervals. An audit fails when its query returns rows, as in SQLMesh. Each audit keeps the
``blocking`` setting the project declares (see ``sqlmesh_api.declared_blocking``). A model
written by key is audited with the same render variables as its write: an audit that reads
them (``reconciles_with_bronze``) checks the recomputed keys' rows, the others see the whole
staged intervals.
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass

from sqlglot import exp

from tardy.engine import delta, sqlmesh_api
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


@dataclass(frozen=True)
class PlannedAudit:
    """One audit query of a staged model, rendered and not yet run."""

    model: str
    blocking: bool
    query: sqlmesh_api.AuditQuery


def plan(
    renderer: sqlmesh_api.Renderer,
    snapshot: Snapshot,
    intervals: list[list[str]],
    variables: dict[str, t.Any] | None = None,
    rows: str | None = None,
) -> list[PlannedAudit]:
    """Every audit of the model over ``intervals``, rendered while the renderer stages what
    the model's restatement stages (its parents read their staged rows); ``variables`` are
    the render variables of the model's write (``stage.KeyRestriction.variables``);
    ``rows``: where ``@this_model`` reads the model's rows of the intervals, when not its
    staged name (``stage.StagedTable.staged_table``)."""
    blocking = sqlmesh_api.declared_blocking(snapshot)
    return [
        PlannedAudit(snapshot.model.name, blocking.get(query.audit, True), query)
        for query in renderer.audits_over(snapshot, intervals, variables, rows)
    ]


def count(spark: SparkSession, planned: list[PlannedAudit]) -> list[AuditResult]:
    """Run the planned audits, of any number of models, as one query of row counts.

    The audits that filter the same rows (``SELECT * FROM <rows> WHERE <condition>``: a
    model's ``not_null``, ``non_negative_amounts`` …) are counted by one aggregate over one
    scan of those rows (``COUNT_IF`` of each condition); every other audit is a branch of
    its own."""
    if not planned:
        return []
    filters: dict[str, list[tuple[int, exp.Expr]]] = {}
    branches = []
    for case, item in enumerate(planned):
        shape = _filter_shape(item.query.query)
        if shape is None:
            branches.append(_branch(case, item.query.query))
        else:
            filters.setdefault(shape[0], []).append((case, shape[1]))
    for source, conditions in filters.items():
        if len(conditions) == 1:
            case = conditions[0][0]
            branches.append(_branch(case, planned[case].query.query))
            continue
        tests = ", ".join(
            f"COUNT_IF({condition.sql(dialect='spark', identify=True)}) AS _rows_{case}"
            for case, condition in conditions
        )
        pairs = ", ".join(f"{case}, _rows_{case}" for case, _ in conditions)
        branches.append(
            f"SELECT stack({len(conditions)}, {pairs}) AS (_case, _rows) "
            f"FROM (SELECT {tests} FROM {source})"
        )
    found = delta.query(spark, " UNION ALL ".join(branches)).collect()
    counts = {row._case: int(row._rows) for row in found}
    return [
        AuditResult(
            audit=item.query.audit,
            model=item.model,
            interval=[
                min(s[0] for s in item.query.spans),
                max(s[1] for s in item.query.spans),
            ],
            rows=counts[case],
            blocking=item.blocking,
            spans=item.query.spans,
        )
        for case, item in enumerate(planned)
    ]


def _branch(case: int, query: exp.Query) -> str:
    return (
        f"SELECT {case} AS _case, COUNT(*) AS _rows FROM "
        f"({query.sql(dialect='spark', identify=True)}) AS _audit_{case}"
    )


def _filter_shape(query: exp.Query) -> tuple[str, exp.Expr] | None:
    """``(source, condition)`` when the audit is ``SELECT * FROM <source> WHERE
    <condition>`` and nothing else (no CTE, join, grouping, order or limit), the condition
    a row's own test (no subquery, window or aggregate): its row count is then
    ``COUNT_IF(<condition>)`` over the source. ``source`` is the relation's SQL, alias
    included, so that audits group only where their conditions name the same relation."""
    if not isinstance(query, exp.Select):
        return None
    if any(value for part, value in query.args.items() if part not in _FILTER_PARTS):
        return None
    if len(query.expressions) != 1 or not isinstance(query.expressions[0], exp.Star):
        return None
    source, where = query.args.get("from_"), query.args.get("where")
    if source is None or where is None:
        return None
    if where.this.find(exp.Subquery, exp.Select, exp.Window, exp.AggFunc):
        return None
    return source.this.sql(dialect="spark", identify=True), where.this


_FILTER_PARTS = ("expressions", "from_", "where")


def run(
    spark: SparkSession,
    renderer: sqlmesh_api.Renderer,
    snapshot: Snapshot,
    intervals: list[list[str]],
    variables: dict[str, t.Any] | None = None,
    rows: str | None = None,
) -> list[AuditResult]:
    """Every audit of one model over ``intervals`` (``plan``), counted in one query."""
    return count(spark, plan(renderer, snapshot, intervals, variables, rows))
