"""``tardy restate``: detect → stage → audit → diff → promote, and its companions.

- ``restate``: under the restatement lock, finish or discard an interrupted restatement, detect
  the manifest, stage its intervals into shallow clones (``tardy.staging``; SQLMesh's own
  evaluator and audits), run the circuit breaker and write the diff (``tardy.diff``), then,
  unless ``promote=False``, promote (``tardy.promotion``) and advance the arrival watermark.
- ``promote_staged``: promote a staged restatement later (``tardy promote <id>``), or resume an
  interrupted promotion; idempotent.
- ``rollback``: restore every table a promotion changed to its pre-promotion version, and put
  the arrival watermark back so that ``tardy detect`` sees those rows again.
- ``discard``: drop a staged restatement.

Every step appends to the restatement log (``tardy.restatement_log``); the log is also what
``promote``/``rollback`` read back, so they work from a new process.
"""

from __future__ import annotations

import json
import secrets
import time
import typing as t
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tardy import lock, promotion, restatement_log
from tardy.diff import Diff, diff
from tardy.home import activate
from tardy.restatement import Manifest, advance_watermark, detect
from tardy.restatement_log import LogEntry
from tardy.staging import AuditFailed, StagedTable, drop_stage, prod_snapshots, stage

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

DEFAULT_MAX_CHANGE = 0.25


class RestatementError(RuntimeError):
    """A restatement stopped; prod is unchanged unless the message says otherwise."""


class BreakerTripped(RestatementError):
    pass


class PendingRestatement(RestatementError):
    pass


@dataclass
class Outcome:
    restatement_id: str | None
    status: str  # nothing_to_do | dry_run | staged | promoted | already_promoted
    manifest: Manifest | None = None
    diff: Diff | None = None
    evaluated: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    recovered: str | None = None  # what happened to an interrupted restatement
    report_dir: str | None = None
    advanced_watermark: bool = False
    seconds: dict[str, float] = field(default_factory=dict)  # per step: detect, stage, ...

    def as_dict(self) -> dict[str, object]:
        return {
            **(self.manifest.as_dict() if self.manifest else {}),
            "restatement_id": self.restatement_id,
            "status": self.status,
            "evaluated": self.evaluated,
            "diff": self.diff.as_dict() if self.diff else None,
            "recovered": self.recovered,
            "report_dir": self.report_dir,
            "advanced_watermark": self.advanced_watermark,
            "seconds": self.seconds,
        }


def new_id() -> str:
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def report_dir(restatement_id: str) -> Path:
    return activate().root / "restatements" / restatement_id


def max_change(context: Context) -> float:
    """The circuit breaker's threshold: config variable ``restatement_max_change``."""
    return float(context.config.variables.get("restatement_max_change", DEFAULT_MAX_CHANGE))


def restate(
    context: Context,
    spark: SparkSession,
    reason: str,
    *,
    dry_run: bool = False,
    promote: bool = True,
    accept_large_change: bool = False,
    threshold: float | None = None,
) -> Outcome:
    if not reason.strip():
        raise ValueError("a restatement needs a --reason")
    if dry_run:  # print only: no lock, no recovery, no write
        return Outcome(None, "dry_run", detect(context, spark))
    restatement_id = new_id()
    with lock.exclusive(activate().root, restatement_id) as stale:
        recovered = _recover(context, spark, stale.restatement_id) if stale else None
        pending = [
            row
            for row in restatement_log.latest(spark).values()
            if row["status"] in ("staged", "promoting")
        ]
        if pending:
            waiting = pending[0]["restatement_id"]
            raise PendingRestatement(
                f"restatement {waiting} is {pending[0]['status']} and awaiting review: "
                f"`tardy promote {waiting}` or `tardy discard {waiting}` first"
            )
        started = time.perf_counter()
        manifest = detect(context, spark)
        seconds = {"detect": time.perf_counter() - started}
        if manifest.is_empty:
            advanced = _advance(spark, manifest, reason)
            return Outcome(
                None,
                "nothing_to_do",
                manifest,
                recovered=recovered,
                advanced_watermark=advanced,
                seconds=seconds,
            )
        return _stage_and_promote(
            context,
            spark,
            restatement_id,
            reason,
            manifest,
            promote=promote,
            accept_large_change=accept_large_change,
            threshold=max_change(context) if threshold is None else threshold,
            recovered=recovered,
            seconds=seconds,
        )


def _advance(spark: SparkSession, manifest: Manifest, reason: str) -> bool:
    """Advance the arrival watermark unless changes inside the grace window still wait for
    the next run (then they are checked again next time)."""
    if any(manifest.absorbed_by_next_run.values()):
        return False
    advance_watermark(spark, manifest.bronze_version, manifest.arrival_watermark, reason)
    return True


