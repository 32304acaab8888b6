"""The source declarations (``tardy.project.sources``): the project's file loads; a malformed one is
refused at load with the file, the source and the field named."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tardy.ingest.tables import bronze_tables, table_of
from tardy.project.home import project_root
from tardy.project.sources import SourcesError, load

TIERS = ("realtime", "daily", "month_close")


def _project() -> dict:
    return YAML(typ="safe").load((project_root() / "sources.yaml").read_text())


def _write(tmp_path: Path, raw: dict) -> Path:
    path = tmp_path / "sources.yaml"
    YAML(typ="safe").dump(raw, path)
    return path


def test_the_projects_declarations_load_and_pick_each_folders_table() -> None:
    found = load(project_root() / "sources.yaml", TIERS)
    assert set(found.sources) >= {"pos", "partner", "store_master"}
    assert {t.name for t in bronze_tables(found)} >= {"bronze.pos_events", "bronze.store_changes"}
    assert table_of("partner", found).name == "bronze.pos_events"
    assert table_of("store_master", found).ts_field == "effective_ts"
    assert table_of("unknown_feed", found) is None
    assert found.tiers()["partner"] == "month_close"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda s: s["pos"].pop("event_time"), "source 'pos': field 'event_time': missing"),
        (lambda s: s["pos"].update(event_time="store_id"), "field 'event_time'"),
        (lambda s: s["pos"]["record"].update(amount="money"), "field 'record.amount'"),
        (lambda s: s["pos"].update(bronze="pos_events"), "field 'bronze'"),
        (lambda s: s["pos"].update(key=["nope"]), "field 'key'"),
        (lambda s: s["pos"].update(lateness="hourly"), "field 'lateness'"),
        (lambda s: s["pos"].update(colour="red"), "field 'colour': unknown"),
        (lambda s: s["pos"].update(key_index="yes"), "field 'key_index'"),
        (lambda s: s.update({"Bad-Name": s["pos"]}), "source 'Bad-Name'"),
        (
            lambda s: s["partner"]["record"].pop("discount"),
            "field 'record' differs from that of source",
        ),
        (
            lambda s: s["partner"].update(key_index="bronze.partner_keys"),
            "field 'key_index' differs from that of source",
        ),
        (lambda s: s["pos"].update(natural_key=["a"]), "field 'natural_key'"),
        (
            lambda s: s["partner"].update(natural_key="transaction_id"),
            "field 'natural_key' differs from that of source",
        ),
    ],
)
def test_a_malformed_declaration_is_refused_naming_file_source_and_field(
    tmp_path: Path, change, named: str
) -> None:
    raw = _project()
    sources = {
        name: {**body, "record": dict(body["record"])} for name, body in raw["sources"].items()
    }
    change(sources)
    path = _write(tmp_path, {"version": 1, "sources": sources})
    with pytest.raises(SourcesError) as refused:
        load(path, TIERS)
    assert str(path) in str(refused.value) and named in str(refused.value)


def test_a_file_that_is_not_a_declaration_is_refused(tmp_path: Path) -> None:
    for text in ("sources: [", "version: 2\nsources: {}\n", "version: 1\n"):
        path = tmp_path / "sources.yaml"
        path.write_text(text)
        with pytest.raises(SourcesError, match=str(path)):
            load(path, TIERS)


def test_a_natural_key_is_declared_or_the_one_key_field(tmp_path: Path) -> None:
    found = load(project_root() / "sources.yaml", TIERS)
    assert found.get("pos").natural_key_sql.startswith("COALESCE(NULLIF(TRIM(corrects_")
    raw = _project()
    raw["sources"]["pos"].pop("natural_key")
    raw["sources"]["partner"].pop("natural_key")
    assert load(_write(tmp_path, raw)).get("pos").natural_key_sql == "transaction_id"
    with pytest.raises(SourcesError, match="field 'natural_key': required with a key of 2"):
        _ = found.get("store_master").natural_key_sql
