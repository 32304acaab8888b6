"""The engine's cost meter: seconds, Spark statements and executions per step, and the
slowest statements with their own seconds.

A *statement* is a root SQL execution: every query, DDL and write that tardy or SQLMesh
issues, each paying Spark's fixed per-statement cost. *Executions* adds the nested ones Spark
and Delta run inside a statement (Delta's file filtering of each table scan, its snapshot
jobs). In-process they are read from Spark's own status store (``SQLAppStatusStore``); over
Spark Connect (the warm engine, the ``connect`` gateway) the server's store is out of reach,
so the client's own calls are counted and timed as it makes them.

A step's seconds minus its statements' seconds is the client's own work: SQLMesh's renders,
Python, round trips.
"""

from __future__ import annotations

import heapq
import re
import time
import typing as t
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

SLOWEST = 5  # statements kept per meter, the slowest first
LABEL = 100  # characters of a statement's label

# A plan's SQL text in protobuf's text format (``sql { query: "..." }``, ``sql: "..."``).
_PLAN_SQL = re.compile(r'\b(?:query|sql): "((?:[^"\\]|\\.)*)"')
_PLAN_TABLE = re.compile(r'unparsed_identifier: "([^"]+)"')
_CATALOG_TABLE = re.compile(r"spark_catalog\.(\w+\.\w+)|/(\w+)\.db/(\w+)")
_WRAPPERS = ("AdaptiveSparkPlan", "ResultQueryStage", "ShuffleQueryStage", "==")


def is_connect(spark: SparkSession) -> bool:
    """A Spark Connect client (the warm engine, the ``connect`` gateway): its driver is the
    server's, another process."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


@dataclass(frozen=True, order=True)
class Timed:
    """One statement and its own seconds (submission to completion)."""

    seconds: float
    statement: str
    step: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"step": self.step, "seconds": round(self.seconds, 3), "statement": self.statement}


def _squeeze(text: str) -> str:
    return " ".join(text.split())[:LABEL]


def plan_label(plan: t.Any) -> str:
    """A Connect plan's SQL text, or else its operation and the tables it names."""
    text = str(plan)
    found = _PLAN_SQL.search(text)
    if found:
        return _squeeze(found.group(1).replace("\\n", " ").replace('\\"', '"'))
    kind = plan.WhichOneof("op_type")
    inner = getattr(plan, kind)
    operation = inner.WhichOneof("command_type" if kind == "command" else "rel_type")
    tables = dict.fromkeys(_PLAN_TABLE.findall(text))
    return _squeeze(" ".join([str(operation), *list(tables)[:3]]))


def execution_label(physical_plan: str) -> str:
    """An in-process execution's label: its physical plan's first operator (past the adaptive
    wrappers) and the catalog tables it reads or writes."""
    operator = ""
    for line in physical_plan.splitlines()[1:]:
        name = line.strip(" +-:*").split(" (")[0]  # "* HashAggregate (5)": whole-stage codegen
        if name and not name.startswith(_WRAPPERS):
            operator = name
            break
    tables = dict.fromkeys(
        match[0] or f"{match[1]}.{match[2]}" for match in _CATALOG_TABLE.findall(physical_plan)
    )
    return _squeeze(" ".join([operator, *list(tables)[:3]]))


def _client_calls(spark: SparkSession) -> t.Any:
    """The Connect client's private calls, wrapped once to count and time each plan it has
    executed (``counts[0]``) and each analysis round trip (``counts[1]``; ``df.schema``,
    ``df.columns``: docs/facts.md, fact 20). Untyped on purpose: private attributes of the
    client."""
    client: t.Any = spark.client
    if getattr(client, "_tardy_counts", None) is None:
        counts: list[int] = [0, 0]
        sinks: list[list[tuple[float, t.Any]]] = []
        execute, analyze = client._execute_and_fetch_as_iterator, client._analyze

        def executed(request: t.Any, *args: t.Any, **kwargs: t.Any) -> t.Any:
            counts[0] += 1
            started = time.perf_counter()
            try:
                yield from execute(request, *args, **kwargs)
            finally:
                for sink in sinks:
                    sink.append((time.perf_counter() - started, request.plan))

        def analysed(*args: t.Any, **kwargs: t.Any) -> t.Any:
            counts[1] += 1
            return analyze(*args, **kwargs)

        client._execute_and_fetch_as_iterator, client._analyze = executed, analysed
        client._tardy_counts, client._tardy_sinks = counts, sinks
    return client


def _status_store(spark: SparkSession) -> t.Any:
    jvm_session = spark._jsparkSession
    jvm_session.sparkContext().listenerBus().waitUntilEmpty()  # the store is fed async
    return jvm_session.sharedState().statusStore()


def _retained(store: t.Any) -> tuple[int, int]:
    """(how many executions the status store retains, the latest one's id; -1: none).
    Past ``spark.sql.ui.retainedExecutions`` Spark evicts the oldest ones asynchronously, so
    the count and the list (two calls) can disagree: a list shorter than the count said is
    read again (a long ``tardy demo`` met it: an empty list at the count's last offset)."""
    for _ in range(100):
        retained = int(store.executionsCount())
        if retained == 0:
            return 0, -1
        latest = store.executionsList(retained - 1, 1)
        if latest.size() > 0:
            return retained, int(latest.apply(0).executionId())
    raise RuntimeError("Spark's SQL status store kept changing while it was read")


