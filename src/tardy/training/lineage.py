"""Which model versions a restatement made stale, and the rule that crowns a challenger.

Pure functions of the published versions (``tardy.consumers.versions``) and the registered models'
lineage (``tardy.training.registry``), so each rule is stated once and tested without Spark.

*Stale*: a model version read a published version ``T@vJ`` over the days ``[first, last]``;
the restatement published ``T@vK`` with ``K > J`` whose changed days include one of those
days. A model trained on ``T@vK`` or later already saw the correction; one whose days the
restatement did not touch is not stale, whatever the version it read.

*The alias rule*: the challenger (retrained on the corrected versions) replaces the champion
when, backtested on the same held-out rows of the corrected snapshot, its mean absolute error
is at most the champion's times ``1 + tolerance``. The default tolerance, 5 %, prefers the
model that learned from corrected data unless it is materially worse: the champion learned
from rows the restatement showed wrong, and two MAEs within a few percent on a week of
held-out rows are within noise of each other. ``--tolerance 0`` asks for no worse at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from tardy.consumers.versions import Publication
from tardy.errors import InputError
from tardy.training.registry import Registered

DEFAULT_TOLERANCE = 0.05


@dataclass(frozen=True)
class Superseded:
    """A published version a restatement replaced, and the days it changed."""

    old: Publication | None  # None: the restatement published the table's first version
    new: Publication

    def as_dict(self) -> dict[str, object]:
        return {
            "table_name": self.new.table_name,
            "superseded": self.old.name if self.old else None,
            "by": self.new.name,
            "changed_days": self.new.changed_days,
        }


@dataclass(frozen=True)
class StaleModel:
    """A registered version one of whose inputs holds days the restatement changed."""

    version: int
    champion: bool
    reads: str  # the published version it read, e.g. gold.store_features@v2
    superseded_by: str
    days: list[str]  # the changed days it read

    def as_dict(self) -> dict[str, object]:
        return {
            "version": self.version,
            "champion": self.champion,
            "reads": self.reads,
            "superseded_by": self.superseded_by,
            "days": self.days,
        }


def superseded(restatement_id: str, history: list[Publication]) -> list[Superseded]:
    """The publications ``restatement_id`` produced, each with the one it replaced."""
    found = []
    for new in history:
        if new.produced_by != restatement_id:
            continue
        earlier = [p for p in history if p.table_name == new.table_name and p.version < new.version]
        found.append(Superseded(earlier[-1] if earlier else None, new))
    if not found:
        raise InputError(
            f"{restatement_id} published nothing: no promoted restatement has that id "
            "(`tardy log` lists them)"
        )
    return found


def stale(replaced: list[Superseded], models: list[Registered]) -> list[StaleModel]:
    """The model versions that read a day ``replaced`` changed, from a version before it."""
    found = []
    for model in models:
        for read in model.inputs:
            for s in replaced:
                if s.new.table_name != read.table_name or s.new.version <= read.version:
                    continue
                days = read.used(s.new.changed_days)
                if days:
                    found.append(
                        StaleModel(model.version, model.champion, read.name, s.new.name, days)
                    )
    return found


def stale_since_trained(history: list[Publication], models: list[Registered]) -> list[StaleModel]:
    """Every model version and every publication since its training that changed days it
    read (the report's view: ``stale`` over all publications, not one restatement's)."""
    return stale([Superseded(None, p) for p in history], models)


@dataclass(frozen=True)
class Verdict:
    promote: bool
    reason: str


def decide(champion_mae: float, challenger_mae: float, tolerance: float) -> Verdict:
    """The alias rule (module docstring)."""
    if tolerance < 0:
        raise InputError(f"--tolerance must be 0 or more, got {tolerance}")
    bound = champion_mae * (1 + tolerance)
    if challenger_mae <= bound:
        return Verdict(
            True,
            f"challenger MAE {challenger_mae:.4f} <= champion's {champion_mae:.4f}"
            + (f" x {1 + tolerance:g}" if tolerance else ""),
        )
    return Verdict(
        False,
        f"challenger MAE {challenger_mae:.4f} > champion's {champion_mae:.4f}"
        + (f" x {1 + tolerance:g}" if tolerance else "")
        + ": the champion stays",
    )
