"""The restatement commands as users run them: the engine's (``tardy.engine.restate``), each
publishing what its promotions commit (``tardy.consumers.publish``).

A restatement left staged is announced ("staged, awaiting review") through a held event
(``tardy.outbox.held``): kept before the staging commits, released once it has; one a kill
cut off is settled by the next restatement command from the log (``settle_staged``).

The engine owns the lifecycle (``tardy.engine.lifecycle``) and calls the publisher it is
given, under the restatement lock, after every promotion it completes (a recovered one
included); this module gives it ``publish_promotion``, so the engine never imports the
publishing layer above it. The CLI, the demo and the tests restate through here.
"""

from __future__ import annotations

import typing as t

from tardy.consumers import publish
from tardy.engine import environment, log
from tardy.engine import restate as commands
from tardy.engine.log import Action
from tardy.engine.named import Selection
from tardy.engine.outcome import Outcome, Status
from tardy.engine.plan import new_id
from tardy.engine.promote import failpoint
from tardy.engine.results import days_of
from tardy.errors import TardyError
from tardy.outbox import held as held_events
from tardy.outbox import notifications
from tardy.project.home import activate

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


def publish_promotion(
    context: Context, spark: SparkSession, promoted: Outcome
) -> list[dict[str, object]]:
    """Publish the new versions of the published models a promotion committed
    (``tardy.consumers.publish``); nothing after a no-op one."""
    if promoted.status != Status.PROMOTED or promoted.restatement_id is None:
        return []
    commits = {
        model: publish.Commit(
            before=promoted.versions_before[model],
            after=version,
            days=sorted(day.isoformat() for day in days_of(promoted.promoted.get(model, []))),
            compared=promoted.day_changes.get(model),
        )
        for model, version in promoted.table_versions.items()
    }
    published = publish.publish(
        context,
        spark,
        restatement_id=promoted.restatement_id,
        commits=commits,
        producer=promoted.producer,
    )
    return [p.as_dict() for p in published.publications]


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
    """``tardy restate``: ``tardy.engine.restate.restate``, publishing; a restatement left
    staged for review is announced (``tardy.outbox.notifications``), also when a kill
    stops this process between the staging's commit and its event (``settle_staged``)."""
    settle_staged(context, spark)

    def run(rid: str | None) -> Outcome:
        return commands.restate(
            context,
            spark,
            reason,
            dry_run=dry_run,
            promote=promote,
            accept_large_change=accept_large_change,
            threshold=threshold,
            restatement_id=rid,
            selection=selection,
            environment_name=environment_name,
            publish=publish_promotion,
        )

    if dry_run or promote:
        return run(restatement_id)
    restatement_id = restatement_id or new_id()
    env = environment.name_for(restatement_id, environment_name)
    settings = context.config.variables.get("notifications")
    event = notifications.staged(restatement_id, [], env)
    home = activate().root
    with held_events.hold(home, settings, event, {"restatement_id": restatement_id}) as held:
        try:
            outcome = run(restatement_id)
        except TardyError:  # a gate or a refusal: nothing was staged
            held.drop()
            raise
        if outcome.status != Status.STAGED or outcome.restatement_id is None:
            held.drop()
            return outcome
        failpoint("announce", 0)  # test hook: staged and committed, its event not kept
        staged = notifications.staged(outcome.restatement_id, outcome.evaluated, env)
        held.release(staged, notifications.targets_of(context.config))
    return outcome


def settle_staged(context: Context, spark: SparkSession) -> list[str]:
    """Announce the restatements a killed ``restate --no-promote`` staged and never announced
    (their held events; the log says whether the staging committed: one still ``staged`` is
    announced, any other is dropped). One statement, only when such an event exists."""
    orphans = held_events.orphans(activate().root, notifications.EventKind.RESTATEMENT_STAGED)
    if not orphans:
        return []
    latest = log.latest(spark)
    announced = []
    for held in orphans:
        rid = str(held.awaits["restatement_id"])
        row = latest.get(rid)
        if row is None or row.status != Action.STAGED:
            held.drop()
            continue
        models = [table.model for table in row.staged_tables or []]
        env = held.event.detail.get("environment")
        held.release(
            notifications.staged(rid, models, env), notifications.targets_of(context.config)
        )
        announced.append(rid)
    return announced


def promote_staged(context: Context, spark: SparkSession, restatement_id: str) -> Outcome:
    """``tardy promote <id>``, publishing."""
    settle_staged(context, spark)
    return commands.promote_staged(context, spark, restatement_id, publish=publish_promotion)


def discard(context: Context, spark: SparkSession, restatement_id: str) -> str:
    """``tardy discard <id>`` (a promotion it recovers first is published)."""
    settle_staged(context, spark)
    return commands.discard(context, spark, restatement_id, publish=publish_promotion)


def rollback(
    context: Context, spark: SparkSession, restatement_id: str, reason: str
) -> dict[str, int]:
    """``tardy rollback <id>`` (a promotion it recovers first is published)."""
    settle_staged(context, spark)
    return commands.rollback(context, spark, restatement_id, reason, publish=publish_promotion)