def last_execution(spark: SparkSession) -> int:
    """The id of the latest SQL execution of this JVM (-1: none yet); ids only grow."""
    return _retained(_status_store(spark))[1]


@dataclass(frozen=True)
class Since:
    """What ran since an execution: statements, executions, the statements' own seconds and
    the slowest of them."""

    statements: int
    executions: int
    seconds: float
    slowest: list[Timed]


def executions_since(spark: SparkSession, after: int, ended: float | None = None) -> Since:
    """Statements and executions run since execution ``after``: a *statement* is a root
    execution (a query, DDL or write issued by tardy or SQLMesh); *executions* adds the
    nested ones Spark and Delta run inside a statement. Executions evicted from the status
    store before they are read (more than ``spark.sql.ui.retainedExecutions`` in a step, or
    an eviction between two reads) are counted, but not among the statements.

    A statement's seconds run from its submission to its completion. Spark records the
    completion asynchronously, after the statement has returned (its metrics are aggregated
    first), so the last statements may not have one yet: they are taken to have ended at
    ``ended`` (epoch seconds; default now), when the caller knows they had."""
    store = _status_store(spark)
    retained, last = _retained(store)
    count = last - after
    if retained == 0 or count <= 0:
        return Since(0, 0, 0.0, [])
    recent = store.executionsList(max(retained - count, 0), min(count, retained))
    roots = []
    for i in range(recent.size()):
        execution = recent.apply(i)
        if execution.rootExecutionId() != execution.executionId():
            continue
        completed = execution.completionTime()
        end = completed.get().getTime() / 1000 if completed.isDefined() else None
        if end is None:
            end = time.time() if ended is None else ended
        roots.append((max(end - execution.submissionTime() / 1000, 0.0), execution))
    slowest = [
        Timed(seconds, execution_label(str(execution.physicalPlanDescription())))
        for seconds, execution in heapq.nlargest(SLOWEST, roots, key=lambda r: r[0])
    ]
    return Since(len(roots), count, sum(seconds for seconds, _ in roots), slowest)


class Measured(t.TypedDict):
    """A meter's measures per step (``Meter.as_dict``) and its slowest statements."""

    seconds: dict[str, float]
    statements: dict[str, int]
    executions: dict[str, int]
    statement_seconds: dict[str, float]
    slowest: list[dict[str, object]]


@dataclass
class Meter:
    """Seconds, Spark statements and executions per step; a step may be entered many times.
    ``statement_seconds`` is the statements' own share of a step's seconds (over Connect,
    the client's wait for each plan) and ``slowest`` the slowest statements of all steps."""

    spark: SparkSession
    seconds: dict[str, float] = field(default_factory=dict)
    statements: dict[str, int] = field(default_factory=dict)
    executions: dict[str, int] = field(default_factory=dict)
    statement_seconds: dict[str, float] = field(default_factory=dict)
    slowest: list[Timed] = field(default_factory=list)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """On a classic session, *statements* are root SQL executions and *executions* add
        the nested ones (``executions_since``); over Spark Connect, statements are the plans
        the client had executed and executions add its analysis round trips."""
        connect = is_connect(self.spark)
        started = time.perf_counter()
        client = _client_calls(self.spark) if connect else None
        counted = list(client._tardy_counts) if client is not None else [0, 0]
        timed: list[tuple[float, t.Any]] = []
        if client is not None:
            client._tardy_sinks.append(timed)
        last = -1 if connect else last_execution(self.spark)
        try:
            yield
        finally:
            ended = time.time()  # every statement of the step has returned by now
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
            if client is not None:
                # By identity: two steps' lists of the same plans are equal (nested meters).
                client._tardy_sinks[:] = [s for s in client._tardy_sinks if s is not timed]
                executed, analysed = client._tardy_counts
                since = Since(
                    executed - counted[0],
                    executed - counted[0] + analysed - counted[1],
                    sum(seconds for seconds, _ in timed),
                    [
                        Timed(seconds, plan_label(plan))
                        for seconds, plan in heapq.nlargest(SLOWEST, timed, key=lambda r: r[0])
                    ],
                )
            else:
                since = executions_since(self.spark, last, ended)
            self.statements[name] = self.statements.get(name, 0) + since.statements
            self.executions[name] = self.executions.get(name, 0) + since.executions
            own = self.statement_seconds.get(name, 0.0)
            self.statement_seconds[name] = own + since.seconds
            found = [Timed(x.seconds, x.statement, name) for x in since.slowest]
            self.slowest = heapq.nlargest(SLOWEST, [*self.slowest, *found])

    def as_dict(self) -> Measured:
        return {
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "statements": dict(self.statements),
            "executions": dict(self.executions),
            "statement_seconds": {k: round(v, 3) for k, v in self.statement_seconds.items()},
            "slowest": [timed.as_dict() for timed in self.slowest],
        }
