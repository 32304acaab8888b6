"""Everything the engine asks SQLMesh: prod's snapshots, the DAG, model metadata, rendering.

The engine never names a model in Python: the order of models, their parents, time columns,
grains, audits and the SQL or DataFrames of an interval all come from the project through
this module. SQLMesh renders every model (SQL and Python) and every audit; the engine only
combines the rendered intervals of one model into one statement (``tardy.engine.stage`` and
``tardy.engine.audit``).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from sqlglot import exp, parse_one

from tardy.audited_intervals import INTERVALS_VARIABLE
from tardy.errors import TardyError
from tardy.project.headline import PUBLISHED_TAG, grain_of, tag_value_of

if t.TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame
    from sqlglot.lineage import Node
    from sqlmesh import Context
    from sqlmesh.core.snapshot import DeployabilityIndex, Snapshot


class NoProdError(TardyError):
    """The project has no prod environment yet."""


def prod_snapshots(context: Context) -> dict[str, Snapshot]:
    """Prod's snapshots by model name (``<schema>.<table>``)."""
    env = context.state_sync.get_environment("prod")
    if env is None:
        raise NoProdError("no prod environment yet: run `sqlmesh plan` first")
    snapshots = context.state_sync.get_snapshots(env.snapshots).values()
    return {s.model.name if s.is_model else s.name: s for s in snapshots}


def published_snapshots(context: Context) -> dict[str, Snapshot]:
    """Prod's snapshots of the models tagged ``published``, by model name."""
    return {
        name: snapshot
        for name, snapshot in prod_snapshots(context).items()
        if snapshot.is_model and PUBLISHED_TAG in snapshot.model.tags
    }


def by_fqn(snapshots: t.Iterable[Snapshot]) -> dict[str, Snapshot]:
    """Snapshots keyed the way SQLMesh's evaluator and renderer expect (fully qualified)."""
    return {s.name: s for s in snapshots}


def model_snapshots(context: Context) -> list[Snapshot]:
    """Prod's snapshots of the project's materialized models, upstream first (``context.dag``)."""
    snapshots = by_fqn(
        s for s in prod_snapshots(context).values() if s.is_model and not s.is_external
    )
    return [snapshots[fqn] for fqn in context.dag if fqn in snapshots]


def expand_selection(context: Context, selectors: t.Iterable[str]) -> set[str]:
    """The fully qualified names a model selection names, expanded by SQLMesh's own selector
    (what ``sqlmesh plan --restate-model`` uses: names, wildcards, ``tag:``, ``+`` for
    upstream or downstream)."""
    return set(context._new_selector().expand_model_selections(list(selectors)))


def parent_names(snapshot: Snapshot, snapshots: t.Iterable[Snapshot]) -> list[str]:
    """The model names of the snapshot's parents among ``snapshots``."""
    names = {s.name: s.model.name for s in snapshots}
    return [names[p.name] for p in snapshot.parents if p.name in names]


def has_intervals(snapshot: Snapshot) -> bool:
    """Whether the model is computed by time intervals (what tardy stages and promotes); a
    view (a dimension) is not: it is always current."""
    return snapshot.model.time_column is not None


def time_column(snapshot: Snapshot) -> str:
    """The model's time column; only a model computed by intervals has one."""
    column = snapshot.model.time_column
    if column is None:
        raise ValueError(f"{snapshot.model.name} has no time column (a view)")
    return column.column.name


def version(snapshot: Snapshot) -> str:
    """The snapshot's version; every snapshot of an environment has one (SQLMesh sets it
    when planning)."""
    if snapshot.version is None:
        raise ValueError(f"{snapshot.model.name}: a snapshot without a version (not planned)")
    return snapshot.version


def grain(snapshot: Snapshot) -> list[str]:
    """The model's grain columns (its key), empty when it declares none."""
    return list(grain_of(snapshot.model))


def tag_value(snapshot: Snapshot, name: str) -> str | None:
    """The value of a ``name=value`` tag of the model (``tags ('restate_window=28')``)."""
    return tag_value_of(snapshot.model, name)


