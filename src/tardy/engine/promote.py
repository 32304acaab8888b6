"""Promote a staged restatement into prod, table by table, one Delta commit each; roll back.

Promotion copies the *changed* days of each staged table into its prod table (an interval
whose recomputed rows equal prod's is not promoted; a table with none is not touched) with one
``INSERT INTO <prod> REPLACE WHERE <days> SELECT ... FROM <staged>``: a single atomic
Delta commit per table, upstream first. Each commit is tagged with the restatement id in the
Delta commit's ``userMetadata``, so a promotion interrupted at any point (kill -9) can tell,
from the tables' own history, which tables are already promoted: resuming skips those and
commits the others. The history is read from the tables' Delta logs (``delta.History``: no
Spark statement on the embedded default). Every table is checked before the first commit
(``check``): when any prod table got another commit since it was staged (the staged rows
would be stale), nothing is committed and the caller is told to discard and restate again.

Rollback restores every promoted table to its pre-promotion version (``RESTORE TABLE ...
TO VERSION AS OF``, itself one tagged Delta commit), refusing, before restoring anything, when
any of them changed after the promotion (``check_rollback``). The same restores undo a
partial promotion when a restatement stuck ``promoting`` is discarded (``promoted_versions``
says which tables an interrupted promotion already committed).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import typing as t
from dataclasses import dataclass, field

from tardy.engine import delta
from tardy.errors import FailpointReached, RestatementFailed

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tardy.engine.stage import StagedTable

# Test hook: kill -9 this process right after staging (promoting, restoring) N tables
# ("stage:N", "promote:N", "rollback:N"; "trail:1": after the change trail's append, before
# the first commit; "deliver:0": a command's work done, its notifications not delivered;
# "announce:0": a restatement staged or records rejected, their event held, not kept), to
# prove that an interrupted restatement is recovered; a process that leads its own process
# group (started with ``start_new_session``) kills the whole group, its Spark JVM included.
# With ``TARDY_FAILPOINT_MODE=raise`` the same step boundary raises ``FailpointReached``
# instead (an in-process test of the recovery: no process to start; a ``BaseException``, so
# no handler of the command takes it for an error). Never set outside tests.
FAILPOINT = "TARDY_FAILPOINT"
FAILPOINT_MODE = "TARDY_FAILPOINT_MODE"


class ProdChangedError(RestatementFailed):
    """A prod table changed since the restatement was staged (or promoted)."""


def tag(restatement_id: str, action: str) -> str:
    return f"tardy:{action}:{restatement_id}"


def failpoint(action: str, done: int) -> None:
    point = f"{action}:{done}"
    if os.environ.get(FAILPOINT) == point:
        if os.environ.get(FAILPOINT_MODE) == "raise":
            raise FailpointReached(point)
        _kill_self()


def _kill_self() -> None:
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def inflight_failpoint(action: str, done: int) -> t.Iterator[None]:
    """Test hook, ``"promote:N:inflight"``: kill -9 this process 0.3 s into the statement the
    block runs after N tables, while the engine executes it (on a warm engine the statement
    outlives its client: ``tardy.runtime.warm`` interrupts it before the next command reads)."""
    if os.environ.get(FAILPOINT) == f"{action}:{done}:inflight":
        timer = threading.Timer(0.3, _kill_self)
        timer.daemon = True
        timer.start()
    yield


def _changes(commits: list[delta.Commit]) -> str:
    return f"{commits[0].version - 1} -> {commits[-1].version}, " + ", ".join(
        sorted({str(c.operation) for c in commits})
    )


@dataclass
class Checked:
    """Where each staged table with changed days stands before promotion commits anything."""

    promoted: dict[str, int] = field(default_factory=dict)  # model -> our commit's version
    pending: list[StagedTable] = field(default_factory=list)  # still to commit


def check(history: delta.History, restatement_id: str, staged: list[StagedTable]) -> Checked:
    """Read every table's history since staging: the tables an earlier (interrupted) call
    promoted, and those left. Raises ``ProdChangedError``, naming every table that got
    another commit since staging, before anything is committed."""
    marker = tag(restatement_id, "promote")
    checked = Checked()
    stale: list[str] = []
    for table in (table for table in staged if table.changed):
        commits = history.after(table.prod_table, table.version_before)
        ours = [c for c in commits if c.userMetadata == marker]
        if ours:
            checked.promoted[table.model] = int(ours[-1].version)
        elif commits:
            stale.append(f"{table.model} ({table.prod_table}, version {_changes(commits)})")
        else:
            checked.pending.append(table)
    if stale:
        done = (
            f"; {', '.join(checked.promoted)} were promoted by an earlier, interrupted call"
            if checked.promoted
            else ""
        )
        raise ProdChangedError(
            f"prod changed since restatement {restatement_id} was staged (e.g. a `sqlmesh "
            f"run`): {'; '.join(stale)}. Its staged rows are stale, so nothing was promoted"
            f"{done}. Run `tardy discard {restatement_id}`, then `tardy restate --reason ...` "
            "to stage the same late rows again on the current prod"
        )
    return checked


def promoted_versions(
    history: delta.History, restatement_id: str, staged: list[StagedTable]
) -> dict[str, int]:
    """The tables a (possibly interrupted) promotion committed: model -> its commit's version,
    upstream first."""
    marker = tag(restatement_id, "promote")
    versions: dict[str, int] = {}
    for table in (table for table in staged if table.changed):
        commits = history.after(table.prod_table, table.version_before)
        ours = [c for c in commits if c.userMetadata == marker]
        if ours:
            versions[table.model] = int(ours[-1].version)
    return versions


def promote(
    spark: SparkSession,
    history: delta.History,
    restatement_id: str,
    staged: list[StagedTable],
    checked: Checked | None = None,
) -> tuple[dict[str, int], list[str]]:
    """Commit each staged table's intervals into prod (idempotent).

    ``checked`` is ``check``'s answer when the caller already asked (it is asked here
    otherwise). Returns the prod Delta version after promotion per table, and the tables
    this call committed (the others were promoted by an earlier, interrupted call).
    """
    marker = tag(restatement_id, "promote")
    checked = checked or check(history, restatement_id, staged)
    after = dict(checked.promoted)
    committed: list[str] = []
    failpoint("promote", 0)
    for table in checked.pending:
        days = table.predicate(table.changed)
        with delta.tagged_commits(spark, marker), inflight_failpoint("promote", len(after)):
            delta.replace_where(
                spark, table.prod_table, days, f"SELECT * FROM {table.staged_table} WHERE {days}"
            )
        latest = history.latest(table.prod_table)
        if latest.userMetadata != marker:  # another writer committed right after ours
            commits = history.after(table.prod_table, table.version_before)
            latest = [c for c in commits if c.userMetadata == marker][-1]
        after[table.model] = latest.version
        committed.append(table.model)
        failpoint("promote", len(after))
    order = [table.model for table in staged if table.model in after]
    return {model: after[model] for model in order}, committed


def check_rollback(
    history: delta.History,
    restatement_id: str,
    tables: dict[str, str],
    after: dict[str, int],
    *,
    undo: str,
) -> list[str]:
    """The promoted tables (model -> prod table; ``after``: the version its promotion left)
    still to restore, downstream first; those this rollback already restored are left out.

    Raises ``ProdChangedError``, naming every table that changed after the promotion, before
    anything is restored; ``undo`` is the message's advice on what to do instead.
    """
    marker = tag(restatement_id, "rollback")
    pending: list[str] = []
    changed: list[str] = []
    for model in reversed(list(after)):
        commits = history.after(tables[model], after[model])
        if any(c.userMetadata == marker for c in commits):
            continue
        if commits:
            changed.append(f"{model} ({tables[model]}, version {_changes(commits)})")
        else:
            pending.append(model)
    if changed:
        raise ProdChangedError(
            f"nothing was restored: {'; '.join(changed)} changed after restatement "
            f"{restatement_id} was promoted (e.g. a `sqlmesh run`), and restoring the "
            f"pre-promotion version would also undo that change. {undo}"
        )
    return pending


def rollback(
    spark: SparkSession,
    history: delta.History,
    restatement_id: str,
    tables: dict[str, str],
    before: dict[str, int],
    after: dict[str, int],
    pending: list[str] | None = None,
) -> dict[str, int]:
    """Restore each promoted table (model -> prod table) to its pre-promotion version.

    Downstream first; idempotent (a table already restored by this rollback is skipped).
    Every table is checked before the first restore (``check_rollback``, unless the caller
    passes its answer as ``pending``): when any changed after the promotion, nothing is
    restored.
    """
    marker = tag(restatement_id, "rollback")
    if pending is None:
        pending = check_rollback(history, restatement_id, tables, after, undo="")
    versions: dict[str, int] = {}
    for model in reversed(list(after)):
        if model in pending:
            continue
        commits = history.after(tables[model], after[model])
        versions[model] = [c for c in commits if c.userMetadata == marker][-1].version
    for model in pending:
        table = tables[model]
        with delta.tagged_commits(spark, marker):
            delta.restore(spark, table, before[model])
        commits = history.after(table, after[model])
        versions[model] = [c for c in commits if c.userMetadata == marker][-1].version
        failpoint("rollback", len(versions))
    return versions