def _stage_and_promote(
    context: Context,
    spark: SparkSession,
    restatement_id: str,
    reason: str,
    manifest: Manifest,
    *,
    promote: bool,
    accept_large_change: bool,
    threshold: float,
    recovered: str | None,
    seconds: dict[str, float],
) -> Outcome:
    clock = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[step] = now - clock
        clock = now

    snapshots = {s.model.name: s.version for s in prod_snapshots(context).values() if s.is_model}
    base = dict(
        restatement_id=restatement_id,
        reason=reason,
        intervals={m: spans for m, spans in manifest.impacted.items() if spans},
        bronze_version=manifest.bronze_version,
        arrival_watermark=_ts(manifest.arrival_watermark),
        snapshot_versions=snapshots,
    )
    restatement_log.append(spark, LogEntry(action="staging", **base))  # type: ignore[arg-type]
    folder = report_dir(restatement_id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps(manifest.as_dict(), indent=2, default=str))
    try:
        staged = stage(context, spark, manifest.impacted)
    except AuditFailed as failure:
        drop_stage(context, spark)
        failed = LogEntry(action="audit_failed", audit_results=failure.failures, **base)  # type: ignore[arg-type]
        failed.message = str(failure)
        restatement_log.append(spark, failed)
        raise RestatementError(
            f"{failure}; prod is unchanged (restatement {restatement_id})"
        ) from failure
    except Exception as error:
        _discard(context, spark, restatement_id, reason, f"failed while staging: {error}")
        raise
    lap("stage and audit")
    review = diff(context, spark, restatement_id, staged, threshold)
    lap("diff")
    (folder / "diff.md").write_text(review.markdown())
    (folder / "diff.json").write_text(json.dumps(review.as_dict(), indent=2, default=str))
    totals = review.totals()
    details = dict(
        rows_before={
            m: {"rows": v["rows_before"], "sums": v["sums_before"]} for m, v in totals.items()
        },
        rows_after={
            m: {"rows": v["rows_after"], "sums": v["sums_after"]} for m, v in totals.items()
        },
        table_versions_before={table.model: table.version_before for table in staged},
        audit_results=[{"models": [table.model for table in staged], "blocking_failures": 0}],
    )
    if review.breaker and not accept_large_change:
        drop_stage(context, spark)
        message = (
            f"circuit breaker: {len(review.breaker)} closed day(s) change by more than "
            f"{threshold:.0%} (see {folder / 'diff.md'}); rerun with --accept-large-change "
            "to promote anyway"
        )
        restatement_log.append(
            spark, LogEntry(action="breaker_tripped", message=message, **base, **details)
        )  # type: ignore[arg-type]
        raise BreakerTripped(f"{message}; prod is unchanged (restatement {restatement_id})")
    staged_detail = {
        "staged_tables": [table.as_dict() for table in staged],
        "manifest": manifest.as_dict(),
        "accepted_large_change": bool(review.breaker),
    }
    restatement_log.append(
        spark,
        LogEntry(
            action="staged", message=json.dumps(staged_detail, default=str), **base, **details
        ),  # type: ignore[arg-type]
    )
    lap("log")
    outcome = Outcome(
        restatement_id,
        "staged",
        manifest,
        review,
        recovered=recovered,
        report_dir=str(folder),
        seconds=seconds,
    )
    if not promote:
        return outcome
    promoted = _promote(context, spark, restatement_id)
    lap("promote")
    promoted.manifest, promoted.diff, promoted.recovered = manifest, review, recovered
    promoted.seconds = seconds
    return promoted


def _staged_entry(
    spark: SparkSession, restatement_id: str
) -> tuple[dict[str, t.Any], list[dict[str, t.Any]]]:
    rows = restatement_log.entries(spark, restatement_id)
    if not rows:
        raise RestatementError(f"no restatement {restatement_id} in {restatement_log.LOG_TABLE}")
    staged = [row for row in rows if row["action"] == "staged"]
    if not staged:
        raise RestatementError(
            f"restatement {restatement_id} was never staged ({rows[-1]['status']})"
        )
    return staged[-1], rows


