"""``tardy restate``: detect → stage → audit → diff → promote, and its companions.

- ``restate``: under the restatement lock, finish or discard an interrupted restatement,
  detect the manifest once, then walk the DAG upstream first: each model with days to
  restate (its detected days, plus the days its parents' *changed* days reach, from
  ``tardy.engine.closure``) is staged in one write (``stage``), audited in one query
  (``audit``) and diffed in one read (``diff``); only the days whose rows changed cascade to
  its children. Then the circuit breaker, the review files, and unless ``promote=False`` the
  promotion of the changed days (``promote``) and the arrival watermark.
- ``promote_staged``: promote a staged restatement later (``tardy promote <id>``), or resume an
  interrupted promotion; idempotent.
- ``rollback``: restore every table a promotion changed to its pre-promotion version, and put
  the arrival watermark back so that ``tardy detect`` sees those rows again.
- ``discard``: drop a staged restatement; or undo a promotion that stopped half-way (a
  restatement stuck ``promoting``): restore the tables it already committed, then drop the
  stage.
- ``hold``: take the restatement lock before the project and Spark open (the CLI does), so
  that on the embedded default the lock, not the metastore, decides between two processes.

Every step appends to the restatement log (``tardy.restatement_log``); the log is also what
``promote``/``rollback`` read back, so they work from a new process. Each step's seconds and
Spark statements are measured (``delta.Meter``) and reported in ``--json``.
"""

from __future__ import annotations

import json
import secrets
import typing as t
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from enum import StrEnum
from pathlib import Path

from tardy import lock
from tardy import versions as publishing
from tardy.engine import audit, delta, dimension, environment, log, sqlmesh_api, trail
from tardy.engine import promote as promotion
from tardy.engine.closure import Closure, days_of, ranges
from tardy.engine.detect import WATERMARK_TABLE, Manifest, advance_watermark, detect
from tardy.engine.diff import Breaker, Diff, breaker, diff_table
from tardy.engine.log import Action, LogEntry
from tardy.engine.named import Selection
from tardy.engine.named import manifest as named_manifest
from tardy.engine.stage import StagedTable, drop_stage, key_restriction, prepare, write
from tardy.errors import Refused, RestatementFailed
from tardy.home import activate
from tardy.key_index import KeySet

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context
    from sqlmesh.core.config import Config

DEFAULT_MAX_CHANGE = 0.25


class RestatementError(RestatementFailed):
    """A restatement stopped; prod is unchanged unless the message says otherwise."""


class BreakerTripped(RestatementError):
    pass


class PendingRestatement(Refused, RestatementError):
    pass


class Status(StrEnum):
    NOTHING_TO_DO = "nothing_to_do"
    DRY_RUN = "dry_run"
    STAGED = "staged"
    PROMOTED = "promoted"
    ALREADY_PROMOTED = "already_promoted"


@dataclass
class Outcome:
    restatement_id: str | None
    status: Status
    manifest: Manifest | None = None
    diff: Diff | None = None
    evaluated: dict[str, list[list[str]]] = field(default_factory=dict)  # staged intervals
    promoted: dict[str, list[list[str]]] = field(default_factory=dict)  # changed days committed
    recovered: str | None = None  # what happened to an interrupted restatement
    report_dir: str | None = None
    advanced_watermark: bool = False
    # While staged: the environment's name and each model's view in it (``environment``).
    environment: str | None = None
    views: dict[str, str] = field(default_factory=dict)
    audits: list[audit.AuditResult] = field(default_factory=list)  # every audit run, staged
    seconds: dict[str, float] = field(default_factory=dict)  # per step: detect, stage, ...
    statements: dict[str, int] = field(default_factory=dict)  # Spark statements per step
    executions: dict[str, int] = field(default_factory=dict)  # and with nested executions
    # Promoted: the Delta version committed per model, and what that published
    # (``tardy.versions``: the published models' new versions).
    table_versions: dict[str, int] = field(default_factory=dict)
    published: list[dict[str, object]] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            **(self.manifest.as_dict() if self.manifest else {}),
            "restatement_id": self.restatement_id,
            "status": str(self.status),
            "evaluated": self.evaluated,
            "promoted": self.promoted,
            "diff": self.diff.as_dict() if self.diff else None,
            "recovered": self.recovered,
            "report_dir": self.report_dir,
            "advanced_watermark": self.advanced_watermark,
            "environment": self.environment,
            "views": self.views,
            "audits": [result.as_dict() for result in self.audits],
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "statements": self.statements,
            "executions": self.executions,
            "published": self.published,
        }


