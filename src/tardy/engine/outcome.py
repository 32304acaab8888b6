"""What a restatement command returns, and how it stops: its ``Outcome`` (a ``Status``, the
manifest, the diff, what was evaluated and promoted, each step's cost) and its errors.

Shared by the forward transitions (``tardy.engine.machine``), the lifecycle after staging
(``tardy.engine.lifecycle``) and the commands (``tardy.engine.restate``); rendered only by the
CLI.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field
from enum import StrEnum

from tardy.engine import audit
from tardy.engine.results import DayChange, Diff, Manifest
from tardy.errors import Refused, RestatementFailed

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


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
    statement_seconds: dict[str, float] = field(default_factory=dict)  # statements' own share
    slowest: list[dict[str, object]] = field(default_factory=list)  # (``meter.Meter``)
    # Promoted: the Delta version committed per model, and what that published
    # (``tardy.consumers.versions``: the published models' new versions).
    table_versions: dict[str, int] = field(default_factory=dict)
    versions_before: dict[str, int] = field(default_factory=dict)  # before the promotion
    published: list[dict[str, object]] = field(default_factory=list)
    # Promoted: who produced the new versions (the restatement's reason, the promoting
    # actor), and, when this process staged it, each model's changed days as its diff
    # compared them (``DayChange``): what the versions' release notes say. Not in the JSON.
    producer: tuple[str, str] | None = None
    day_changes: dict[str, list[DayChange]] = field(default_factory=dict)

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
            "statement_seconds": {k: round(v, 3) for k, v in self.statement_seconds.items()},
            "slowest": self.slowest,
            "published": self.published,
        }


# Publishes what a promotion committed (``tardy.consumers.versions``, above the engine): the
# caller of a command passes it; the lifecycle calls it under the restatement lock after each
# promotion it completes, a recovered one included, and nothing after a no-op one.
Publish = t.Callable[["Context", "SparkSession", Outcome], list[dict[str, object]]]
