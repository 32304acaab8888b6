"""The interval a query reads, as predicates: SQLMesh's interval, or every interval tardy audits.

- ``@in_intervals(column)``: ``column BETWEEN @start_date AND @end_date`` (a DATE column).
- ``@in_intervals_ts(column)``: ``column BETWEEN @start_ts AND @end_ts`` (a TIMESTAMP).
- ``@intervals_start()`` / ``@intervals_end()``: ``@start_date`` / ``@end_date``.

In stock runs these render exactly as written out. When ``tardy restate`` audits a model on
several intervals in one query, it sets the render variable ``tardy_intervals``: the
predicates then select every one of the intervals (OR-ed ranges), and the bounds are the
first interval's start and the last one's end (for pruning: what lies between them is not
selected by the predicates). A query that reads the interval only through
these macros and ``@this_model`` therefore renders the same for each interval, which is how
tardy knows it may run it once (``tardy.audited_intervals``).
"""

from __future__ import annotations

from sqlglot import exp
from sqlmesh import macro
from sqlmesh.core.macros import MacroEvaluator

from tardy.audited_intervals import INTERVALS_VARIABLE, interval_values, within


def _intervals(evaluator: MacroEvaluator) -> list:
    return interval_values(evaluator.locals, evaluator.var(INTERVALS_VARIABLE))


@macro()
def in_intervals(evaluator: MacroEvaluator, column: exp.Expr) -> exp.Expr:
    """Whether the DATE ``column`` lies in the interval (or in any of tardy's)."""
    return within(column, _intervals(evaluator), "start_date", "end_date")


@macro()
def in_intervals_ts(evaluator: MacroEvaluator, column: exp.Expr) -> exp.Expr:
    """Whether the TIMESTAMP ``column`` lies in the interval (or in any of tardy's)."""
    return within(column, _intervals(evaluator), "start_ts", "end_ts")


@macro()
def intervals_start(evaluator: MacroEvaluator) -> exp.Expr:
    """The interval's first day (of all of tardy's)."""
    return exp.convert(min(i["start_date"] for i in _intervals(evaluator)))


@macro()
def intervals_end(evaluator: MacroEvaluator) -> exp.Expr:
    """The interval's last day (of all of tardy's)."""
    return exp.convert(max(i["end_date"] for i in _intervals(evaluator)))