def last_computed_day(snapshot: Snapshot) -> date | None:
    """The last day of the model's prod intervals (SQLMesh state)."""
    if not snapshot.intervals:
        return None
    end_ms = max(end for _, end in snapshot.intervals)
    return (datetime.fromtimestamp(end_ms / 1000, tz=UTC) - timedelta(days=1)).date()


def first_computed_day(snapshot: Snapshot) -> date | None:
    if not snapshot.intervals:
        return None
    start_ms = min(start for start, _ in snapshot.intervals)
    return datetime.fromtimestamp(start_ms / 1000, tz=UTC).date()


def bounds(first: str, last: str) -> tuple[int, int]:
    """SQLMesh's [start, end) epoch-millisecond bounds of the day range [first, last]."""
    from sqlmesh.utils.date import to_timestamp

    return to_timestamp(first), to_timestamp(date.fromisoformat(last) + timedelta(days=1))


@dataclass
class Renderer:
    """Renders one model's intervals against the staged tables.

    ``index`` marks the staged models non-deployable: SQLMesh then resolves them to their
    dev tables (the staged views) and every other model to prod.
    """

    context: Context
    snapshots: dict[str, Snapshot]  # by fqn
    index: DeployabilityIndex
    execution_time: int

    @classmethod
    def for_prod(cls, context: Context, execution_day: date) -> Renderer:
        """A renderer over prod's snapshots, every model deployable (``stage`` marks the staged
        ones), executing as of the end of ``execution_day``."""
        from sqlmesh.core.snapshot import DeployabilityIndex

        day = execution_day.isoformat()
        return cls(
            context,
            by_fqn(prod_snapshots(context).values()),
            DeployabilityIndex.all_deployable(),
            bounds(day, day)[1],
        )

    def stage(self, snapshot: Snapshot) -> None:
        """Mark ``snapshot`` staged: it and its children read its dev table from now on."""
        self.index = self.index.with_non_deployable(snapshot)

    def rows(
        self,
        snapshot: Snapshot,
        first: str,
        last: str,
        variables: dict[str, t.Any] | None = None,
    ) -> list[exp.Query | DataFrame | pd.DataFrame]:
        """The model's rows for [first, last]: a SQL query (SQL models) or DataFrames (Python),
        with ``variables`` set for this render only (``@VAR``, ``evaluator.var``)."""
        from sqlmesh.core.context import ExecutionContext
        from sqlmesh.core.macros import RuntimeStage

        start, end = bounds(first, last)
        model = snapshot.model
        execution = ExecutionContext(
            self.context.engine_adapter,
            self.snapshots,
            self.index,
            default_dialect=model.dialect,
            default_catalog=model.default_catalog,
        )
        return list(
            model.render(
                context=execution,
                start=start,
                end=end,
                execution_time=self.execution_time,
                snapshot=snapshot,
                runtime_stage=RuntimeStage.EVALUATING,
                snapshot_table_exists=True,
                **({"variables": variables} if variables else {}),
            )
        )

    def rows_over(
        self, snapshot: Snapshot, intervals: list[list[str]]
    ) -> list[exp.Query | DataFrame | pd.DataFrame]:
        """The model's rows for every one of ``intervals``: one render when the model reads
        its interval only through the project's interval macros (``macros/intervals.py``),
        else one per interval (their parts, in order).

        Over several intervals a SQL model is rendered with the variable ``tardy_intervals``
        for their hull and again for the first interval alone: the same query both times
        means nothing in it depends on SQLMesh's interval but through the macros, which
        select every interval, so that one query is the rows of all of them (one scan of
        each input, where k renders are k). A model that also reads ``@start_date`` or
        ``@end_date`` renders two different queries and stays one render per interval, as
        does a Python model (its DataFrames cannot be compared)."""
        if len(intervals) > 1 and snapshot.model.is_sql:
            variables = {INTERVALS_VARIABLE: intervals}
            hull = self.rows(snapshot, intervals[0][0], intervals[-1][1], variables)
            first = self.rows(snapshot, intervals[0][0], intervals[0][1], variables)
            if _same_queries(hull, first):
                return hull
        return [part for first, last in intervals for part in self.rows(snapshot, first, last)]

    def audits(
        self,
        snapshot: Snapshot,
        first: str,
        last: str,
        variables: dict[str, t.Any] | None = None,
    ) -> list[tuple[str, exp.Query]]:
        """Every audit query of the model for [first, last], by audit name (SQLMesh's own
        rendering: ``@this_model`` is the staged table restricted to the interval), with
        ``variables`` set for this render only, as in ``rows``."""
        from sqlmesh.core.macros import RuntimeStage

        start, end = bounds(first, last)
        out = []
        for audit, args in snapshot.node.audits_with_args:
            kwargs = {k: v for k, v in args.items() if k != "blocking"}
            query = snapshot.model.render_audit_query(
                audit,
                start=start,
                end=end,
                execution_time=self.execution_time,
                snapshots=self.snapshots,
                deployability_index=self.index,
                runtime_stage=RuntimeStage.AUDITING,
                **kwargs,
                **({"variables": variables} if variables else {}),
            )
            out.append((audit.name, query))
        return out

    def audits_over(
        self,
        snapshot: Snapshot,
        intervals: list[list[str]],
        variables: dict[str, t.Any] | None = None,
        rows: str | None = None,
    ) -> list[AuditQuery]:
        """Every audit of the model over ``intervals``: once over their union when only
        ``@this_model`` depends on the interval (``over_union``: the built-in audits, any
        audit of the model's own rows) or when the audit reads the interval otherwise only
        through the project's interval macros (rendered with the variable
        ``tardy_intervals``, ``tardy.audited_intervals``: a reconciliation written for it),
        else once per interval (an audit that reads another table by ``@start_date`` /
        ``@end_date``).

        ``rows`` (a Spark table name): where the model's rows of the intervals are read
        instead of its staged name, in ``@this_model`` (the staged rows table: the same rows
        without the overlay view's union with prod, and no other). An audit rendered once
        over all the intervals then reads all of it (the filter of the intervals' hull)."""
        table = exp.to_table(snapshot.table_name(self.index.is_deployable(snapshot)))
        column = time_column(snapshot) if has_intervals(snapshot) else None
        reads = exp.to_table(rows, dialect="spark") if rows is not None else table

        def render(
            extra: dict[str, t.Any] | None, spans: list[list[str]] = intervals
        ) -> list[list[tuple[str, exp.Query]]]:
            merged = {**(variables or {}), **(extra or {})} or None
            renders = [self.audits(snapshot, first, last, merged) for first, last in spans]
            if rows is None:
                return renders
            return [
                [(name, _read_from(query, table, column, reads)) for name, query in render]
                for render in renders
            ]

        several = len(intervals) > 1
        every = [list(i) for i in intervals]
        found: dict[int, list[AuditQuery]] = {}
        # A rows table holds exactly the intervals' rows, so an audit whose render depends on
        # the interval only through ``@this_model`` and the interval macros may read all of
        # it: its render over the intervals' hull (with ``tardy_intervals``) does, and its
        # render over the first interval alone tells whether anything else depends on the
        # interval (``over_union`` of the two). Two renders whatever the number of intervals.
        if several and rows is not None and (reads.name, reads.db) != (table.name, table.db):
            hull = [min(i[0] for i in intervals), max(i[1] for i in intervals)]
            first, whole = render({INTERVALS_VARIABLE: intervals}, [intervals[0], hull])
            for position, (name, query) in enumerate(whole):
                pair = [first[position][1], query]
                if over_union(pair, [intervals[0], hull], reads, column) is not None:
                    found[position] = [AuditQuery(name, query, every)]
            if len(found) == len(whole):
                return [query for position in sorted(found) for query in found[position]]
        # Else the renders of each interval set ``tardy_intervals`` (the interval macros
        # select all of them; an audit that does not call them renders as without it), and
        # ``over_union`` merges their ``@this_model`` filters. An audit they do not merge runs
        # per interval, from renders without it (``plain``).
        renders = render({INTERVALS_VARIABLE: intervals} if several else None)
        if not renders:
            return []
        plain = None if several else renders
        for position, (name, _) in enumerate(renders[0]):
            if position in found:
                continue
            queries = [render[position][1] for render in renders]
            union = over_union(queries, intervals, reads, column) if several else None
            if union is not None:
                found[position] = [AuditQuery(name, union, every)]
                continue
            plain = plain or render(None)
            found[position] = [
                AuditQuery(name, one[position][1], [list(interval)])
                for one, interval in zip(plain, intervals, strict=True)
            ]
        return [query for position in sorted(found) for query in found[position]]


