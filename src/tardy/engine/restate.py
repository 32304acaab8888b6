"""``tardy restate`` and its companions: each command under the restatement lock.

- ``restate``: under the lock, finish or discard an interrupted restatement, detect the
  manifest once (or build it from a named selection), then run the state machine
  (``tardy.engine.machine``) over its plan (``tardy.engine.plan``): stage, audit, diff, the
  circuit breaker, the review files, and unless ``promote=False`` the promotion of the
  changed days and the arrival watermark.
- ``promote_staged``: promote a staged restatement later (``tardy promote <id>``), or resume an
  interrupted promotion; idempotent.
- ``rollback``: restore every table a promotion changed to its pre-promotion version, and put
  the arrival watermark back so that ``tardy detect`` sees those rows again.
- ``discard``: drop a staged restatement; or undo a promotion that stopped half-way (a
  restatement stuck ``promoting``): restore the tables it already committed, then drop the
  stage.
- ``hold``: take the restatement lock before the project and Spark open (the CLI does), so
  that on the embedded default the lock, not the metastore, decides between two processes.

Promote, discard, rollback and recovery are transitions of ``tardy.engine.lifecycle``'s
table. Each command takes the caller's ``publish`` (``outcome.Publish``:
``tardy.requests.restatements`` passes one that calls ``tardy.consumers.publish``) and calls
it, under the lock, after every promotion it completes.

Recovery (``_locked``, ``lifecycle.recover``) reads the restatement log
(``tardy.restatement_log``): a restatement whose latest action is an intent was cut off, and
is finished or discarded by the next command that takes the lock.
"""

from __future__ import annotations

import typing as t
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from tardy.engine import environment, lifecycle, log, machine
from tardy.engine.detect import detect
from tardy.engine.lifecycle import Verb
from tardy.engine.log import Action, Record
from tardy.engine.meter import Meter
from tardy.engine.named import Selection
from tardy.engine.named import manifest as named_manifest
from tardy.engine.outcome import Outcome, PendingRestatement, Publish, Status
from tardy.engine.plan import new_id, watched
from tardy.engine.results import Manifest
from tardy.errors import RestatementFailed
from tardy.project.home import activate
from tardy.runtime import lock

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context
    from sqlmesh.core.config import Config


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
    publish: Publish | None,
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

    meter = Meter(spark)
    if dry_run:  # print only: no lock, no recovery, no write
        with meter.step("detect"):
            manifest = find()
        return Outcome(None, Status.DRY_RUN, manifest, **meter.as_dict())
    restatement_id = restatement_id or new_id()
    env = environment.name_for(restatement_id, environment_name)
    with _locked(context, spark, restatement_id, publish) as held:
        pending = [
            row
            for row in held.latest.values()
            if row.status in (Action.STAGED, Action.PROMOTING, Action.DISCARDING)
        ]
        if pending:
            waiting = pending[0].restatement_id
            raise PendingRestatement(
                f"restatement {waiting} is {pending[0].status} and awaiting review: "
                f"`tardy promote {waiting}` or `tardy discard {waiting}` first"
            )
        with meter.step("detect"):
            manifest = find()
        if manifest.is_empty:
            with meter.step("log"):
                advanced = machine.advance(context, spark, manifest, reason)
            return Outcome(
                None,
                Status.NOTHING_TO_DO,
                manifest,
                recovered=held.recovered,
                advanced_watermark=advanced,
                **meter.as_dict(),
            )
        outcome = machine.stage_and_promote(
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
            publish=publish,
        )
        outcome.recovered = held.recovered
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
    from tardy.project.context import load_config

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


@dataclass(frozen=True)
class Held:
    """What ``_locked`` found under the lock: what recovery did (None: nothing), and the
    latest log entry of every restatement after it (read once: again only when recovery
    wrote)."""

    recovered: str | None
    latest: dict[str, Record]


@contextmanager
def _locked(
    context: Context, spark: SparkSession, restatement_id: str, publish: Publish | None
) -> Iterator[Held]:
    """Hold the restatement lock, after finishing whatever the log says was interrupted
    (a holder killed mid-way): yields what recovery did and the log's latest entries.

    Recovery reads the log, not the lock's holder record: under the lock nobody else is
    working on a restatement, so any whose latest action is an intent (``log.INTERRUPTED``)
    was cut off. ``restatement_id``'s own interrupted work is left to the command acting on it.
    A promotion recovery completes is published (``publish``) like any other.
    """
    held = restatement_lock(context.config, context.selected_gateway)
    with nullcontext() if held.identity in _held else held.exclusive(restatement_id):
        latest = log.latest(spark)
        done = [
            _recover(context, spark, row, publish)
            for rid, row in latest.items()
            if row.status in log.INTERRUPTED and rid != restatement_id
        ]
        yield Held("; ".join(done) or None, log.latest(spark) if done else latest)


def _recover(context: Context, spark: SparkSession, row: Record, publish: Publish | None) -> str:
    """Finish (promotion, rollback, discard) or discard (staging) an interrupted restatement;
    says what it did, or why it could not (then the restatement stays as the log says, and
    the command goes on: one stuck restatement must not block every other)."""
    try:
        done = lifecycle.recover(context, spark, row)
    except RestatementFailed as error:
        return f"could not finish restatement {row.restatement_id} ({row.status}): {error}"
    lifecycle.publish_promoted(publish, context, spark, done.outcome)
    return done.message


def latest_with_suffix(spark: SparkSession, suffix: str) -> str | None:
    """The latest restatement whose id ends with ``suffix`` (a request's name), or None."""
    ids = [rid for rid in log.latest(spark) if rid.endswith(suffix)]
    return max(ids) if ids else None


def _request(
    context: Context, spark: SparkSession, restatement_id: str, **given: t.Any
) -> lifecycle.Request:
    rows = log.records(spark, restatement_id)
    return lifecycle.Request(context, spark, restatement_id, rows, **given)


def promote_staged(
    context: Context, spark: SparkSession, restatement_id: str, *, publish: Publish | None
) -> Outcome:
    """``tardy promote <id>``: promote a staged restatement, or finish an interrupted one,
    then publish what it committed."""
    with _locked(context, spark, restatement_id, publish):
        outcome = lifecycle.apply(Verb.PROMOTE, _request(context, spark, restatement_id)).outcome
        assert outcome is not None  # a promotion's step returns its outcome
        outcome.published = lifecycle.publish_promoted(publish, context, spark, outcome)
        return outcome


def discard(
    context: Context, spark: SparkSession, restatement_id: str, *, publish: Publish | None
) -> str:
    """``tardy discard <id>``: drop a staged restatement (prod was never touched), or undo a
    promotion that stopped half-way (``promoting``, e.g. killed, then refused because prod
    changed): restore the tables it committed, then drop the stage."""
    with _locked(context, spark, restatement_id, publish):
        return lifecycle.apply(Verb.DISCARD, _request(context, spark, restatement_id)).message


def rollback(
    context: Context,
    spark: SparkSession,
    restatement_id: str,
    reason: str,
    *,
    publish: Publish | None,
) -> dict[str, int]:
    """``tardy rollback <id>``: every table the promotion changed back to its prior version
    (or finish an interrupted rollback of it)."""
    with _locked(context, spark, restatement_id, publish):
        request = _request(context, spark, restatement_id, reason=reason)
        return lifecycle.apply(Verb.ROLLBACK, request).versions
