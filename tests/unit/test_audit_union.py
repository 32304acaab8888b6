"""Audits once per model: which audits run over the union of the restated intervals.

SQLMesh renders the project's real audits (no Spark statement: the renders are only
parsed). The oracle of which audits may run over the union is the audit's own text,
independent of the engine's rule (which compares the renders of each interval): an audit that
names ``@start_...`` or ``@end_...`` reads something by the interval's bounds besides
``@this_model`` and runs once per interval; any other audit runs once, a reconciliation that
reads the interval through the interval macros (``@in_intervals`` …) included.
"""

from __future__ import annotations

import typing as t

from oracle import reads_by_bounds
from sqlglot import exp

INTERVALS = [["2025-01-03", "2025-01-04"], ["2025-12-10", "2025-12-10"]]


def audited(renderer: t.Any) -> list[t.Any]:
    from tardy.engine import sqlmesh_api

    return [
        s
        for s in renderer.snapshots.values()
        if s.is_model and sqlmesh_api.has_intervals(s) and s.node.audits_with_args
    ]


def betweens(query: exp.Query, column: str) -> set[tuple[str, str]]:
    return {
        (b.args["low"].sql("spark"), b.args["high"].sql("spark"))
        for b in query.find_all(exp.Between)
        if isinstance(b.this, exp.Column) and b.this.name == column
    }


def test_an_audit_of_the_models_own_rows_runs_once_and_a_reconciliation_per_interval(
    renderer: t.Any,
) -> None:
    snapshots = audited(renderer)
    assert len(snapshots) >= 8
    unions = per_interval = spanned = 0
    for snapshot in snapshots:
        queries = renderer.audits_over(snapshot, INTERVALS)
        for audit, _ in snapshot.node.audits_with_args:
            mine = [q for q in queries if q.audit == audit.name]
            if reads_by_bounds(audit):
                assert [q.spans for q in mine] == [[i] for i in INTERVALS], (snapshot, audit)
                per_interval += 1
            else:
                assert [q.spans for q in mine] == [INTERVALS], (snapshot.name, audit.name)
                unions += 1
                spanned += reads_interval_macros(audit)
    # Every audit of the project runs once: the built-in ones and the reconciliations, which
    # read other models through the interval macros (``over_union``'s other case below).
    assert unions >= 30 and spanned >= 6 and per_interval == 0, (unions, per_interval, spanned)


def test_an_audit_reading_another_table_by_the_bounds_stays_per_interval() -> None:
    """``over_union`` merges renders that differ only in ``@this_model``'s interval, and
    refuses renders that also read another table by the interval's bounds."""
    from sqlglot import parse_one

    from tardy.engine.sqlmesh_api import over_union

    table = exp.to_table("db.model__dev")

    def render(first: str, last: str, other: bool) -> exp.Query:
        this = f"(SELECT * FROM db.model__dev WHERE d BETWEEN '{first}' AND '{last}') AS m"
        join = f" JOIN db.other AS o ON o.d = m.d AND o.d BETWEEN '{first}' AND '{last}'"
        return t.cast(exp.Query, parse_one(f"SELECT m.d FROM {this}{join if other else ''}"))

    own = over_union([render(*i, other=False) for i in INTERVALS], INTERVALS, table, "d")
    assert own is not None and len(ranges(own)) == len(INTERVALS)
    assert over_union([render(*i, other=True) for i in INTERVALS], INTERVALS, table, "d") is None


def reads_interval_macros(audit: t.Any) -> bool:
    return "@in_intervals" in audit.query.sql().lower()


def ranges(query: exp.Query) -> set[tuple[str, str, str]]:
    return {
        (b.this.sql("spark"), b.args["low"].sql("spark"), b.args["high"].sql("spark"))
        for b in query.find_all(exp.Between)
    }


def test_a_reconciliation_through_the_interval_macros_reads_each_interval_not_their_hull(
    renderer: t.Any,
) -> None:
    """Silver's reconciliation with bronze reads bronze, the quarantine and silver by the
    interval: rendered once over the intervals, it reads exactly the ranges that SQLMesh's
    render of each interval reads, and nothing between them."""
    snapshot = next(s for s in audited(renderer) if s.model.name == "silver.sales_transactions")
    audit = next(a for a, _ in snapshot.node.audits_with_args if reads_interval_macros(a))
    (union,) = [q for q in renderer.audits_over(snapshot, INTERVALS) if q.audit == audit.name]
    assert union.spans == INTERVALS
    each = [dict(renderer.audits(snapshot, first, last))[audit.name] for first, last in INTERVALS]
    expected = set().union(*(ranges(q) for q in each))
    assert len(expected) >= 4 * len(INTERVALS)  # arrival, event time, report and event days
    assert ranges(union.query) == expected


def test_the_union_reads_the_intervals_not_their_hull(renderer: t.Any) -> None:
    from tardy.engine import sqlmesh_api

    snapshot = next(s for s in audited(renderer) if s.model.name == "gold.daily_store_revenue")
    column = sqlmesh_api.time_column(snapshot)
    union = next(q for q in renderer.audits_over(snapshot, INTERVALS) if q.audit == "not_null")
    each = [dict(renderer.audits(snapshot, first, last))["not_null"] for first, last in INTERVALS]
    expected = set().union(*(betweens(q, column) for q in each))
    assert len(expected) == 2
    assert betweens(union.query, column) == expected
    assert len(list(union.query.find_all(exp.Between))) == 2  # no hull, nothing else