def new_id() -> str:
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def report_dir(restatement_id: str) -> Path:
    return activate().root / "restatements" / restatement_id


def watched(context: Context, threshold: float | None) -> Breaker:
    """The circuit breaker's model, measure and threshold (config variables)."""
    variables = context.config.variables
    return Breaker(
        model=variables.get("restatement_breaker_model"),
        measure=str(variables.get("restatement_breaker_measure", "revenue")),
        threshold=float(variables.get("restatement_max_change", DEFAULT_MAX_CHANGE))
        if threshold is None
        else threshold,
    )


def restate(
    context: Context,
    spark: SparkSession,
    reason: str,
    *,
    dry_run: bool = False,
    promote: bool = True,
    accept_large_change: bool = False,
    threshold: float | None = None,
    restatement_id: str | None = None,
    selection: Selection | None = None,
    environment_name: str | None = None,
) -> Outcome:
    """Restate what ``detect`` finds, or, with a ``selection``, the models it names over its
    range (``tardy.engine.named``); the same flow either way. Left staged (``promote=False``)
    it is readable as the virtual environment ``environment_name`` (default: named after
    the restatement; ``tardy.engine.environment``)."""
    if not reason.strip():
        raise ValueError("a restatement needs a --reason")

    def find() -> Manifest:
        if selection is None:
            return detect(context, spark)
        return named_manifest(context, spark, selection)

    meter = delta.Meter(spark)
    if dry_run:  # print only: no lock, no recovery, no write
        with meter.step("detect"):
            manifest = find()
        return Outcome(None, Status.DRY_RUN, manifest, **meter.as_dict())  # type: ignore[arg-type]
    restatement_id = restatement_id or new_id()
    env = environment.name_for(restatement_id, environment_name)
    with _locked(context, spark, restatement_id) as recovered:
        pending = [
            row
            for row in log.latest(spark).values()
            if row["status"] in (Action.STAGED, Action.PROMOTING, Action.DISCARDING)
        ]
        if pending:
            waiting = pending[0]["restatement_id"]
            raise PendingRestatement(
                f"restatement {waiting} is {pending[0]['status']} and awaiting review: "
                f"`tardy promote {waiting}` or `tardy discard {waiting}` first"
            )
        with meter.step("detect"):
            manifest = find()
        if manifest.is_empty:
            with meter.step("log"):
                advanced = _advance(context, spark, manifest, reason)
            return Outcome(
                None,
                Status.NOTHING_TO_DO,
                manifest,
                recovered=recovered,
                advanced_watermark=advanced,
                **meter.as_dict(),  # type: ignore[arg-type]
            )
        outcome = _stage_and_promote(
            context,
            spark,
            restatement_id,
            reason,
            manifest,
            meter,
            promote=promote,
            accept_large_change=accept_large_change,
            watch=watched(context, threshold),
            environment_name=env,
        )
        outcome.recovered = recovered
        return outcome


def moves_watermark(manifest: dict[str, t.Any]) -> bool:
    """Whether promoting the manifest moves the arrival watermark: a detected restatement
    does (to the bronze version it read), a named one carries the watermark's own version."""
    since = manifest["since_bronze_version"]
    sources = manifest.get("source_versions") or {}
    return manifest["bronze_version"] != (-1 if since is None else since) or sources != (
        manifest.get("since_source_versions") or {}
    )