def _promote(context: Context, spark: SparkSession, restatement_id: str) -> Outcome:
    """Promote (or finish promoting) a staged restatement; the caller holds the lock."""
    entry, rows = _staged_entry(spark, restatement_id)
    status = rows[-1]["status"]
    if status == "promoted":
        return Outcome(
            restatement_id, "already_promoted", report_dir=str(report_dir(restatement_id))
        )
    if status not in ("staged", "promoting"):
        raise RestatementError(f"restatement {restatement_id} is {status}: nothing to promote")
    detail = json.loads(entry["message"])
    staged = [StagedTable(**table) for table in detail["staged_tables"]]
    current = {s.model.name: s.version for s in prod_snapshots(context).values() if s.is_model}
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
    if status == "staged":
        restatement_log.append(spark, LogEntry(action="promoting", **base))
    versions, committed = promotion.promote(spark, restatement_id, staged)
    manifest = detail["manifest"]
    advanced = not any(manifest["absorbed_by_next_run"].values())
    if advanced:
        advance_watermark(
            spark,
            manifest["bronze_version"],
            manifest["arrival_watermark"],
            f"restatement {restatement_id}: {entry['reason']}",
        )
    restatement_log.append(
        spark,
        LogEntry(
            action="promoted",
            table_versions_after=versions,
            message=f"committed {', '.join(committed) or 'nothing new'} in this call; "
            f"{len(staged)} tables promoted",
            **base,
        ),
    )
    drop_stage(context, spark)
    evaluated = {table.model: [{"interval": span} for span in table.intervals] for table in staged}
    return Outcome(
        restatement_id,
        "promoted",
        evaluated=evaluated,
        report_dir=str(report_dir(restatement_id)),
        advanced_watermark=advanced,
    )


def _recover(context: Context, spark: SparkSession, restatement_id: str) -> str:
    """Finish or discard the restatement of a dead lock holder; says which."""
    rows = restatement_log.entries(spark, restatement_id)
    status = rows[-1]["status"] if rows else None
    if status == "promoting":
        _promote(context, spark, restatement_id)
        return f"completed the interrupted promotion of restatement {restatement_id}"
    if status in (None, "staging"):
        reason = rows[-1]["reason"] if rows else None
        _discard(context, spark, restatement_id, reason, "interrupted while staging")
        return f"discarded restatement {restatement_id}, interrupted while staging"
    return f"restatement {restatement_id} was left {status}"


def promote_staged(context: Context, spark: SparkSession, restatement_id: str) -> Outcome:
    """``tardy promote <id>``: promote a staged restatement, or finish an interrupted one."""
    with lock.exclusive(activate().root, restatement_id):
        return _promote(context, spark, restatement_id)


def discard(context: Context, spark: SparkSession, restatement_id: str) -> str:
    with lock.exclusive(activate().root, restatement_id):
        rows = restatement_log.entries(spark, restatement_id)
        if not rows:
            raise RestatementError(f"no restatement {restatement_id}")
        status = rows[-1]["status"]
        if status not in ("staged", "staging"):
            raise RestatementError(f"restatement {restatement_id} is {status}: nothing to discard")
        _discard(context, spark, restatement_id, rows[-1]["reason"], "discarded by request")
        return f"discarded restatement {restatement_id}; prod was never touched"


def _discard(
    context: Context, spark: SparkSession, restatement_id: str, reason: str | None, why: str
) -> None:
    """Drop the staged clones and log the discard (prod was never touched)."""
    drop_stage(context, spark)
    if reason is not None:
        restatement_log.append(
            spark,
            LogEntry(restatement_id=restatement_id, action="discarded", reason=reason, message=why),
        )


def rollback(
    context: Context, spark: SparkSession, restatement_id: str, reason: str
) -> dict[str, int]:
    """``tardy rollback <id>``: every table the promotion changed back to its prior version."""
    with lock.exclusive(activate().root, restatement_id):
        rows = restatement_log.entries(spark, restatement_id)
        promoted = [row for row in rows if row["action"] == "promoted"]
        if not promoted:
            raise RestatementError(f"restatement {restatement_id} was never promoted")
        if rows[-1]["status"] == "rolled_back":
            return rows[-1]["table_versions_after"]
        entry, _ = _staged_entry(spark, restatement_id)
        detail = json.loads(entry["message"])
        tables = {table["model"]: table["prod_table"] for table in detail["staged_tables"]}
        before = promoted[-1]["table_versions_before"]
        after = promoted[-1]["table_versions_after"]
        versions = promotion.rollback(spark, restatement_id, tables, before, after)
        # Prod no longer reflects the restated rows: put the watermark back before them.
        since = detail["manifest"]["since_bronze_version"]
        advance_watermark(
            spark,
            -1 if since is None else since,
            detail["manifest"]["previous_watermark"],
            f"rollback of restatement {restatement_id}: {reason}",
        )
        restatement_log.append(
            spark,
            LogEntry(
                restatement_id=restatement_id,
                action="rolled_back",
                reason=entry["reason"],
                intervals=entry["intervals"],
                table_versions_before=after,
                table_versions_after=versions,
                message=reason,
            ),
        )
        return versions


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None
