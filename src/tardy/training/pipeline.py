"""``train``, ``impact``, ``retrain`` and ``rollback``: the training pipeline put together.

``train`` pins the latest published versions of the features and the label, builds the
snapshot, fits, backtests on the held-out days and registers the model with its lineage; the
first version becomes the champion. ``impact`` names the published versions a restatement
replaced and the registered versions it made stale (``lineage.stale``). ``retrain`` trains a
challenger with the champion's parameters on the versions published since, backtests both
on the challenger's held-out rows (the corrected truth) and moves the alias by the rule of
``lineage.decide``; the challenger stays registered either way, tagged with the verdict.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass
from pathlib import Path

from tardy.consumers.versions import Publication, publications, resolve
from tardy.engine.log import code_version
from tardy.engine.meter import Meter
from tardy.errors import InputError
from tardy.training import lineage, model, snapshot
from tardy.training.registry import ALIAS, MODEL_NAME, Lineage, Registered, Registry

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class Trained:
    registered: Registered
    snapshot: dict[str, object]
    statements: int
    seconds: float

    def as_dict(self) -> dict[str, object]:
        return {
            "model": self.registered.as_dict(),
            "snapshot": self.snapshot,
            "statements": self.statements,
            "seconds": self.seconds,
        }


def _pins(history: list[Publication], target: snapshot.Spec) -> tuple[Publication, Publication]:
    return resolve(history, target.features, None), resolve(history, target.label, None)


def _fit_and_register(
    spark: SparkSession,
    registry: Registry,
    window: snapshot.Window,
    alpha: float,
    trained_after: str = "",
    compare_with: int | None = None,
    tolerance: float = lineage.DEFAULT_TOLERANCE,
) -> tuple[int, snapshot.Snapshot, model.Backtest, lineage.Verdict | None, model.Backtest | None]:
    if alpha <= 0:
        raise InputError(f"--alpha must be positive, got {alpha}")
    target = snapshot.spec()
    features, label = _pins(publications(spark), target)
    snap = snapshot.build(spark, features, label, window, target)
    fitted = model.fit(snap.train, alpha)
    score = model.backtest(fitted, snap.holdout)
    verdict = rival = None
    if compare_with is not None:
        rival = model.backtest(registry.load(compare_with), snap.holdout)
        verdict = lineage.decide(rival.mae, score.mae, tolerance)
    params = {**window.as_params(), "alpha": repr(alpha)}
    metrics = {"holdout_mae": score.mae, "holdout_rmse": score.rmse}
    if rival is not None:
        metrics |= {"champion_holdout_mae": rival.mae}
    tags = Lineage(
        snap.inputs,
        snap.sha256,
        code_version() or "unknown",
        trained_after,
        ""
        if verdict is None
        else ("promoted: " if verdict.promote else "refused: ") + verdict.reason,
        {"tardy.holdout_start": snap.holdout_start.isoformat()},
    )
    version = registry.register(fitted, model.matrix(snap.holdout), params, metrics, tags)
    return version, snap, score, verdict, rival


def train(
    spark: SparkSession, home: Path, window: snapshot.Window, alpha: float = model.DEFAULT_ALPHA
) -> Trained:
    """Register a model trained on the latest published versions; the first is the champion."""
    registry = Registry(home)
    meter = Meter(spark)
    with registry.changing():
        with meter.step("train"):
            version, snap, _, _, _ = _fit_and_register(spark, registry, window, alpha)
        if registry.champion() is None:
            registry.crown(version)
    registered = _find(registry, version)
    return Trained(
        registered, snap.as_dict(), meter.statements["train"], round(meter.seconds["train"], 3)
    )


def _find(registry: Registry, version: int) -> Registered:
    return next(r for r in registry.versions() if r.version == version)


@dataclass
class Impact:
    restatement_id: str
    superseded: list[lineage.Superseded]
    stale: list[lineage.StaleModel]
    models: int  # registered versions checked

    def as_dict(self) -> dict[str, object]:
        return {
            "restatement_id": self.restatement_id,
            "published": [s.as_dict() for s in self.superseded],
            "stale_models": [s.as_dict() for s in self.stale],
            "models_checked": self.models,
        }


def impact(spark: SparkSession, home: Path, restatement_id: str) -> Impact:
    """What ``restatement_id`` made stale: published versions and registered models."""
    replaced = lineage.superseded(restatement_id, publications(spark))
    models = Registry(home).versions() if (home / "models").exists() else []
    return Impact(restatement_id, replaced, lineage.stale(replaced, models), len(models))


@dataclass
class Retrained:
    challenger: Registered
    champion_before: int
    champion: int  # after the verdict
    challenger_mae: float
    champion_mae: float
    promoted: bool
    reason: str
    snapshot: dict[str, object]
    statements: int
    seconds: float

    def as_dict(self) -> dict[str, object]:
        return {
            "challenger": self.challenger.as_dict(),
            "champion_before": self.champion_before,
            "champion": self.champion,
            "backtest": {
                "holdout_start": self.snapshot["holdout_start"],
                "rows": self.snapshot["holdout_rows"],
                "challenger_mae": self.challenger_mae,
                "champion_mae": self.champion_mae,
            },
            "promoted": self.promoted,
            "reason": self.reason,
            "snapshot": self.snapshot,
            "statements": self.statements,
            "seconds": self.seconds,
        }


def retrain(
    spark: SparkSession,
    home: Path,
    restatement_id: str,
    alpha: float | None = None,
    tolerance: float = lineage.DEFAULT_TOLERANCE,
) -> Retrained:
    """Retrain after ``restatement_id`` with the champion's parameters (``alpha`` overrides
    its own), backtest both on the same rows and move the alias by ``lineage.decide``."""
    meter = Meter(spark)
    registry = Registry(home)
    with meter.step("retrain"), registry.changing():
        lineage.superseded(restatement_id, publications(spark))  # refuses an unknown id
        champion = registry.champion()
        if champion is None:
            raise InputError(f"no {MODEL_NAME}@{ALIAS} to retrain: run `tardy train` first")
        params = _find(registry, champion).params
        window = snapshot.Window.from_params(params)
        version, snap, score, verdict, rival = _fit_and_register(
            spark,
            registry,
            window,
            alpha if alpha is not None else float(params["alpha"]),
            trained_after=restatement_id,
            compare_with=champion,
            tolerance=tolerance,
        )
        assert verdict is not None and rival is not None
        if verdict.promote:
            registry.crown(version)
    return Retrained(
        _find(registry, version),
        champion,
        version if verdict.promote else champion,
        score.mae,
        rival.mae,
        verdict.promote,
        verdict.reason,
        snap.as_dict(),
        meter.statements["retrain"],
        round(meter.seconds["retrain"], 3),
    )


def rollback(home: Path) -> tuple[int, int]:
    """Move the alias back to the champion before the current one: (from, to)."""
    registry = Registry(home)
    with registry.changing():
        return registry.rollback()


def registered(home: Path) -> list[Registered]:
    return Registry(home).versions() if (home / "models").exists() else []