def watermark_target(
    context: Context, manifest: dict[str, t.Any]
) -> tuple[int, str | None, dict[str, int]] | None:
    """Where promoting the manifest moves the arrival watermark: (bronze version, arrival
    time, the dimensions' bronze versions), or None. Late sales inside the grace window still
    wait for the next run: then the sales side stays (they are checked again next time)
    while the dimensions' versions still advance (``detect``: the next run's lookback
    recomputes a dimension's altered days inside the window). A named restatement moves
    nothing."""
    if not moves_watermark(manifest):
        return None
    snapshots = sqlmesh_api.model_snapshots(context)
    children = {c.model.name for d in dimension.dimensions(context, snapshots) for c in d.children}
    sales_pending = any(
        spans for model, spans in manifest["absorbed_by_next_run"].items() if model not in children
    )
    since = manifest["since_bronze_version"]
    sources = dict(manifest.get("source_versions") or {})
    if not sales_pending:
        return manifest["bronze_version"], manifest["arrival_watermark"], sources
    if sources == (manifest.get("since_source_versions") or {}):
        return None
    return -1 if since is None else since, manifest["previous_watermark"], sources


def _advance(context: Context, spark: SparkSession, manifest: Manifest, reason: str) -> bool:
    """Advance the arrival watermark as far as the manifest allows (``watermark_target``)."""
    target = watermark_target(context, manifest.as_dict())
    if target is None:
        return False
    version, stamp, sources = target
    advance_watermark(spark, version, stamp, reason, sources)
    return True


@dataclass
class Staging:
    tables: list[StagedTable]
    diff: Diff
    audits: list[audit.AuditResult]


def stage_all(
    context: Context,
    spark: SparkSession,
    restatement_id: str,
    roots: dict[str, set[date]],
    meter: delta.Meter,
    watch: Breaker,
    keys: dict[str, KeySet] | None = None,
) -> Staging:
    """Stage, audit and diff every model the roots reach, upstream first, cascading only the
    days whose rows changed. A model with known changed ``keys`` that takes the key
    restriction is written by key (``stage.key_restriction``); the others, and its children,
    by interval. Raises ``audit.AuditFailed`` (after staging everything) when a blocking
    audit fails."""
    snapshots = sqlmesh_api.model_snapshots(context)
    closure = Closure(context, snapshots)
    reach = closure.downstream(roots)
    last = max((d for days in reach.values() for d in days), default=date.today())
    renderer = sqlmesh_api.Renderer.for_prod(context, execution_day=last)
    changed: dict[str, set[date]] = {}
    tables: list[StagedTable] = []
    intervals = []
    results: list[audit.AuditResult] = []
    trips = []
    for snapshot in snapshots:
        name = snapshot.model.name
        if name not in closure.snapshots:  # a view: never staged, always current
            continue
        days = set(roots.get(name, set()))
        for parent in closure.parents(name):
            days |= closure.map(parent, name, changed.get(parent, set()))
        if not days:
            continue
        renderer.stage(snapshot)  # it and its children now read its staged table
        with meter.step("stage"):
            restriction = key_restriction(snapshot, (keys or {}).get(name))
            table = prepare(spark, snapshot, snapshots, ranges(days), restriction)
            write(spark, renderer, snapshot, table, restriction)
        with meter.step("audit"):
            variables = restriction.variables() if restriction else None
            results += audit.run(spark, renderer, snapshot, table.intervals, variables)
        with meter.step("diff"):
            table_diff = diff_table(spark, table, sqlmesh_api.grain(snapshot))
        changed[name] = table_diff.changed_days
        table.changed = ranges(changed[name])
        tables.append(table)
        intervals += table_diff.intervals
        if name == watch.model:
            trips = breaker(table_diff, watch)
        promotion.failpoint("stage", len(tables))
    review = Diff(restatement_id, intervals, watch.threshold, trips, watch.model)
    if any(r.failed and r.blocking for r in results):
        raise audit.AuditFailed(results)
    return Staging(tables, review, results)