def _same_queries(
    left: list[exp.Query | DataFrame | pd.DataFrame],
    right: list[exp.Query | DataFrame | pd.DataFrame],
) -> bool:
    """Whether two renders are the same SQL queries."""
    return len(left) == len(right) and all(
        isinstance(a, exp.Query) and isinstance(b, exp.Query) and a == b
        for a, b in zip(left, right, strict=True)
    )


@dataclass(frozen=True)
class AuditQuery:
    """One audit's query and the intervals it covers: every restated interval of the model
    when it is rendered over their union, else the one interval it was rendered for."""

    audit: str
    query: exp.Query
    spans: list[list[str]]


def over_union(
    queries: list[exp.Query],
    intervals: list[list[str]],
    table: exp.Table,
    column: str | None,
) -> exp.Query | None:
    """One query over the union of ``intervals``, from the renders of one audit for each
    interval (``queries``, in the same order), when the renders differ only in the interval
    that SQLMesh's ``@this_model`` puts on the audited table (``table``): the subquery
    ``SELECT * FROM table WHERE column BETWEEN first AND last``. That filter becomes ``column
    BETWEEN first_1 AND last_1 OR ...``. ``None`` when anything else in the render depends on
    the interval (``@start_date`` on another table: a reconciliation), so it must stay per
    interval. A model without a time column (a view) has no such filter: its audits render
    the same for every interval, or stay per interval."""
    canonical: set[str] = set()
    restricted: list[exp.Between] = []  # each interval's filter
    template: exp.Query | None = None
    for query in queries:
        copy = query.copy()
        filters = _interval_filters(copy, table, column)
        if len({(f.args["low"].sql(), f.args["high"].sql()) for f in filters}) > 1:
            return None
        restricted += [filters[0].copy()] if filters else []
        for found in filters:
            found.replace(exp.column(_UNION_PLACEHOLDER))
        canonical.add(copy.sql(dialect="spark"))
        template = copy
    if len(canonical) != 1 or template is None:
        return None
    if len(restricted) != len(intervals):  # the interval appears nowhere: the render is the same
        return template
    union = exp.paren(exp.or_(*restricted))
    return t.cast(
        exp.Query,
        template.transform(
            lambda node: (
                union.copy()
                if isinstance(node, exp.Column) and node.name == _UNION_PLACEHOLDER
                else node
            )
        ),
    )


