"""Promote a staged restatement into prod, table by table, one Delta commit each; roll back.

Promotion copies the *changed* days of each staged table into its prod table (an interval
whose recomputed rows equal prod's is not promoted; a table with none is not touched) with one
``INSERT INTO <prod> REPLACE WHERE <days> SELECT ... FROM <staged>``: a single atomic
Delta commit per table, upstream first. Each commit is tagged with the restatement id in the
Delta commit's ``userMetadata``, so a promotion interrupted at any point (kill -9) can tell,
from the tables' own history, which tables are already promoted: resuming skips those and
commits the others. A prod table that got any other commit since it was staged is refused
(the staged rows would be stale): restate again.

Rollback restores every promoted table to its pre-promotion version (``RESTORE TABLE ...
TO VERSION AS OF``, itself one tagged Delta commit), refusing, before restoring anything, when
any of them changed after the promotion.
"""

from __future__ import annotations

import os
import signal
import typing as t

from tardy.engine import delta
from tardy.errors import RestatementFailed

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tardy.engine.stage import StagedTable

# Test hook: kill -9 this process right after promoting (restoring) N tables ("promote:N",
# "rollback:N"), to prove that an interrupted promotion (rollback) resumes; never set
# outside tests.
FAILPOINT = "TARDY_FAILPOINT"


class ProdChangedError(RestatementFailed):
    """A prod table changed since the restatement was staged (or promoted)."""


def tag(restatement_id: str, action: str) -> str:
    return f"tardy:{action}:{restatement_id}"


def _failpoint(action: str, done: int) -> None:
    if os.environ.get(FAILPOINT) == f"{action}:{done}":
        os.kill(os.getpid(), signal.SIGKILL)


def promote(
    spark: SparkSession, restatement_id: str, staged: list[StagedTable]
) -> tuple[dict[str, int], list[str]]:
    """Commit each staged table's intervals into prod (idempotent).

    Returns the prod Delta version after promotion per table, and the tables this call
    committed (the others were promoted by an earlier, interrupted call).
    """
    marker = tag(restatement_id, "promote")
    after: dict[str, int] = {}
    committed: list[str] = []
    _failpoint("promote", 0)
    for table in (table for table in staged if table.changed):
        commits = delta.history(spark, table.prod_table, table.version_before)
        ours = [c for c in commits if c.userMetadata == marker]
        if ours:
            after[table.model] = int(ours[-1].version)
            continue
        if commits:
            raise ProdChangedError(
                f"{table.model} ({table.prod_table}) changed since it was staged: version "
                f"{table.version_before} -> {commits[-1].version} ({commits[-1].operation}); "
                "discard this restatement and run `tardy restate` again"
            )
        days = table.predicate(table.changed)
        with delta.tagged_commits(spark, marker):
            delta.replace_where(
                spark, table.prod_table, days, f"SELECT * FROM {table.staged_table} WHERE {days}"
            )
        latest = delta.latest_commit(spark, table.prod_table)
        if latest.userMetadata != marker:  # another writer committed right after ours
            commits = delta.history(spark, table.prod_table, table.version_before)
            latest = [c for c in commits if c.userMetadata == marker][-1]
        after[table.model] = int(latest.version)
        committed.append(table.model)
        _failpoint("promote", len(after))
    return after, committed


def rollback(
    spark: SparkSession,
    restatement_id: str,
    tables: dict[str, str],
    before: dict[str, int],
    after: dict[str, int],
) -> dict[str, int]:
    """Restore each promoted table (model -> prod table) to its pre-promotion version.

    Downstream first; idempotent (a table already restored by this rollback is skipped).
    Every table is checked before the first restore: when any changed after the promotion,
    nothing is restored.
    """
    marker = tag(restatement_id, "rollback")
    versions: dict[str, int] = {}
    pending: list[str] = []
    for model in reversed(list(after)):
        table = tables[model]
        commits = delta.history(spark, table, after[model])
        ours = [c for c in commits if c.userMetadata == marker]
        if ours:
            versions[model] = int(ours[-1].version)
            continue
        if commits:
            raise ProdChangedError(
                f"{model} ({table}) changed after the promotion (version {after[model]} -> "
                f"{commits[-1].version}, {commits[-1].operation}, e.g. a `sqlmesh run`): "
                f"restoring version {before[model]} would also undo that change, so nothing "
                "was rolled back. Prod reflects bronze as the restatement read it; to change "
                "those days now, fix the cause (the model, or a correction landed in bronze) "
                "and run `tardy restate`"
            )
        pending.append(model)
    for model in pending:
        table = tables[model]
        with delta.tagged_commits(spark, marker):
            delta.restore(spark, table, before[model])
        commits = delta.history(spark, table, after[model])
        versions[model] = int([c for c in commits if c.userMetadata == marker][-1].version)
        _failpoint("rollback", len(versions))
    return versions