def _stage_and_promote(
    context: Context,
    spark: SparkSession,
    restatement_id: str,
    reason: str,
    manifest: Manifest,
    meter: delta.Meter,
    *,
    promote: bool,
    accept_large_change: bool,
    watch: Breaker,
    environment_name: str,
) -> Outcome:
    snapshots = {
        s.model.name: s.version for s in sqlmesh_api.prod_snapshots(context).values() if s.is_model
    }
    base = dict(
        restatement_id=restatement_id,
        reason=reason,
        intervals={m: spans for m, spans in manifest.impacted.items() if spans},
        bronze_version=manifest.bronze_version,
        arrival_watermark=_ts(manifest.arrival_watermark),
        snapshot_versions=snapshots,
    )
    with meter.step("log"):
        log.append(spark, LogEntry(action=Action.STAGING, **base))  # type: ignore[arg-type]
    folder = report_dir(restatement_id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps(manifest.as_dict(), indent=2, default=str))
    roots = {model: days_of(spans) for model, spans in manifest.roots.items()}
    try:
        staging = stage_all(context, spark, restatement_id, roots, meter, watch, manifest.keys)
    except audit.AuditFailed as failure:
        drop_stage(context, spark)
        failed = LogEntry(
            action=Action.AUDIT_FAILED,
            audits=failure.results,
            **base,  # type: ignore[arg-type]
        )
        failed.message = str(failure)
        log.append(spark, failed)
        raise RestatementError(
            f"{failure}; prod is unchanged (restatement {restatement_id})"
        ) from failure
    except Exception as error:
        _discard(context, spark, restatement_id, reason, f"failed while staging: {error}")
        raise
    review, staged = staging.diff, staging.tables
    (folder / "diff.md").write_text(review.markdown())
    (folder / "diff.json").write_text(json.dumps(review.as_dict(), indent=2, default=str))
    totals = review.totals()
    base["intervals"] = {table.model: table.intervals for table in staged}
    details = dict(
        rows_before={
            m: {"rows": v["rows_before"], "sums": v["sums_before"]} for m, v in totals.items()
        },
        rows_after={
            m: {"rows": v["rows_after"], "sums": v["sums_after"]} for m, v in totals.items()
        },
        table_versions_before={table.model: table.version_before for table in staged},
        audits=staging.audits,
    )
    if review.breaker and not accept_large_change:
        drop_stage(context, spark)
        message = (
            f"circuit breaker: {len(review.breaker)} closed day(s) change by more than "
            f"{watch.threshold:.0%} (see {folder / 'diff.md'}); rerun with "
            "--accept-large-change to promote anyway"
        )
        log.append(
            spark,
            LogEntry(action=Action.BREAKER_TRIPPED, message=message, **base, **details),  # type: ignore[arg-type]
        )
        raise BreakerTripped(f"{message}; prod is unchanged (restatement {restatement_id})")
    with meter.step("log"):
        log.append(
            spark,
            LogEntry(
                action=Action.STAGED,
                staged_tables=staged,
                manifest=manifest,
                accepted_large_change=bool(review.breaker),
                message=f"staged {len(staged)} table(s), "
                f"{sum(1 for table in staged if table.changed)} with changed days",
                **base,  # type: ignore[arg-type]
                **details,  # type: ignore[arg-type]
            ),
        )
    outcome = Outcome(
        restatement_id,
        Status.STAGED,
        manifest,
        review,
        evaluated={table.model: table.intervals for table in staged},
        report_dir=str(folder),
        audits=staging.audits,
    )
    if not promote:
        with meter.step("environment"):
            outcome.views = environment.create(
                context, spark, restatement_id, environment_name, staged
            )
        outcome.environment = environment_name
    if promote:
        with meter.step("promote"):
            promoted = _promote(context, spark, restatement_id, publish=False)
        outcome.status = promoted.status
        outcome.promoted = promoted.promoted
        outcome.advanced_watermark = promoted.advanced_watermark
        with meter.step("publish"):
            outcome.published = _publish(context, spark, restatement_id, promoted)
    outcome.seconds, outcome.statements = dict(meter.seconds), dict(meter.statements)
    outcome.executions = dict(meter.executions)
    return outcome


