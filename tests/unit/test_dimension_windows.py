"""tardy.engine.dimension.altered_windows: where two validity timelines of a key disagree.

Timelines are written by hand as (from, to, attributes); the expected windows are literal.
"""

from __future__ import annotations

from datetime import date, datetime

from tardy.engine.dimension import _OPEN, Window, altered_windows


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 1, day, hour)


def windows(old, new) -> list[tuple[tuple, datetime, datetime | None]]:
    return [(w.key, w.start, w.end) for w in altered_windows(old, new)]


NORTH, EAST, WEST = ("north",), ("east",), ("west",)
BEFORE = {(1,): [(at(1), at(20), NORTH), (at(20), _OPEN, WEST)]}


def test_a_late_change_alters_its_effective_time_to_the_next_version() -> None:
    after = {(1,): [(at(1), at(10, 9), NORTH), (at(10, 9), at(20), EAST), (at(20), _OPEN, WEST)]}
    assert windows(BEFORE, after) == [((1,), at(10, 9), at(20))]


def test_a_late_change_of_the_current_version_alters_an_open_window() -> None:
    after = {(1,): [(at(1), at(20), NORTH), (at(20), at(25), WEST), (at(25), _OPEN, EAST)]}
    assert windows(BEFORE, after) == [((1,), at(25), None)]


def test_the_same_attributes_alter_nothing() -> None:
    # A duplicate (same versions), or a new version with the attributes of the one it splits.
    assert windows(BEFORE, BEFORE) == []
    split = {(1,): [(at(1), at(5), NORTH), (at(5), at(20), NORTH), (at(20), _OPEN, WEST)]}
    assert windows(BEFORE, split) == []


def test_a_corrected_version_and_a_new_store() -> None:
    after = {
        (1,): [(at(1), at(20), EAST), (at(20), _OPEN, WEST)],  # the opening corrected
        (2,): [(at(3, 12), _OPEN, NORTH)],  # a store first known now
    }
    assert windows(BEFORE, after) == [((1,), at(1), at(20)), ((2,), at(3, 12), None)]


def test_an_earlier_first_version_alters_the_time_before_the_old_first() -> None:
    after = {(1,): [(at(1), at(20), NORTH), (at(20), _OPEN, WEST)]}
    before = {(1,): [(at(4), at(20), NORTH), (at(20), _OPEN, WEST)]}
    assert windows(before, after) == [((1,), at(1), at(4))]


def test_window_days_are_the_calendar_days_it_touches() -> None:
    window = Window((1,), at(10, 9), at(12))  # ends at midnight: the 12th is not touched
    assert window.days(date(2026, 1, 31)) == {date(2026, 1, 10), date(2026, 1, 11)}
    open_ended = Window((1,), at(30, 23), None)
    assert open_ended.days(date(2026, 1, 31)) == {date(2026, 1, 30), date(2026, 1, 31)}
