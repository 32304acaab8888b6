"""The impacted closure: which intervals of each model a set of changed days reaches.

Everything comes from the project, nothing from model names:

- the edges are ``context.dag`` (a model's parents);
- a child's time column as a function of its parent's comes from SQLMesh's column lineage:
  a daily model keyed by ``event_date`` maps a silver day to itself, a weekly rollup keyed
  by ``@period_first_day('week', event_date)`` maps it to its week's first day, a monthly one
  to its month's. The calendar rule is therefore the macro's SQL, evaluated here (in DuckDB,
  in-process: no Spark statement) on the changed days; it lives once, in ``macros/``;
- a model whose time column does not derive from its parent's (a Python model, or a
  dependency that only orders models) maps a day to the same day, widened by its declared
  window: the tag ``restate_window=N`` says an interval ``t`` reads its parent's days
  ``t - N + 1 .. t`` (a rolling 28-day feature has ``restate_window=28``; in a SQL MODEL
  block, quote it: ``tags ('restate_window=7')``);
- a day is clipped to the model's computed range in prod (SQLMesh state): a restatement never
  computes a day the model has never had.
"""

from __future__ import annotations

import typing as t
from collections.abc import Iterable
from datetime import date, timedelta
from functools import cache

from sqlglot import exp

from tardy.engine import sqlmesh_api

if t.TYPE_CHECKING:
    from sqlmesh import Context
    from sqlmesh.core.snapshot import Snapshot

WINDOW_TAG = "restate_window"


def window(snapshot: Snapshot) -> int:
    value = sqlmesh_api.tag_value(snapshot, WINDOW_TAG)
    return int(value) if value else 1


@cache
def _evaluate(sql: str, days: tuple[date, ...]) -> frozenset[date]:
    import duckdb

    values = ", ".join(f"(DATE '{d.isoformat()}')" for d in days)
    rows = duckdb.sql(f"SELECT DISTINCT CAST({sql} AS DATE) FROM (VALUES {values}) AS t(d)")
    return frozenset(row[0] for row in rows.fetchall() if row[0] is not None)


@cache
def _image(sql: str, days: tuple[date, ...]) -> dict[date, date | None]:
    import duckdb

    values = ", ".join(f"(DATE '{d.isoformat()}')" for d in days)
    rows = duckdb.sql(f"SELECT d, CAST({sql} AS DATE) FROM (VALUES {values}) AS t(d)")
    return dict(rows.fetchall())


def _substitute(expression: exp.Expr, day: exp.Expr) -> exp.Expr:
    """``expression`` with its column ``d`` replaced by ``day``."""
    return expression.copy().transform(
        lambda n: day.copy() if isinstance(n, exp.Column) and n.name == "d" else n
    )


# A period keyed by one day never spans more than this many days of its parent (a month).
_LONGEST_PERIOD = 31


class Closure:
    """Maps changed days of a parent to the intervals of a child, from the project."""

    def __init__(self, context: Context, snapshots: list[Snapshot]) -> None:
        self.context = context
        # Models computed by intervals only: a view (a dimension) has no days to restate; its
        # late changes reach its children through detection (``tardy.engine.dimension``).
        self.snapshots = {s.model.name: s for s in snapshots if sqlmesh_api.has_intervals(s)}
        self._lineage: dict[tuple[str, str], exp.Expr | None] = {}

    def children(self, name: str) -> list[str]:
        snapshot = self.snapshots[name]
        return [
            child
            for child, other in self.snapshots.items()
            if snapshot.name in {p.name for p in other.parents}
        ]

    def parents(self, name: str) -> list[str]:
        return sqlmesh_api.parent_names(self.snapshots[name], self.snapshots.values())

    def _time_expression(self, parent: str, child: str) -> exp.Expr | None:
        """The child's time column as an expression of its parent's, the column ``d``."""
        key = (parent, child)
        if key not in self._lineage:
            expression = sqlmesh_api.time_lineage(
                self.context, self.snapshots[child], self.snapshots[parent]
            )
            if expression is not None:
                expression = expression.transform(
                    lambda n: exp.column("d") if isinstance(n, exp.Placeholder) else n
                )
            self._lineage[key] = expression
        return self._lineage[key]

    def _time_sql(self, parent: str, child: str) -> str | None:
        expression = self._time_expression(parent, child)
        return None if expression is None else expression.sql("duckdb")

    def key_of(self, name: str, day: exp.Expr) -> exp.Expr:
        """The interval of ``name`` (its time column's value) that holds the most upstream
        model's day ``day`` (an expression), through the lineage ``last_day`` walks: a week's
        key for a weekly rollup, the day itself for a model with none. For a day D, a period
        ``k`` ends before D exactly when ``k < key_of(D)`` (periods partition the days, in
        order)."""
        for parent in self.parents(name):
            expression = self._time_expression(parent, name)
            if expression is None:
                continue
            return _substitute(expression, self.key_of(parent, day))
        return day

    def key(self, name: str, day: date) -> date:
        """``key_of`` evaluated: the key of ``name``'s interval that holds the most upstream
        model's ``day`` (a Monday for a weekly rollup)."""
        sql = self.key_of(name, exp.column("d")).sql("duckdb")
        found = _image(sql, (day,))[day]
        return day if found is None else found

    def map(self, parent: str, child: str, days: Iterable[date]) -> set[date]:
        """The child's days (values of its time column) that read a changed parent day."""
        days = set(days)
        if not days:
            return set()
        size = window(self.snapshots[child])
        widened = {d + timedelta(days=i) for d in days for i in range(size)}
        sql = self._time_sql(parent, child)
        mapped = set(_evaluate(sql, tuple(sorted(widened)))) if sql else widened
        return self.clip(child, mapped)

    def last_day(self, name: str, key: date) -> date:
        """The last day of the most upstream model's days an interval ``key`` of ``name``
        covers: a week's Sunday, a month's last day, a day itself (through the lineage of
        each model's time column, up to a model with none)."""
        for parent in self.parents(name):
            sql = self._time_sql(parent, name)
            if sql is None:
                continue
            span = tuple(key + timedelta(days=i) for i in range(_LONGEST_PERIOD))
            image = _image(sql, span)
            covered = [d for d in span if image[d] == key]
            if covered:  # else ``key`` is no interval of the model: treated as a day
                return self.last_day(parent, max(covered))
        return key

    def clip(self, name: str, days: Iterable[date]) -> set[date]:
        """The days within the model's computed range in prod."""
        snapshot = self.snapshots[name]
        first = sqlmesh_api.first_computed_day(snapshot)
        last = sqlmesh_api.last_computed_day(snapshot)
        return {d for d in days if (first is None or d >= first) and (last is None or d <= last)}

    def downstream(self, roots: dict[str, set[date]]) -> dict[str, set[date]]:
        """Every model's days reached from ``roots`` if every reached day changed (the upper
        bound a manifest shows; staging cascades only the days that did change)."""
        out: dict[str, set[date]] = {}
        for name in self.snapshots:  # upstream first
            days = set(roots.get(name, set()))
            for parent in self.parents(name):
                days |= self.map(parent, name, out.get(parent, set()))
            out[name] = days
        return out
