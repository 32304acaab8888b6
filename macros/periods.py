"""Calendar periods for the gold rollups: ``@period_start(unit, d)`` and ``@period_end(unit, d)``.

``unit`` is ``week`` (ISO weeks, Monday to Sunday) or ``month``; ``d`` is a DATE expression.
Both return DATEs, in SQL that SQLGlot transpiles from Spark to DuckDB (DuckDB's date
arithmetic yields TIMESTAMPs, hence the casts back to DATE).
"""

from __future__ import annotations

from sqlglot import exp, parse_one
from sqlmesh import macro
from sqlmesh.core.macros import MacroEvaluator

_PERIOD_DIALECT = "spark"

_PERIOD_START = {
    "week": "CAST(DATE_TRUNC('week', :d) AS DATE)",
    "month": "CAST(DATE_TRUNC('month', :d) AS DATE)",
}
_PERIOD_END = {
    "week": "CAST(DATE_ADD(CAST(DATE_TRUNC('week', :d) AS DATE), 6) AS DATE)",
    "month": "CAST(LAST_DAY(:d) AS DATE)",
}


def _unit(unit: exp.Expr) -> str:
    name = unit.name.lower()
    if name not in _PERIOD_START:
        raise ValueError(f"unsupported period unit {unit.sql()!r}: expected 'week' or 'month'")
    return name


def _fill(template: str, value: exp.Expr) -> exp.Expr:
    def fill(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder) and node.name == "d":
            return value.copy()
        return node

    return parse_one(template, dialect=_PERIOD_DIALECT).transform(fill)


@macro()
def period_start(evaluator: MacroEvaluator, unit: exp.Expr, value: exp.Expr) -> exp.Expr:
    """The first day of the week (Monday) or month containing the date ``value``."""
    return _fill(_PERIOD_START[_unit(unit)], value)


@macro()
def period_end(evaluator: MacroEvaluator, unit: exp.Expr, value: exp.Expr) -> exp.Expr:
    """The last day of the week (Sunday) or month containing the date ``value``."""
    return _fill(_PERIOD_END[_unit(unit)], value)


@macro()
def period_first_day(evaluator: MacroEvaluator, unit: exp.Expr, value: exp.Expr) -> exp.Expr:
    """The first day of the period containing ``value`` that the project covers: the period's
    start, or the project start (variable ``tardy_start``) for the period holding it. A rollup
    keyed on it by time never drops the partial first week or month of the data."""
    project_start = evaluator.var("tardy_start")
    if not project_start:
        raise ValueError("variable tardy_start is not set (project.yaml, from TARDY_START)")
    start = exp.cast(exp.Literal.string(str(project_start)), exp.DataType.build("date"))
    return exp.func("GREATEST", _fill(_PERIOD_START[_unit(unit)], value), start)
