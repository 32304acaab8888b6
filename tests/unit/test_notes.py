"""Release notes' rules without Spark: materiality (``project.yaml``'s threshold and measures)
and which publication events the sinks get (``notifications.publications``). The notes
themselves are checked against two versions' exports in ``test_versions``."""

from __future__ import annotations

from tardy.consumers.notes import Materiality
from tardy.outbox.notifications import Event, EventKind, wanted


def test_materiality_moves_by_the_share_of_the_value_before() -> None:
    rule = Materiality.of({"release_notes": {"material_change": 0.05}})
    assert rule.threshold == 0.05
    assert rule.moved("100.00", "105.00")  # exactly the threshold
    assert rule.moved("100.00", "94.99")
    assert not rule.moved("100.00", "104.99")
    assert rule.moved("0", "0.01")  # a day that appears
    assert not rule.moved("0", "0")
    assert rule.moved("-100", "-94")  # relative to the magnitude


def test_materiality_judges_the_named_measures_a_model_has_else_all() -> None:
    rule = Materiality.of({"release_notes": {"material_measures": ["revenue", "net_revenue"]}})
    assert rule.threshold == 0.01  # the default
    assert rule.judged(["transactions", "revenue", "items"]) == ["revenue"]
    assert rule.judged(["refunds", "net_revenue", "revenue"]) == ["net_revenue", "revenue"]
    assert rule.judged(["stores", "days"]) == ["stores", "days"]
    assert Materiality.of({}).judged(["a", "b"]) == ["a", "b"]


def _publication(material: bool | None) -> Event:
    return Event(EventKind.PUBLICATION, "t@v2 published", "t@v2", detail={"material": material})


def test_material_only_sinks_skip_the_versions_a_note_found_not_material() -> None:
    only = {"publications": "material"}
    assert wanted(_publication(True), only)
    assert not wanted(_publication(False), only)
    assert wanted(_publication(None), only)  # caught up without its note: sent
    assert wanted(Event(EventKind.ALERT, "late", "a", detail={"material": False}), only)
    for everything in (None, {}, {"publications": "all"}):
        assert wanted(_publication(False), everything)
