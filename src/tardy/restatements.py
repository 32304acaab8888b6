"""The restatement commands as users run them: the engine's (``tardy.engine.restate``), each
publishing what its promotions commit (``tardy.consumers.versions``).

The engine owns the lifecycle (``tardy.engine.lifecycle``) and calls the publisher it is
given, under the restatement lock, after every promotion it completes (a recovered one
included); this module gives it ``publish_promotion``, so the engine never imports the
publishing layer above it. The CLI, the demo and the tests restate through here.
"""

from __future__ import annotations

import typing as t

from tardy.consumers import notifications, versions
from tardy.engine import restate as commands
from tardy.engine.closure import days_of
from tardy.engine.named import Selection
from tardy.engine.outcome import Outcome, Status
from tardy.home import activate

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


def publish_promotion(
    context: Context, spark: SparkSession, promoted: Outcome
) -> list[dict[str, object]]:
    """Publish the new versions of the published models a promotion committed
    (``tardy.consumers.versions``); nothing after a no-op one."""
    if promoted.status != Status.PROMOTED or promoted.restatement_id is None:
        return []
    commits = {
        model: versions.Commit(
            before=promoted.versions_before[model],
            after=version,
            days=sorted(day.isoformat() for day in days_of(promoted.promoted.get(model, []))),
        )
        for model, version in promoted.table_versions.items()
    }
    published = versions.publish(
        context, spark, restatement_id=promoted.restatement_id, commits=commits
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
    staged for review is announced (``tardy.consumers.notifications``)."""
    outcome = commands.restate(
        context,
        spark,
        reason,
        dry_run=dry_run,
        promote=promote,
        accept_large_change=accept_large_change,
        threshold=threshold,
        restatement_id=restatement_id,
        selection=selection,
        environment_name=environment_name,
        publish=publish_promotion,
    )
    if outcome.status == Status.STAGED and outcome.restatement_id is not None:
        settings = context.config.variables.get("notifications")
        event = notifications.staged(outcome.restatement_id, outcome.evaluated, outcome.environment)
        notifications.notify(activate().root, settings, event)
    return outcome


def promote_staged(context: Context, spark: SparkSession, restatement_id: str) -> Outcome:
    """``tardy promote <id>``, publishing."""
    return commands.promote_staged(context, spark, restatement_id, publish=publish_promotion)


def discard(context: Context, spark: SparkSession, restatement_id: str) -> str:
    """``tardy discard <id>`` (a promotion it recovers first is published)."""
    return commands.discard(context, spark, restatement_id, publish=publish_promotion)


def rollback(
    context: Context, spark: SparkSession, restatement_id: str, reason: str
) -> dict[str, int]:
    """``tardy rollback <id>`` (a promotion it recovers first is published)."""
    return commands.rollback(context, spark, restatement_id, reason, publish=publish_promotion)
