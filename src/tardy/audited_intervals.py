"""The intervals a render covers: SQLMesh's one interval, or every interval tardy restates.

SQLMesh renders a model or an audit for one interval (``@start_date`` .. ``@end_date``).
tardy audits a model restated on k intervals in one query per audit: an audit of the
model's own rows over their union (``tardy.engine.sqlmesh_api.over_union``), and an audit
that also reads other tables by the interval (a reconciliation) when it reads the interval
through the project's interval macros (``macros/intervals.py``: ``@in_intervals(column)``
…). tardy then sets the render variable ``tardy_intervals`` to every restated interval and
those macros select all of them; in stock runs the variable is unset and they render
exactly ``column BETWEEN @start_date AND @end_date``. Such an audit returns its failures per
day (it groups by the day), so that one render over k intervals checks each day as k renders
would.

The macros import the plain names below (see ``macros/sales_rules.py`` on why).
"""

from __future__ import annotations

import typing as t
from collections.abc import Mapping, Sequence
from datetime import date, timedelta

from sqlglot import exp

INTERVALS_VARIABLE = "tardy_intervals"


def interval_values(
    render_locals: Mapping[str, t.Any], spans: Sequence[Sequence[str]] | None
) -> list[Mapping[str, t.Any]]:
    """The render values (``start_date``, ``end_ts`` …) of each interval: of tardy's
    ``spans`` (inclusive ``[first, last]`` days) when set, else SQLMesh's interval (the
    render's locals). SQLMesh's own ``date_dict`` over its own inclusive bounds, so a span
    renders as SQLMesh renders that interval."""
    if spans is None:
        return [render_locals]
    from sqlmesh.utils.date import date_dict, make_inclusive, to_timestamp

    out: list[Mapping[str, t.Any]] = []
    for first, last in spans:
        end = to_timestamp(date.fromisoformat(last) + timedelta(days=1))
        start_time, end_time = make_inclusive(to_timestamp(first), end)
        out.append(date_dict(start_time, start_time, end_time))
    return out


def within(
    column: exp.Expr, intervals: Sequence[Mapping[str, t.Any]], start: str, end: str
) -> exp.Expr:
    """``column BETWEEN <start> AND <end>`` for each interval's values, OR-ed (in
    parentheses when more than one)."""
    ranges = [
        exp.Between(this=column.copy(), low=exp.convert(i[start]), high=exp.convert(i[end]))
        for i in intervals
    ]
    return ranges[0] if len(ranges) == 1 else exp.paren(exp.or_(*ranges))