_UNION_PLACEHOLDER = "__tardy_restated_intervals__"


def _interval_filters(query: exp.Query, table: exp.Table, column: str | None) -> list[exp.Between]:
    """The ``column BETWEEN first AND last`` filters ``@this_model`` puts on ``table``."""
    found: list[exp.Between] = []
    if column is None:
        return found
    for between in query.find_all(exp.Between):
        where = between.parent
        select = where.parent if isinstance(where, exp.Where) else None
        source = select.args.get("from_") if isinstance(select, exp.Select) else None
        read = source.this if isinstance(source, exp.From) else None
        if (
            isinstance(between.this, exp.Column)
            and between.this.name == column
            and isinstance(read, exp.Table)
            and (read.name, read.db) == (table.name, table.db)
        ):
            found.append(between)
    return found


def _read_from(
    query: exp.Query, table: exp.Table, column: str | None, reads: exp.Table
) -> exp.Query:
    """``query`` with ``@this_model``'s interval-filtered reads of ``table`` (see
    ``_interval_filters``) reading ``reads`` instead (their aliases kept)."""
    copy = query.copy()
    for between in _interval_filters(copy, table, column):
        select = between.parent.parent if between.parent else None
        if isinstance(select, exp.Select):  # always (``_interval_filters``): for the types
            source = select.args["from_"].this
            for part in ("this", "db", "catalog"):
                source.set(part, reads.args.get(part))
    return copy