def _staged_entry(
    spark: SparkSession, restatement_id: str
) -> tuple[dict[str, t.Any], list[dict[str, t.Any]]]:
    rows = log.entries(spark, restatement_id)
    if not rows:
        raise RestatementError(f"no restatement {restatement_id} in {log.LOG_TABLE}")
    staged = [row for row in rows if row["action"] == Action.STAGED]
    if not staged:
        raise RestatementError(
            f"restatement {restatement_id} was never staged ({rows[-1]['status']})"
        )
    return staged[-1], rows


def _staged_tables(entry: dict[str, t.Any]) -> list[StagedTable]:
    """The staged tables a ``staged`` log entry recorded."""
    return [StagedTable(**table) for table in entry["staged_tables"]]


def _publish(
    context: Context, spark: SparkSession, restatement_id: str, promoted: Outcome
) -> list[dict[str, object]]:
    """Publish the new versions of the published models (``tardy.versions``) after a
    promotion; nothing after a no-op one."""
    if promoted.status != Status.PROMOTED:
        return []
    published = publishing.publish(
        context, spark, restatement_id=restatement_id, versions=promoted.table_versions
    )
    return [p.as_dict() for p in published.publications]


def _promote(
    context: Context, spark: SparkSession, restatement_id: str, *, publish: bool = True
) -> Outcome:
    """Promote (or finish promoting) a staged restatement, then publish (unless the caller
    meters publishing itself); the caller holds the lock."""
    entry, rows = _staged_entry(spark, restatement_id)
    status = rows[-1]["status"]
    if status == Action.PROMOTED:
        return Outcome(
            restatement_id, Status.ALREADY_PROMOTED, report_dir=str(report_dir(restatement_id))
        )
    if status not in (Action.STAGED, Action.PROMOTING):
        raise RestatementError(f"restatement {restatement_id} is {status}: nothing to promote")
    staged = _staged_tables(entry)
    prod = [s for s in sqlmesh_api.prod_snapshots(context).values() if s.is_model]
    current = {s.model.name: s.version for s in prod}
    changed = sorted(m for m, v in entry["snapshot_versions"].items() if current.get(m) != v)
    if changed:
        raise promotion.ProdChangedError(
            f"prod's model versions changed since staging ({', '.join(changed)}): discard "
            f"restatement {restatement_id} and restate again"
        )
    base = {
        key: entry[key]
        for key in (
            "restatement_id",
            "reason",
            "intervals",
            "bronze_version",
            "arrival_watermark",
            "snapshot_versions",
            "table_versions_before",
            "rows_before",
            "rows_after",
        )
    }
    # The log's restated periods are the days promotion commits, not every evaluated one.
    base["intervals"] = {table.model: table.changed for table in staged if table.changed}
    # Every table is checked before the intent: a refusal (prod changed since staging) leaves
    # the restatement staged and prod untouched, to be discarded and restated.
    checked = promotion.check(spark, restatement_id, staged)
    if status == Action.STAGED:
        log.append(spark, LogEntry(action=Action.PROMOTING, **base))
    versions, committed = promotion.promote(spark, restatement_id, staged, checked)
    trail.record_promotion(
        spark,
        restatement_id,
        entry["reason"],
        log.actor(),
        staged,
        versions,
        {s.model.name: sqlmesh_api.grain(s) for s in prod},
    )
    promotion.failpoint("trail", 1)
    manifest = entry["manifest"]
    target = watermark_target(context, manifest)
    advanced = target is not None
    if target is not None:
        version, stamp, sources = target
        advance_watermark(
            spark, version, stamp, f"restatement {restatement_id}: {entry['reason']}", sources
        )
    log.append(
        spark,
        LogEntry(
            action=Action.PROMOTED,
            table_versions_after=versions,
            message=f"committed {', '.join(committed) or 'nothing new'} in this call; "
            f"{len(versions)} of {len(staged)} staged tables had changed days",
            **base,
        ),
    )
    drop_stage(context, spark)
    outcome = Outcome(
        restatement_id,
        Status.PROMOTED,
        evaluated={table.model: table.intervals for table in staged},
        promoted={table.model: table.changed for table in staged if table.changed},
        report_dir=str(report_dir(restatement_id)),
        advanced_watermark=advanced,
        table_versions=versions,
    )
    if publish:
        outcome.published = _publish(context, spark, restatement_id, outcome)
    return outcome


