"""Models rendered once over the restated intervals (``Renderer.rows_over``).

SQLMesh renders the project's real models (no Spark statement: the renders are only parsed).
The oracle of which models render once is the model's own text, independent of the engine's
rule (which compares two renders): a SQL model whose query names ``@start_...`` or
``@end_...`` reads by the interval's bounds and renders once per interval; any other SQL
model reads its interval through the interval macros and renders once for all of them.
Whether the one render selects the same rows as the renders of each interval is checked on
real data by ``test_small_checks``.
"""

from __future__ import annotations

import typing as t
from pathlib import Path

from sqlglot import exp

from tardy.project.home import project_root

INTERVALS = [["2025-01-03", "2025-01-04"], ["2025-12-10", "2025-12-10"]]


def reads_by_bounds(model: t.Any) -> bool:
    text = model.query.sql()
    return "@start_" in text or "@end_" in text


def sql_models(renderer: t.Any) -> list[t.Any]:
    from tardy.engine import sqlmesh_api

    return [
        s
        for s in renderer.snapshots.values()
        if s.is_model and sqlmesh_api.has_intervals(s) and s.model.is_sql
    ]


def time_bounds(query: exp.Query, column: str) -> set[str]:
    """The literals the query compares its ``column`` with (``BETWEEN``, or the comparisons
    SQLMesh's optimizer makes of it)."""
    found: set[str] = set()
    for node in query.find_all(exp.Between, exp.GTE, exp.LTE, exp.GT, exp.LT):
        sides = (
            [node.this, node.args["low"], node.args["high"]]
            if isinstance(node, exp.Between)
            else [node.this, node.expression]
        )
        if any(isinstance(x, exp.Column) and x.name == column for x in sides):
            found |= {lit.this for x in sides for lit in x.find_all(exp.Literal) if lit.is_string}
    return found


def test_a_model_reading_its_interval_through_the_macros_renders_once(renderer: t.Any) -> None:
    """Every SQL model of the project renders once over the two intervals, and its time
    column is compared with exactly the days SQLMesh's render of each interval compares it
    with: the intervals, not their hull."""
    from tardy.engine import sqlmesh_api

    once = 0
    for snapshot in sql_models(renderer):
        assert not reads_by_bounds(snapshot.model), snapshot.name
        (query,) = renderer.rows_over(snapshot, INTERVALS)
        column = sqlmesh_api.time_column(snapshot)
        each = [renderer.rows(snapshot, first, last)[0] for first, last in INTERVALS]
        expected = set().union(*(time_bounds(q, column) for q in each))
        assert expected == {day for interval in INTERVALS for day in interval}, snapshot.name
        assert time_bounds(query, column) == expected, snapshot.name
        once += 1
    assert once >= 9, once


def test_a_model_reading_the_bounds_renders_once_per_interval(
    renderer: t.Any, context: t.Any
) -> None:
    """The same model written with ``@start_date`` and ``@end_date``: one render per
    interval, each SQLMesh's render of that interval."""
    from sqlmesh.core import dialect
    from sqlmesh.core.model import load_sql_based_model
    from sqlmesh.core.snapshot import Snapshot, SnapshotChangeCategory

    text = Path(project_root() / "models" / "gold" / "daily_store_revenue.sql").read_text()
    macro = "WHERE @in_intervals(event_date)"
    assert macro in text
    written = text.replace(macro, "WHERE event_date BETWEEN @start_date AND @end_date")
    model = load_sql_based_model(
        dialect.parse(written, default_dialect="spark"),
        macros=context._macros,
        audit_definitions=context._audits,
        dialect="spark",
        variables=context.config.variables,  # its lookback reads grace_days (@grace_lookback)
    )
    assert reads_by_bounds(model)
    snapshot = Snapshot.from_node(model, nodes={}, ttl="in 1 week")
    snapshot.categorize_as(SnapshotChangeCategory.BREAKING)
    parts = renderer.rows_over(snapshot, INTERVALS)
    assert [p.sql("spark") for p in parts] == [
        renderer.rows(snapshot, first, last)[0].sql("spark") for first, last in INTERVALS
    ]


def test_one_interval_renders_as_sqlmesh_renders_it(renderer: t.Any) -> None:
    for snapshot in sql_models(renderer):
        first, last = INTERVALS[0]
        (query,) = renderer.rows_over(snapshot, [INTERVALS[0]])
        assert query.sql("spark") == renderer.rows(snapshot, first, last)[0].sql("spark")