def reads_variable(snapshot: Snapshot, name: str, value: t.Any) -> bool:
    """Whether the model's query depends on the render variable ``name``: it renders
    differently with ``name`` set to ``value`` than without (SQL models; a Python model
    never does here). How the engine learns from the project, not from model names, which
    models take a restriction (``tardy.key_index.KEY_RESTRICTION_VARIABLE``)."""
    from sqlmesh.core.model import SqlModel

    model = snapshot.model
    if not isinstance(model, SqlModel):
        return False
    day = "1970-01-01"
    plain = model.render_query(start=day, end=day)
    restricted = model.render_query(start=day, end=day, variables={name: value})
    return plain is not None and restricted is not None and plain.sql() != restricted.sql()


def declared_blocking(snapshot: Snapshot) -> dict[str, bool]:
    """Whether each audit of the model is blocking, as the project declares it.

    SQLMesh downgrades every audit of a non-deployable table to non-blocking on engines
    without table cloning (its dev previews there hold only a subset of the data). A staged
    model is the whole prod table with its restated intervals replaced, so the declared
    setting applies.
    """
    out = {}
    for audit, args in snapshot.node.audits_with_args:
        flag = args.get("blocking")
        out[audit.name] = audit.blocking if flag is None else flag == exp.true()
    return out


def spark_name(table: str) -> str:
    """A SQLMesh table name (SQLGlot's quoting) as Spark SQL."""
    return exp.to_table(table).sql(dialect="spark")


def render_macros(context: Context, model_name: str, sql: str) -> str:
    """``sql`` with a model's macros (``@natural_key()`` …) expanded, as Spark SQL."""
    from sqlmesh.core.macros import MacroEvaluator

    model = context.get_model(model_name)
    evaluator = MacroEvaluator(dialect="spark", python_env=model.python_env)
    rendered = evaluator.transform(parse_one(sql, dialect="spark"))
    if not isinstance(rendered, exp.Expr):  # macros that render to nothing, or to many
        raise ValueError(f"{model_name}: {sql!r} does not render to one expression")
    return rendered.sql("spark")


def time_lineage(context: Context, child: Snapshot, parent: Snapshot) -> exp.Expr | None:
    """The child's time column as an expression of the parent's time column, from SQLMesh's
    column lineage (``@period_first_day('week', event_date)`` for a weekly rollup of a daily
    model), with the parent column as the placeholder ``:d``; None when the child's time
    column does not derive from the parent's (a Python model, or a dependency that only
    orders the models)."""
    from sqlmesh.core.lineage import lineage

    if child.model.kind.is_symbolic or not hasattr(child.model, "query"):
        return None
    try:
        node = lineage(time_column(child), child.model)
    except Exception:  # a Python model, or a query SQLGlot cannot trace
        return None
    parent_table = exp.to_table(parent.name)
    parent_column = time_column(parent)

    def resolve(current: Node) -> exp.Expr | None:
        expression = current.expression
        if isinstance(expression, exp.Alias):
            expression = expression.this
        expression = expression.copy()
        for downstream in current.downstream:
            column_name = downstream.name.split(".")[-1].strip('"`')
            if isinstance(downstream.expression, exp.Table):
                table = downstream.expression
                same = table.name == parent_table.name and table.db == parent_table.db
                if not same or column_name != parent_column:
                    return None
                source: exp.Expr | None = exp.Placeholder(this="d")
            else:
                source = resolve(downstream)
            if source is None:
                return None
            if isinstance(expression, exp.Column) and expression.name == column_name:
                expression = source.copy()
                continue
            for column in list(expression.find_all(exp.Column)):
                if column.name == column_name:
                    column.replace(source.copy())
        if any(True for _ in expression.find_all(exp.Column)):
            return None  # a column no lineage node resolved to the parent's time column
        return expression

    return resolve(node)