_held: set[str] = set()  # identities of the restatement locks this process holds (``hold``)


def restatement_lock(config: Config, gateway: str | None = None) -> lock.RestatementLock:
    """The restatement lock of ``gateway`` (None: the config's default): the file lock of the
    data home for DuckDB state, the PostgreSQL lock of the state database for PostgreSQL
    state, so that exactly the processes sharing SQLMesh's state exclude each other."""
    return lock.for_state(config.get_state_connection(gateway), activate().root)


@contextmanager
def hold(restatement_id: str, gateway: str | None = None) -> Iterator[None]:
    """Hold the restatement lock of ``gateway`` (None: the config's default) from now on,
    for ``restatement_id``.

    The CLI takes it before it opens the project: on the embedded default the first process
    to open a data home owns its DuckDB state and Derby metastore until it exits, so the
    process that wins the lock must also be the first to open them (the loser is refused at
    once, exit 3, before it touches either). The config is read without a Context or Spark
    (``project.load_config``). ``_locked`` inside finds it held and only recovers. Raises
    ``lock.LockedError`` when another process holds it.
    """
    from tardy.project import load_config

    activate()  # TARDY_HOME absolute before project.yaml renders it
    held = restatement_lock(load_config(), gateway)
    if held.identity in _held:
        yield
        return
    with held.exclusive(restatement_id):
        _held.add(held.identity)
        try:
            yield
        finally:
            _held.discard(held.identity)


@contextmanager
def _locked(context: Context, spark: SparkSession, restatement_id: str) -> Iterator[str | None]:
    """Hold the restatement lock, after finishing whatever the log says was interrupted
    (a holder killed mid-way): yields what recovery did, or None.

    Recovery reads the log, not the lock's holder record: under the lock nobody else is
    working on a restatement, so any whose latest action is an intent (``log.INTERRUPTED``)
    was cut off. ``restatement_id``'s own interrupted work is left to the command acting on it.
    """
    held = restatement_lock(context.config, context.selected_gateway)
    with nullcontext() if held.identity in _held else held.exclusive(restatement_id):
        done = [
            _recover(context, spark, rid, row)
            for rid, row in log.latest(spark).items()
            if row["status"] in log.INTERRUPTED and rid != restatement_id
        ]
        yield "; ".join(done) or None


def _recover(context: Context, spark: SparkSession, restatement_id: str, row: dict) -> str:
    """Finish (promotion, rollback, discard) or discard (staging) an interrupted restatement;
    says what it did, or why it could not (then the restatement stays as the log says, and
    the command goes on: one stuck restatement must not block every other)."""
    try:
        return _finish(context, spark, restatement_id, row)
    except RestatementFailed as error:
        return f"could not finish restatement {restatement_id} ({row['status']}): {error}"


def _finish(context: Context, spark: SparkSession, restatement_id: str, row: dict) -> str:
    status = row["status"]
    if status == Action.PROMOTING:
        _promote(context, spark, restatement_id)
        return f"completed the interrupted promotion of restatement {restatement_id}"
    if status == Action.ROLLING_BACK:
        _rollback(spark, restatement_id, row["message"] or "")
        return f"completed the interrupted rollback of restatement {restatement_id}"
    if status == Action.DISCARDING:
        _discard_promoting(context, spark, restatement_id)
        return f"completed the interrupted discard of restatement {restatement_id}"
    _discard(context, spark, restatement_id, row["reason"], "interrupted while staging")
    return f"discarded restatement {restatement_id}, interrupted while staging"


def latest_with_suffix(spark: SparkSession, suffix: str) -> str | None:
    """The latest restatement whose id ends with ``suffix`` (a request's name), or None."""
    ids = [rid for rid in log.latest(spark) if rid.endswith(suffix)]
    return max(ids) if ids else None