def test_one_interval_is_rendered_as_sqlmesh_renders_it(renderer: t.Any) -> None:
    for snapshot in audited(renderer):
        (first, last) = INTERVALS[0]
        rendered = renderer.audits(snapshot, first, last)
        over = renderer.audits_over(snapshot, [INTERVALS[0]])
        assert [(q.audit, q.query.sql("spark")) for q in over] == [
            (name, query.sql("spark")) for name, query in rendered
        ]


def test_this_model_reads_the_rows_table_whole_from_the_hull_render(renderer: t.Any) -> None:
    """With ``rows`` (a staged model's rows table: exactly the intervals' rows), every audit
    covers the same intervals as without it, every read of the audited table is a read of
    ``rows``, and putting the table back gives SQLMesh's render of the audit over the
    intervals' hull with ``tardy_intervals`` set (two renders, whatever the number of
    intervals): ``@this_model`` reads all of the rows table."""
    from tardy.audited_intervals import INTERVALS_VARIABLE

    rows = "sqlmesh__stand_in.model__dev__rows"
    hull = (INTERVALS[0][0], INTERVALS[-1][1])
    swapped = 0
    for snapshot in audited(renderer):
        table = exp.to_table(snapshot.table_name())
        plain = renderer.audits_over(snapshot, INTERVALS)
        over_rows = renderer.audits_over(snapshot, INTERVALS, rows=rows)
        assert [(q.audit, q.spans) for q in over_rows] == [(q.audit, q.spans) for q in plain]
        expected = dict(renderer.audits(snapshot, *hull, {INTERVALS_VARIABLE: INTERVALS}))
        for q in over_rows:
            read = [x for x in q.query.find_all(exp.Table) if x.name == "model__dev__rows"]
            assert table.name not in {x.name for x in q.query.find_all(exp.Table)}
            back = q.query.copy()
            for x in back.find_all(exp.Table):
                if x.name == "model__dev__rows":
                    for part in ("this", "db", "catalog"):
                        x.set(part, table.args.get(part))
            assert back.sql("spark", identify=True) == expected[q.audit].sql(
                "spark", identify=True
            ), (snapshot.name, q.audit)
            swapped += len(read)
    assert swapped >= 30, swapped


def test_audits_of_no_interval_are_none(renderer: t.Any) -> None:
    assert renderer.audits_over(audited(renderer)[0], []) == []


def test_an_audit_over_the_union_is_labelled_with_how_many_intervals_it_read() -> None:
    from tardy.engine.audit import AuditFailed, AuditResult

    union = AuditResult("not_null", "m", [INTERVALS[0][0], INTERVALS[1][1]], 2, True, INTERVALS)
    one = AuditResult("r", "m", INTERVALS[1], 1, True, [INTERVALS[1]])
    assert union.span_label == "2025-01-03..2025-12-10 (2 intervals)"
    assert one.span_label == "2025-12-10..2025-12-10"
    assert "for 2025-01-03..2025-12-10 (2 intervals) (2 rows)" in str(AuditFailed([union, one]))


def test_the_audits_filtering_a_models_rows_are_counted_by_one_aggregate(
    renderer: t.Any,
) -> None:
    """``not_null``, ``non_negative_amounts`` and ``accepted_values`` (``SELECT * FROM
    @this_model WHERE ...``) are counted together over one scan of the model's rows; no
    other audit (a uniqueness audit's window or ``GROUP BY``, a reconciliation's join) reads
    that source."""
    from tardy.engine.audit import _filter_shape

    # SQLMesh's and the project's audits that are ``SELECT * FROM @this_model WHERE ...``
    filters = {"not_null", "non_negative_amounts", "accepted_values"}
    shared = 0
    for snapshot in audited(renderer):
        queries = renderer.audits_over(snapshot, INTERVALS, rows="stage.rows_of_model")
        shapes = {q.audit: _filter_shape(q.query) for q in queries}
        assert all(shapes[a] is not None for a in filters & set(shapes)), snapshot.name
        own = {shapes[a][0] for a in filters & set(shapes) if shapes[a] is not None}
        assert len(own) == (1 if filters & set(shapes) else 0), snapshot.name
        others = {shape[0] for a, shape in shapes.items() if a not in filters and shape}
        assert not own & others, snapshot.name
        shared += len(filters & set(shapes)) >= 2
    assert shared >= 6, shared


def test_only_a_plain_filter_is_counted_in_the_aggregate() -> None:
    """A query with anything besides ``SELECT * FROM <source> WHERE <row test>`` is not a
    filter of its source (a CTE, a join, a grouping, a limit, a window or a subquery in the
    condition): it stays a branch of its own."""
    from sqlglot import parse_one

    from tardy.engine.audit import _filter_shape

    plain = "SELECT * FROM (SELECT * FROM r WHERE d BETWEEN 1 AND 2) AS m WHERE a IS NULL"
    shape = _filter_shape(t.cast(exp.Query, parse_one(plain, read="spark")))
    assert shape is not None and shape[1].sql("spark") == "a IS NULL"
    others = [
        "WITH c AS (SELECT * FROM r) SELECT * FROM c WHERE a IS NULL",
        "SELECT * FROM r JOIN s ON r.k = s.k WHERE a IS NULL",
        "SELECT * FROM r WHERE a IS NULL LIMIT 1",
        "SELECT DISTINCT * FROM r WHERE a IS NULL",
        "SELECT a FROM r WHERE a IS NULL",
        "SELECT * FROM r WHERE a IN (SELECT a FROM s)",
        "SELECT * FROM r WHERE ROW_NUMBER() OVER (PARTITION BY a ORDER BY a) > 1",
        "SELECT * FROM r",
    ]
    for other in others:
        assert _filter_shape(t.cast(exp.Query, parse_one(other, read="spark"))) is None, other
