"""A landing batch being generated (its source, arrival, file name, lines and kind counts) and
the feed's clock: epoch seconds, written as ISO-8601 UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

from tardy.ingest.landing import SLOT_HOURS

HOUR = 3600
DAY = 24 * HOUR
SLOT = SLOT_HOURS * HOUR
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_of(ts: datetime) -> int:
    """Whole seconds since the epoch, rounded down; the datetime must be aware."""
    if ts.tzinfo is None or ts.utcoffset() is None:
        raise ValueError(f"'through' must be a timezone-aware datetime, got naive {ts!r}")
    return (ts - EPOCH) // timedelta(seconds=1)


def datetime_of(seconds: int) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


@lru_cache(maxsize=4096)
def _day_prefix(day_number: int) -> str:
    return (date(1970, 1, 1) + timedelta(days=day_number)).isoformat() + "T"


def iso(seconds: int) -> str:
    day_number, rest = divmod(seconds, DAY)
    hours, rest = divmod(rest, HOUR)
    minutes, secs = divmod(rest, 60)
    return f"{_day_prefix(day_number)}{hours:02d}:{minutes:02d}:{secs:02d}Z"


@dataclass
class Batch:
    source_system: str
    arrival: int  # epoch seconds
    name: str
    lines: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, line: str, *kinds: str) -> None:
        self.lines.append(line)
        for kind in kinds:
            self.counts[kind] = self.counts.get(kind, 0) + 1