def promote_staged(context: Context, spark: SparkSession, restatement_id: str) -> Outcome:
    """``tardy promote <id>``: promote a staged restatement, or finish an interrupted one."""
    with _locked(context, spark, restatement_id):
        return _promote(context, spark, restatement_id)


def discard(context: Context, spark: SparkSession, restatement_id: str) -> str:
    """``tardy discard <id>``: drop a staged restatement (prod was never touched), or undo a
    promotion that stopped half-way (``promoting``, e.g. killed, then refused because prod
    changed): restore the tables it committed, then drop the stage."""
    with _locked(context, spark, restatement_id):
        rows = log.entries(spark, restatement_id)
        if not rows:
            raise RestatementError(f"no restatement {restatement_id}")
        status = rows[-1]["status"]
        if status in (Action.PROMOTING, Action.DISCARDING):
            return _discard_promoting(context, spark, restatement_id)
        if status not in (Action.STAGED, Action.STAGING):
            hint = (
                f"; to undo it, `tardy rollback {restatement_id} --reason ...`"
                if status == Action.PROMOTED
                else ""
            )
            raise RestatementError(
                f"restatement {restatement_id} is {status}: nothing to discard{hint}"
            )
        _discard(context, spark, restatement_id, rows[-1]["reason"], "discarded by request")
        return f"discarded restatement {restatement_id}; prod was never touched"


def _discard(
    context: Context, spark: SparkSession, restatement_id: str, reason: str | None, why: str
) -> None:
    """Drop the staged clones and log the discard (prod was never touched)."""
    drop_stage(context, spark)
    if reason is not None:
        log.append(
            spark,
            LogEntry(
                restatement_id=restatement_id, action=Action.DISCARDED, reason=reason, message=why
            ),
        )


def _discard_promoting(context: Context, spark: SparkSession, restatement_id: str) -> str:
    """Undo a promotion that stopped half-way, then drop the stage; the caller holds the lock.

    The tables the promotion committed (its tagged commits) are restored to their version
    before it, downstream first, each by one tagged ``RESTORE`` (as a rollback does); every
    one is checked first, and the intent (``discarding``) is logged before the first restore,
    so a discard killed half-way is finished by the next command that takes the lock. The
    arrival watermark goes back if the promotion had advanced it.
    """
    entry, rows = _staged_entry(spark, restatement_id)
    status = rows[-1]["status"]
    staged = _staged_tables(entry)
    tables = {table.model: table.prod_table for table in staged}
    before = {table.model: table.version_before for table in staged}
    after = promotion.promoted_versions(spark, restatement_id, staged)
    pending = promotion.check_rollback(
        spark,
        restatement_id,
        tables,
        after,
        undo=f"Restatement {restatement_id} stays {status}, prod holding its rows in "
        f"{', '.join(after)} only. To make prod whole again, recompute its days from bronze "
        "with the stock restatement: "
        + "; ".join(f"`{command}`" for command in entry["manifest"]["stock_commands"])
        + " (closing such a restatement in the log is not built yet: docs/concurrency.md)",
    )
    common = dict(
        restatement_id=restatement_id,
        reason=entry["reason"],
        intervals=entry["intervals"],
        table_versions_before=after,
    )
    if status == Action.PROMOTING:
        log.append(
            spark,
            LogEntry(
                action=Action.DISCARDING,
                message="restoring the tables its promotion committed: "
                + (", ".join(after) or "none"),
                **common,  # type: ignore[arg-type]
            ),
        )
    versions = promotion.rollback(spark, restatement_id, tables, before, after, pending)
    trail.record_rollback(spark, restatement_id, "discard of a half-done promotion", log.actor())
    manifest = entry["manifest"]
    if _advanced_by(spark, restatement_id):
        since = manifest["since_bronze_version"]
        advance_watermark(
            spark,
            -1 if since is None else since,
            manifest["previous_watermark"],
            f"discard of restatement {restatement_id}",
            manifest["since_source_versions"],
        )
    drop_stage(context, spark)
    restored = ", ".join(f"{model} to version {before[model]}" for model in after)
    log.append(
        spark,
        LogEntry(
            action=Action.DISCARDED,
            table_versions_after=versions,
            message=f"discarded by request after a partial promotion; restored "
            f"{restored or 'nothing (no table was committed)'}",
            **common,  # type: ignore[arg-type]
        ),
    )
    return (
        f"discarded restatement {restatement_id}, whose promotion had stopped half-way: "
        f"restored {restored or 'nothing (no table was committed)'}; the stage is dropped"
    )


