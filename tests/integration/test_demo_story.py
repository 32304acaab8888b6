"""`tardy demo`'s story, step by step, in-process: the fast tier's guard of ``test_cli``
(long tier: `tardy demo` as a user runs it, a process on the data home's warm engine).

The ``demo`` template (``demo_story``) runs the demo's own code (``tardy.simulate.demo.run_demo``:
ingest, plan, the late batches, a daily run, publish and train, detect, restate without
promoting, promote, status, a named restatement, impact and retrain, the report and the
summary) once per content hash, in the worker's warm engine, on a smaller month than the
command's (``demo_story.DEMO_CONFIG``); what it told and returned are the template's facts.
The tests check each step's result against the data home it left (a copy of the template),
the report's pages in headless Chromium, and `tardy detect` on the copy: nothing left
to restate (the long tier runs the whole demo again there: the same summary).
"""

from __future__ import annotations

import json
import typing as t
from decimal import Decimal
from pathlib import Path

import pytest
from demo_story import DEMO, run_demo
from homes import Engine
from report_pages import assert_report_pages_render


@pytest.fixture(scope="module")
def demo(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> dict[str, t.Any]:
    home = tmp_path_factory.mktemp("demo") / "home"
    facts = DEMO.copy_to(engine, home)
    facts["home"] = home
    return facts


def test_each_step_of_the_story_did_what_it_tells(demo: dict[str, t.Any]) -> None:
    story, told = demo["story"], demo["told"]
    for step in (
        "1. Land and ingest",
        "2. sqlmesh plan prod",
        "4. sqlmesh run",
        "5. tardy publish, tardy train",
        "6. tardy detect",
        "7. tardy restate --no-promote",
        "8. tardy promote",
        "9. tardy status",
        "10. A named restatement",
        "11. tardy impact, tardy retrain",
        "12. tardy report",
    ):
        assert step in told, step
    # The late data beyond the grace window was detected, staged, reviewed and promoted.
    restated = story["restatement"]
    assert restated["status"] == "promoted", restated
    assert {"silver.sales_transactions", "gold.daily_store_revenue"} <= set(restated["promoted"])
    assert "demo: late and corrected sales for closed days" in told
    # A late store change was among them: its validity windows, and region revenue promoted.
    assert story["store_changes"]["silver.store_versions"]
    assert "gold.daily_region_revenue" in restated["promoted"]
    assert "Late changes of silver.store_versions alter the as-of join" in told
    # The named week was recomputed, equal to prod: nothing promoted.
    named = story["named"]
    assert named["status"] == "promoted" and named["promoted"] == {}
    assert list(named["evaluated"]) == ["gold.weekly_store_revenue"]
    # The model trained before the restatement was made stale by it and retrained after it.
    models = story["models"]
    assert models["trained"] == 1 and models["stale"] == [1] and models["retrained"] == 2
    assert models["champion"] in (1, 2) and models["promoted"] == (models["champion"] == 2)
    assert "Periods changed by restatements" in told


def test_the_consumers_were_told_of_every_new_version(demo: dict[str, t.Any]) -> None:
    home, told = demo["home"], " ".join(demo["told"].split())
    notes = sorted((home / "releases").glob("*/v2.md"))
    assert len(notes) >= 2, notes
    for note in notes:
        assert str(note.relative_to(home)) in told
    events = [json.loads(line) for line in (home / "notifications.jsonl").read_text().splitlines()]
    published = [e for e in events if e["event"] == "publication"]
    assert {e["table"] for e in published if e["version"] == 2} == {
        note.parent.name for note in notes
    }
    assert "restatement_staged" in {e["event"] for e in events}
    assert "The newest event in $TARDY_HOME/notifications.jsonl:" in told


def test_the_summary_counts_every_source_and_quarantine(demo: dict[str, t.Any]) -> None:
    rows, home = demo["rows"], demo["home"]
    assert rows["bronze.pos_events"] > rows["silver.sales_transactions"] > 0
    quarantine_rows = sum(n for table, n in rows.items() if table.endswith("_quarantine"))
    assert quarantine_rows == sum(demo["quarantined"].values()) > 0
    lateness = demo["lateness"]
    assert 0 < lateness["beyond_grace_share"] < lateness["late_share"] < 1
    by_source = lateness["by_source"]
    assert set(by_source) == {folder.name for folder in (home / "landing").iterdir()}
    records = sum(source["records_with_event_ts"] for source in by_source.values())
    assert records == lateness["records_with_event_ts"]
    by_model = demo["quarantined_by_model"]
    assert {model: sum(counts.values()) for model, counts in by_model.items()} == {
        table: n for table, n in rows.items() if table.endswith("_quarantine") and n
    }
    assert demo["weekly"] and all(Decimal(w["revenue"]) > 0 for w in demo["weekly"])


def test_the_report_pages_draw_offline(
    engine: Engine, demo: dict[str, t.Any], tmp_path: Path
) -> None:
    """The demo's last step wrote the HTML report: headless Chromium finds every chart drawn
    with data, no script error and no request beyond the file; `tardy report --restatement`
    writes the reviewer's page of the demo's restatement, drawn the same way."""
    home, story = demo["home"], demo["story"]
    report = home / "reports" / Path(story["report"]).name
    assert_report_pages_render(engine, home, report, story, tmp_path)


def test_nothing_is_left_to_restate_after_the_demo(engine: Engine, demo: dict[str, t.Any]) -> None:
    """The fast guard of the re-run below: what the demo promoted is what bronze holds, so
    `tardy detect` finds nothing to restate, in any source or model."""
    from tardy.engine.detect import detect

    _, context, spark = engine.open(demo["home"])
    try:
        manifest = detect(context, spark).as_dict()
    finally:
        engine.release()
    assert manifest["late_rows"] == 0, manifest
    assert not any(manifest["roots"].values()) and not any(manifest["impacted"].values())
    assert not manifest["altered"], manifest  # nor a store change's windows


# Long tier: the whole demo run again on its home (`test_cli` runs it again after the command
# too). Its fast guard: the detect above.
@pytest.mark.long
def test_the_demo_run_again_has_nothing_left_to_restate(
    engine: Engine, demo: dict[str, t.Any]
) -> None:
    home, context = engine.open(demo["home"])[:2]
    try:
        again = run_demo(home, context)
    finally:
        engine.release()
    story = again.pop("story")
    first = {k: v for k, v in demo.items() if k not in ("story", "told", "home")}
    assert {k: v for k, v in again.items() if k != "told"} == first
    assert story["restatement"]["status"] == "nothing_to_do"
    assert story["named"]["promoted"] == {}
    assert story["models"] == {"trained": None}  # kept: no restatement, no retrain
