"""The plan of a restatement: what it restates, and the targets it moves; nothing is written.

- ``Plan``: the models a restatement stages, upstream first, and the days of each: its days
  in the manifest (the roots), plus the days its parents' *changed* days reach
  (``tardy.engine.closure``); and the last day the roots can reach, the day the renderer
  executes as. Only changed days cascade, so a model's days are known once its parents are
  diffed: the state machine (``tardy.engine.machine``) asks for them model by model.
- ``watched``: the circuit breaker's model, measure and threshold (config variables).
- ``moves_watermark``, ``watermark_target``: where a promotion of the manifest moves the
  arrival watermark (a rollback moves it back).
- ``snapshot_versions``: prod's model versions a restatement is staged against (promotion
  refuses when they changed).
- ``new_id``, ``report_dir``: a restatement's id and the folder of its review files.
"""

from __future__ import annotations

import secrets
import typing as t
from datetime import UTC, date, datetime
from pathlib import Path

from tardy.engine import sqlmesh_api
from tardy.engine.closure import Closure
from tardy.engine.results import Breaker, days_of
from tardy.engine.watermark import Pending
from tardy.project.headline import breaker_target
from tardy.project.home import activate

if t.TYPE_CHECKING:
    from sqlmesh import Context
    from sqlmesh.core.snapshot import Snapshot

DEFAULT_MAX_CHANGE = 0.25


class Advance(t.NamedTuple):
    """Where a promotion moves the arrival watermark (``tardy.engine.watermark.advance``)."""

    version: int
    stamp: str | None
    sources: dict[str, int]
    pending: dict[str, Pending]


def new_id() -> str:
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def report_dir(restatement_id: str) -> Path:
    return activate().root / "restatements" / restatement_id


class Plan:
    """The models to stage from ``roots`` (model -> days), upstream first, and their days."""

    def __init__(self, context: Context, roots: dict[str, set[date]]) -> None:
        self.snapshots = sqlmesh_api.model_snapshots(context)
        self.closure = Closure(context, self.snapshots)
        self.roots = roots

    def last_day(self) -> date:
        """The last day the roots reach if every reached day changed (today if none)."""
        reach = self.closure.downstream(self.roots)
        return max((d for days in reach.values() for d in days), default=date.today())

    def models(self) -> list[Snapshot]:
        """Every model that can be staged, upstream first: a view never is (always current)."""
        return [s for s in self.snapshots if s.model.name in self.closure.snapshots]

    def days(self, name: str, changed: dict[str, set[date]]) -> set[date]:
        """The model's days to restate: its roots' days, plus the days its parents'
        ``changed`` days (the parents already diffed) reach."""
        days = set(self.roots.get(name, set()))
        for parent in self.closure.parents(name):
            days |= self.closure.map(parent, name, changed.get(parent, set()))
        return days


def watched(context: Context, threshold: float | None) -> Breaker:
    """The circuit breaker's model, measure (``headline.breaker_target``) and threshold
    (config variables)."""
    model, measure = breaker_target(context)
    variables = context.config.variables
    return Breaker(
        model=model,
        measure=measure,
        threshold=float(variables.get("restatement_max_change", DEFAULT_MAX_CHANGE))
        if threshold is None
        else threshold,
    )


def snapshot_versions(context: Context) -> dict[str, str]:
    """Prod's version of every model (a staged restatement records them)."""
    return {
        s.model.name: sqlmesh_api.version(s)
        for s in sqlmesh_api.prod_snapshots(context).values()
        if s.is_model
    }


def moves_watermark(manifest: dict[str, t.Any]) -> bool:
    """Whether promoting the manifest moves the arrival watermark: a detected restatement
    does (to the bronze version it read), a named one carries the watermark's own version."""
    since = manifest["since_bronze_version"]
    sources = manifest.get("source_versions") or {}
    return manifest["bronze_version"] != (-1 if since is None else since) or sources != (
        manifest.get("since_source_versions") or {}
    )


def watermark_target(context: Context, manifest: dict[str, t.Any]) -> Advance | None:
    """Where promoting the manifest moves the arrival watermark, or None (a named restatement
    moves nothing). It moves to the versions detection read, past the records whose days lie
    inside the grace window too: their days are kept as pending, with each model's last
    computed day, since SQLMesh's lookback makes the model's next run recompute them
    (``tardy.engine.watermark``). The last computed day is taken now, at the advance: if a
    run recomputed them between detection and the promotion, they are reported pending
    until the next one (never the reverse)."""
    if not moves_watermark(manifest):
        return None
    snapshots = {s.model.name: s for s in sqlmesh_api.model_snapshots(context)}
    pending = {
        model: Pending(frozenset(days_of(spans)), sqlmesh_api.last_computed_day(snapshots[model]))
        for model, spans in manifest["absorbed_by_next_run"].items()
        if spans and model in snapshots
    }
    return Advance(
        manifest["bronze_version"],
        manifest["arrival_watermark"],
        dict(manifest.get("source_versions") or {}),
        pending,
    )