def _advanced_by(spark: SparkSession, restatement_id: str) -> bool:
    """Whether the latest arrival watermark was recorded by ``restatement_id``'s promotion."""
    row = spark.sql(
        f"SELECT reason FROM {WATERMARK_TABLE} "
        "ORDER BY advanced_at DESC, bronze_version DESC LIMIT 1"
    ).first()
    return row is not None and row.reason.startswith(f"restatement {restatement_id}:")


def rollback(
    context: Context, spark: SparkSession, restatement_id: str, reason: str
) -> dict[str, int]:
    """``tardy rollback <id>``: every table the promotion changed back to its prior version
    (or finish an interrupted rollback of it)."""
    with _locked(context, spark, restatement_id):
        return _rollback(spark, restatement_id, reason)


def _rollback(spark: SparkSession, restatement_id: str, reason: str) -> dict[str, int]:
    """Roll back a promoted restatement; the caller holds the lock.

    Checks every table first (a table that changed after the promotion refuses the whole
    rollback: the log stays ``promoted``), then writes the intent (``rolling_back``) before
    the first ``RESTORE``: a rollback killed between two tables is finished by the next
    command that takes the lock (each table's restore is tagged, so a restored table is not
    restored twice).
    """
    rows = log.entries(spark, restatement_id)
    promoted = [row for row in rows if row["action"] == Action.PROMOTED]
    if not promoted:
        raise RestatementError(f"restatement {restatement_id} was never promoted")
    status = rows[-1]["status"]
    if status == Action.ROLLED_BACK:
        return rows[-1]["table_versions_after"]
    if status not in (Action.PROMOTED, Action.ROLLING_BACK):
        raise RestatementError(f"restatement {restatement_id} is {status}: nothing to roll back")
    entry, _ = _staged_entry(spark, restatement_id)
    tables = {table.model: table.prod_table for table in _staged_tables(entry)}
    before = promoted[-1]["table_versions_before"]
    after = promoted[-1]["table_versions_after"]
    pending = promotion.check_rollback(
        spark,
        restatement_id,
        tables,
        after,
        undo="To undo the restatement now, undo its cause: land records that void or "
        "correct the late rows it read, then run `tardy ingest` and `tardy restate --reason "
        f'"undo {restatement_id}"` (prod follows bronze again); a rollback is possible only '
        "until the next write to a restated table",
    )
    if status == Action.ROLLING_BACK:  # resuming: keep the reason the rollback was given
        reason = rows[-1]["message"] or reason
    common = dict(
        restatement_id=restatement_id,
        reason=entry["reason"],
        intervals=promoted[-1]["intervals"],
        table_versions_before=after,
        message=reason,
    )
    if status == Action.PROMOTED:
        log.append(spark, LogEntry(action=Action.ROLLING_BACK, **common))  # type: ignore[arg-type]
    versions = promotion.rollback(spark, restatement_id, tables, before, after, pending)
    trail.record_rollback(spark, restatement_id, f"rollback: {reason}", log.actor())
    # Prod no longer reflects the restated rows: put the watermark back before them (a named
    # restatement never moved it).
    since = entry["manifest"]["since_bronze_version"]
    if moves_watermark(entry["manifest"]):
        advance_watermark(
            spark,
            -1 if since is None else since,
            entry["manifest"]["previous_watermark"],
            f"rollback of restatement {restatement_id}: {reason}",
            entry["manifest"]["since_source_versions"],
        )
    log.append(
        spark,
        LogEntry(action=Action.ROLLED_BACK, table_versions_after=versions, **common),  # type: ignore[arg-type]
    )
    return versions


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None
