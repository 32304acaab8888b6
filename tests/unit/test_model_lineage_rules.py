"""The rules of ``tardy.training`` that need no Spark and no MLflow: which model versions a
restatement made stale, the alias rule, the snapshot's window."""

from __future__ import annotations

from datetime import date

import pytest

from tardy.consumers.versions import Publication
from tardy.errors import InputError
from tardy.training.lineage import decide, stale, stale_since_trained, superseded
from tardy.training.registry import Registered
from tardy.training.snapshot import Input, Window

DAILY, FEATURES = "gold.daily_store_revenue", "gold.store_features"


def _published(table: str, version: int, produced_by: str, days: list[str]) -> Publication:
    return Publication(
        table_name=table,
        version=version,
        physical_table=f"sqlmesh__gold.{table.replace('.', '__')}__1",
        delta_version=version + 10,
        time_column="event_date",
        produced_by=produced_by,
        changed_days=days,
        revisions={},
        rows=0,
        sha256="0" * 64,
        published_at="2026-01-01T00:00:00+00:00",
    )


def _model(version: int, reads: list[tuple[str, int, str, str]]) -> Registered:
    return Registered(
        version=version,
        run_id="r",
        inputs=[Input(table, v, "p", v + 10, first, last) for table, v, first, last in reads],
        snapshot_sha256="s",
        params={},
        metrics={},
        code_version="c",
        trained_after="",
        decision="",
        champion=version == 1,
        created_at="",
        artifacts="",
    )


HISTORY = [
    _published(DAILY, 1, "run", ["2026-01-01", "2026-01-02", "2026-01-03"]),
    _published(FEATURES, 1, "run", ["2026-01-01", "2026-01-02", "2026-01-03"]),
    _published(DAILY, 2, "R1", ["2026-01-06"]),
    _published(FEATURES, 2, "R1", ["2026-01-06", "2026-01-07", "2026-01-08"]),
    _published(DAILY, 3, "R2", ["2026-01-02"]),
]


def test_a_model_is_stale_when_the_restatement_changed_a_day_it_read_before() -> None:
    wide = _model(
        1, [(FEATURES, 1, "2026-01-01", "2026-01-07"), (DAILY, 1, "2026-01-02", "2026-01-09")]
    )
    early = _model(
        2, [(FEATURES, 1, "2026-01-01", "2026-01-03"), (DAILY, 1, "2026-01-02", "2026-01-05")]
    )
    after = _model(
        3, [(FEATURES, 2, "2026-01-01", "2026-01-07"), (DAILY, 2, "2026-01-02", "2026-01-09")]
    )
    found = stale(superseded("R1", HISTORY), [wide, early, after])
    assert {(s.version, s.reads, tuple(s.days)) for s in found} == {
        (1, f"{FEATURES}@v1", ("2026-01-06", "2026-01-07")),
        (1, f"{DAILY}@v1", ("2026-01-06",)),
    }
    # R2 changed 2026-01-02 of the daily table: every model read it, the one trained on
    # daily v2 too (R2 came after it).
    assert {s.version for s in stale(superseded("R2", HISTORY), [wide, early, after])} == {1, 2, 3}
    # The report's view: every later publication that touched a model's days.
    since = stale_since_trained(HISTORY, [early])
    assert [(s.superseded_by, s.days) for s in since] == [(f"{DAILY}@v3", ["2026-01-02"])]


def test_superseded_pairs_each_new_version_with_the_one_it_replaced() -> None:
    pairs = superseded("R1", HISTORY)
    assert [(p.old.name if p.old else None, p.new.name) for p in pairs] == [
        (f"{DAILY}@v1", f"{DAILY}@v2"),
        (f"{FEATURES}@v1", f"{FEATURES}@v2"),
    ]
    with pytest.raises(InputError, match="published nothing"):
        superseded("R9", HISTORY)


def test_the_alias_rule_crowns_a_challenger_no_worse_than_the_champion() -> None:
    assert decide(10.0, 10.0, 0.0).promote
    assert decide(10.0, 9.0, 0.0).promote
    assert not decide(10.0, 10.01, 0.0).promote
    assert decide(10.0, 10.4, 0.05).promote and not decide(10.0, 10.6, 0.05).promote
    with pytest.raises(InputError):
        decide(10.0, 9.0, -0.1)


def test_a_window_is_checked_and_round_trips_through_run_parameters() -> None:
    window = Window(date(2026, 1, 2), date(2026, 1, 9), horizon_days=3, holdout_days=2)
    assert Window.from_params(window.as_params()) == window
    assert Window.from_params(Window().as_params()) == Window()
    with pytest.raises(InputError):
        Window(date(2026, 1, 9), date(2026, 1, 2))
    with pytest.raises(InputError):
        Window(horizon_days=0)
