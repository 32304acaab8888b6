"""The grace window fitted to the evidence: ``tardy grace [SOURCE] [--apply]``.

The window lives in one place, ``variables.grace_days`` in ``project.yaml``: every model's
``lookback`` derives from it (``macros/grace.py``'s ``@grace_lookback``; the Python model
reads the same line, ``grace_days``), and so do the data watermark, finality and lateness.

For each source the lateness series (``tardy.lateness_series``, over all of its history)
says, for any window of ``g`` days, how many of its measured records would have come late
(the late-day buckets above ``g``). A source's candidates are the windows within its tier's
bounds (``grace: {min, max}`` of its tier in ``lateness_alert_tiers``); its suggestion is the
smallest candidate whose late share stays within the tier's ``late_ratio`` (the largest when
none does, flagged). The project's suggestion is the largest of its sources' (of ``SOURCE``
alone when named): one window serves every source. The days a window keeps provisional are
computed by ``tardy status``'s rule on the source's latest arrival: the days from its data
watermark's (latest arrival minus the window) through the latest arrival's own, which is
still arriving (``g + 1`` days, the first of them named).

``--apply`` writes the suggestion into that one line of ``project.yaml``; nothing changes in
the lakehouse until the stock ``sqlmesh plan`` applies the models whose lookback moved
(never silently), and ``tardy publish`` then recreates the views that hold the window.
"""

from __future__ import annotations

import os
import re
import tempfile
import typing as t
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

from tardy.errors import InputError

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tardy.lateness.alerts import Thresholds
    from tardy.lateness.series import Hour

SETTINGS_FILE = "project.yaml"
GRACE_LINE = re.compile(r"^(?P<head>[ \t]+grace_days:[ \t]*)(?P<days>\d+)(?P<tail>[^\n]*)$", re.M)
DEFAULT_BOUNDS = (1, 14)  # a tier without `grace: {min, max}`


def _line(text: str, file: Path) -> re.Match[str]:
    found = list(GRACE_LINE.finditer(text))
    if len(found) != 1:
        raise InputError(
            f"{file}: expected one `grace_days: <days>` line under variables, found {len(found)}"
        )
    return found[0]


def grace_days(project: Path) -> int:
    """The window written in ``project``'s ``project.yaml``."""
    file = project / SETTINGS_FILE
    return int(_line(file.read_text(), file)["days"])


def write_grace_days(project: Path, days: int) -> None:
    """Replace the window in ``project.yaml`` (atomically; its comments kept)."""
    file = project / SETTINGS_FILE
    text = file.read_text()
    match = _line(text, file)
    new = text[: match.start("days")] + str(days) + text[match.end("days") :]
    handle, temporary = tempfile.mkstemp(dir=file.parent, prefix=".project.", suffix=".yaml")
    with os.fdopen(handle, "w") as out:
        out.write(new)
    os.chmod(temporary, file.stat().st_mode & 0o777)
    os.replace(temporary, file)


@dataclass
class Candidate:
    days: int
    late_rows: int
    late_share: float | None  # None: no measured record
    provisional_days: int  # the days a window of ``days`` keeps provisional, today's included
    first_provisional_day: str | None = None  # the first of them (None: nothing arrived)


@dataclass
class SourceFit:
    source_system: str
    tier: str
    target: float  # the tier's late_ratio
    bounds: tuple[int, int]
    measured_rows: int
    candidates: list[Candidate]
    suggested: int
    meets_target: bool


@dataclass
class Fit:
    current: int
    suggested: int
    sources: list[SourceFit] = field(default_factory=list)
    applied: bool = False
    statements: int = 0

    def as_dict(self) -> dict[str, t.Any]:
        return asdict(self)


def bounds_of(variables: t.Mapping[str, t.Any], tier: str) -> tuple[int, int]:
    """A tier's window bounds (``grace: {min, max}``), checked."""
    from tardy.lateness.alerts import TIERS_VARIABLE

    raw = ((variables.get(TIERS_VARIABLE) or {}).get(tier) or {}).get("grace")
    if raw is None:
        return DEFAULT_BOUNDS
    try:
        low, high = int(raw["min"]), int(raw["max"])
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(
            f"project.yaml: {TIERS_VARIABLE}.{tier}.grace needs whole days min and max ({error})"
        ) from error
    if not 0 <= low <= high:
        raise InputError(f"project.yaml: {TIERS_VARIABLE}.{tier}.grace: 0 <= min <= max")
    return low, high


def data_watermark(max_arrival: datetime | None, grace_days: int) -> datetime | None:
    return None if max_arrival is None else max_arrival - timedelta(days=grace_days)


def is_final(day: date, watermark: datetime | None) -> bool:
    """The whole of ``day`` lies before the watermark: ``day + 1 (00:00) <= watermark``."""
    return watermark is not None and day < watermark.date()


def provisional(latest: datetime | None, days: int) -> tuple[int, str | None]:
    """How many days, from which, a window of ``days`` keeps provisional at the latest
    arrival ``latest`` (the data watermark and finality above, as status reads them)."""
    watermark = data_watermark(latest, days)
    if latest is None or watermark is None:
        return days + 1, None
    first = latest.date() - timedelta(days=days + 1)
    while is_final(first, watermark):
        first += timedelta(days=1)
    return (latest.date() - first).days + 1, first.isoformat()


def fit_source(
    name: str, hours: list[Hour], tier: str, target: float, bounds: tuple[int, int]
) -> SourceFit:
    """One source's candidates and suggestion from its series rows."""
    buckets: dict[int, int] = {}
    for hour in hours:
        for bucket, n in hour.days_late.items():
            buckets[bucket] = buckets.get(bucket, 0) + n
    measured = sum(buckets.values())
    latest = max((h.arrival_hour for h in hours), default=None)
    candidates = []
    for days in range(bounds[0], bounds[1] + 1):
        late = sum(n for bucket, n in buckets.items() if bucket > days)
        share = late / measured if measured else None
        held, first = provisional(latest, days)
        candidates.append(Candidate(days, late, share, held, first))
    within = [c.days for c in candidates if c.late_share is None or c.late_share <= target]
    return SourceFit(
        source_system=name,
        tier=tier,
        target=target,
        bounds=bounds,
        measured_rows=measured,
        candidates=candidates,
        suggested=within[0] if within else bounds[1],
        meets_target=bool(within),
    )


def fit(
    spark: SparkSession,
    project: Path,
    variables: t.Mapping[str, t.Any],
    limits: Thresholds,
    source: str | None = None,
) -> Fit:
    """Every source's fit (or ``source``'s), and the project's suggestion (module
    docstring): the series brought up to date, then one read of it."""
    from tardy.engine.meter import Meter
    from tardy.lateness.series import extend, hours_of
    from tardy.sql import literal

    meter = Meter(spark)
    with meter.step("grace"):
        extend(spark)
        rows = hours_of(spark, f"source_system = {literal(source)}" if source else None)
    by_source: dict[str, list[Hour]] = {}
    for row in rows:
        by_source.setdefault(row.source_system, []).append(row)
    if source is not None and source not in by_source:
        raise InputError(f"no lateness series for source {source!r}: nothing of it ingested")
    fits = []
    for name, mine in sorted(by_source.items()):
        tier = limits.tier_of(name)
        if tier is None:
            continue
        fits.append(
            fit_source(name, mine, tier.name, tier.late_ratio, bounds_of(variables, tier.name))
        )
    current = grace_days(project)
    suggested = max((f.suggested for f in fits), default=current)
    return Fit(current, suggested, fits, statements=meter.statements["grace"])
