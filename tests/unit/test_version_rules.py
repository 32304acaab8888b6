"""The rules of ``tardy.consumers.versions`` that need no Spark: which publication
``--as-of`` names, how a value becomes text in the deterministic export, who produced a
Delta version."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from tardy.consumers.versions import (
    NULL,
    Publication,
    VersionNotFound,
    as_text,
    resolve,
)
from tardy.consumers.versions import (
    producer as producer_of,
)
from tardy.errors import InputError

TABLE = "gold.daily_store_revenue"
ID = "20260115T093012Z-week_2"


def _published(version: int, delta_version: int, at: str, table: str = TABLE) -> Publication:
    return Publication(
        table_name=table,
        version=version,
        physical_table="sqlmesh__gold.gold__daily_store_revenue__1",
        delta_version=delta_version,
        time_column="event_date",
        produced_by="run",
        changed_days=[],
        revisions={},
        rows=0,
        sha256="0" * 64,
        published_at=at,
    )


HISTORY = [
    _published(1, 5, "2026-01-15T09:00:00+00:00"),
    _published(2, 9, "2026-01-16T09:00:00+00:00"),
    _published(3, 12, "2026-01-17T09:00:00+00:00"),
    _published(1, 7, "2026-01-15T09:00:00+00:00", table="gold.weekly_store_revenue"),
]


@pytest.mark.parametrize(
    ("as_of", "version"),
    [
        (None, 3),
        ("latest", 3),
        ("v2", 2),
        (f"{TABLE}@v1", 1),
        ("9", 2),  # a Delta version number
        ("2026-01-16T09:00:00Z", 2),  # published at or before that instant
        ("2026-01-16T08:59:59Z", 1),
        ("2026-01-16T10:00:00", 2),  # no zone: UTC
        ("2026-01-18T00:00:00+01:00", 3),
    ],
)
def test_as_of_names_one_publication(as_of: str | None, version: int) -> None:
    assert resolve(HISTORY, TABLE, as_of).version == version


@pytest.mark.parametrize("as_of", ["v4", "7", "2026-01-15T08:00:00Z"])
def test_as_of_naming_nothing_published_is_refused(as_of: str) -> None:
    with pytest.raises(VersionNotFound):
        resolve(HISTORY, TABLE, as_of)


def test_a_table_never_published_and_a_bad_as_of_are_refused() -> None:
    with pytest.raises(VersionNotFound, match="tardy publish"):
        resolve(HISTORY, "gold.monthly_store_revenue", None)
    with pytest.raises(InputError, match="ISO-8601"):
        resolve(HISTORY, TABLE, "yesterday")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, NULL),
        (True, "true"),
        (Decimal("4651.70"), "4651.70"),  # the scale kept
        (date(2026, 1, 10), "2026-01-10"),
        (datetime(2026, 1, 10, 8, 0, tzinfo=UTC), "2026-01-10T08:00:00+00:00"),
        (7, "7"),
        (0.1, "0.1"),
        ("a,b", "a,b"),  # the CSV writer quotes it
        ({"b": 1, "a": 2}, '{"a": 2, "b": 1}'),
    ],
)
def test_each_value_has_one_text(value: object, text: str) -> None:
    assert as_text(value) == text


@pytest.mark.parametrize(
    ("user_metadata", "producer", "restatement", "restated"),
    [
        ("tardy:promote:20260115T093012Z-week_2", ID, ID, True),
        ("tardy:rollback:20260115T093012Z-week_2", f"rollback:{ID}", ID, False),
        (None, "run", None, False),
        ("someone else's note", "run", None, False),
    ],
)
def test_who_produced_a_delta_version(
    user_metadata: str | None, producer: str, restatement: str | None, restated: bool
) -> None:
    """The producer of a Delta version, then what a publication of it says: the restatement
    it comes from, and whether a restatement's promotion produced it (the card's
    ``last_restated_at``, the release note's reason and actor)."""
    assert producer_of(user_metadata) == producer
    publication = dataclasses.replace(HISTORY[0], produced_by=producer)
    assert publication.restatement_id == restatement
    assert publication.restated is restated
