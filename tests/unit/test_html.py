"""The report pages open offline in a real browser, draw every chart with its data, run no
script error and show the data's text as text.

The reports are built by hand (no Spark): a year of days, three daily sources and one that
delivered once, three restatements (one rolled back, the latest one changed nothing) and a
reason carrying HTML that would run if it were not escaped; and a report with nothing in it.
Each page is written to a file and opened in headless Chromium (``tests/browser.py``); a
broken page checks that the checker sees what it is meant to. The charts' figures are also
read directly (which trace shows what, what the menu starts on).
"""

from __future__ import annotations

import struct
from datetime import date, datetime, timedelta
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
import pytest
from browser import ChromiumMissing, PageCheck, check_page
from plotly.offline import get_plotlyjs

from tardy.consumers.card import Card
from tardy.consumers.status import SourceStatus
from tardy.quarantine.listing import Count
from tardy.rendering.html import report_page, restatement_page
from tardy.rendering.html.intervals import interval_text, intervals_figure
from tardy.rendering.html.lateness import lateness_figure, points
from tardy.rendering.html.page import MAX_TABLE_ROWS
from tardy.reporting.records import (
    DailyRevision,
    IntervalChange,
    LatenessAlert,
    LatenessHour,
    QuarantineDay,
    Report,
    Restated,
    RestatedPeriod,
    RestatementReport,
    RestatementSummary,
    TrailRow,
)

CHARTS = ["daily", "periods", "lateness", "quarantine", "restatements"]
DAYS = 365
START = date(2025, 1, 1)
SOURCES = ["pos_eu", "pos_us", "web_shop"]
WEEKLY = "partner"  # delivered once: one arrival hour
REASONS = ["unparseable amount", "unknown store", "event after arrival"]
# Escaped, this is text on the page; not escaped, it would log a console error (the checker
# collects those) and request a file "x" (the checker blocks and records that).
HOSTILE = (
    '<script>console.error("injected")</script><img src=x onerror="console.error(\'injected\')">'
)
LATE_ID = "20251201T101500Z-late01"
ROLLED_ID = "20251215T080000Z-roll02"
NOOP_ID = "20251220T090000Z-noop03"  # the latest: re-ran one week, changed nothing
LAG_ALERT = LatenessAlert(
    SOURCES[1], "lag_p99_vs_baseline", ["2025-01-15T10:00:00", "2025-01-15T12:00:00"], "jump"
)
PERIOD_ROWS = 300  # more than the table shows (200)
CHANGE_ROWS = 250


def day(i: int) -> str:
    return (START + timedelta(days=i)).isoformat()


def hour(i: int) -> str:
    return (datetime.combine(START, datetime.min.time()) + timedelta(hours=i)).isoformat()


def restated_days() -> set[int]:
    return {i for i in range(DAYS) if i % 17 == 5}


def intervals() -> list[IntervalChange]:
    return [
        IntervalChange(
            model=model,
            start=day(i),
            end=day(i + span - 1),
            measure=measure,
            before=f"{1000 * span + i}.50",
            after=f"{1000 * span + i + 37 * (i % 3 - 1)}.25",
            rows_before=40 * span,
            rows_after=40 * span + i % 3,
            keys_added=i % 3,
            keys_removed=0,
            keys_changed=1 + i % 4,
        )
        for i in range(330, 340)
        for model, measure, span in (
            ("gold.daily_store_revenue", "revenue", 1),
            ("silver.sales_transactions", "net_amount", 1),
        )
    ] + [
        IntervalChange(
            model="gold.monthly_store_revenue",
            start=day(334),
            end=day(364),
            measure="revenue",
            before="31000.00",
            after="31123.45",
            rows_before=9,
            rows_after=9,
            keys_added=0,
            keys_removed=0,
            keys_changed=3,
        ),
        IntervalChange(  # nothing before: no relative change
            model="gold.weekly_store_revenue",
            start=day(357),
            end=day(357),
            measure="revenue",
            before="0.00",
            after="250.00",
            rows_before=0,
            rows_after=3,
            keys_added=3,
            keys_removed=0,
            keys_changed=0,
        ),
    ]


def unchanged_week() -> IntervalChange:
    return IntervalChange(
        model="gold.weekly_store_revenue",
        start=day(350),
        end=day(350),
        measure="revenue",
        before="5000.00",
        after="5000.00",
        rows_before=5,
        rows_after=5,
        keys_added=0,
        keys_removed=0,
        keys_changed=0,
    )


def full_report() -> Report:
    restated = restated_days()
    daily = []
    for i in range(DAYS):
        first = 10_000 + (i * 37) % 900
        changed_by = []
        if i in restated:  # odd days twice, the second time by the rolled-back one
            changed_by.append(Restated(LATE_ID, "late POS batch " + HOSTILE, "2025-12-01T10:20"))
            if i % 2:
                changed_by.append(Restated(ROLLED_ID, "corrected feed", "2025-12-15T08:30"))
        daily.append(
            DailyRevision(
                event_date=day(i),
                first_published=f"{first}.00",
                final=f"{first + (120 if i % 2 else -80) * bool(changed_by)}.00",
                revision=len(changed_by),
                period_status="provisional" if i >= DAYS - 3 else "final",
                restatements=changed_by,
            )
        )
    models = ["gold.daily_store_revenue", "gold.weekly_store_revenue", "silver.sales_transactions"]
    periods = [
        RestatedPeriod(
            model=models[i % 3],
            period=day(i % DAYS),
            restatement_id=LATE_ID if i % 4 else ROLLED_ID,
            reason="late POS batch " + HOSTILE if i % 4 else "corrected feed",
            promoted_at="2025-12-01T10:20:00" if i % 4 else "2025-12-15T08:30:00",
            recent=i % 5 == 0,
        )
        for i in range(PERIOD_ROWS)
    ]
    lateness = [
        LatenessHour(
            source_system=source,
            arrival_hour=hour(i),
            rows=1000 + i,
            late_rows=(i * (s + 1)) % 40,
            late_ratio=((i * (s + 1)) % 40) / (1000 + i),
            lag_hours_p50=2.0 + s + (i % 7) * 0.3,
            lag_hours_p95=20.0 + 5 * s + (i % 11),
            lag_hours_p99=60.0 + 10 * s + (i % 23) * 2,
        )
        for s, source in enumerate(SOURCES)
        for i in range(DAYS)
    ] + [
        LatenessHour(WEEKLY, hour(200), 4232, 4232, 1.0, 163.5, 236.2, 239.7),
    ]
    quarantine = [
        QuarantineDay(day=day(i), reason=reason, rows=1 + (i * (r + 2)) % 9)
        for i in range(DAYS)
        for r, reason in enumerate(REASONS)
        if (i + r) % 3  # two reasons a day
    ]
    return Report(
        generated_at="2025-12-31T23:59:00+00:00",
        home="/srv/tardy/home",
        grace_days=3,
        daily=daily,
        periods=periods,
        lateness=lateness,
        lateness_alerts=[LAG_ALERT],
        lag_limits={SOURCES[1]: 88.0},
        quarantine=quarantine,
        quarantine_review=REVIEW,
        restatements=[
            RestatementSummary(
                LATE_ID,
                "late POS batch " + HOSTILE,
                "promoted",
                "2025-12-01T10:15:00",
                "ci@runner",
                intervals(),
            ),
            RestatementSummary(
                ROLLED_ID,
                "corrected feed",
                "rolled_back",
                "2025-12-15T08:00:00",
                "ana@laptop",
                intervals()[:6],
            ),
            RestatementSummary(
                NOOP_ID,
                "recheck week 50",
                "promoted",
                "2025-12-20T09:00:00",
                "ana@laptop",
                [unchanged_week()],
            ),
        ],
        cards=cards(),
    )


REVIEW = [
    Count("pos_eu", "negative_quantity " + HOSTILE, 3, 2, 96.0),
    Count("pos_us", "invalid_store_id", 0, 4, None),
]


def cards() -> list[Card]:
    """Two published models: one restated, reading two sources; one never published yet."""
    late = [
        SourceStatus(name, 100, 100, 0, 0, late, late / 100, 1.0, 2.0, 3.0, "2025-12-31")
        for name, late in (("pos_eu", 7), ("pos_us", 0))
    ]
    return [
        Card(
            table="gold.daily_store_revenue",
            description="Revenue per store and day.",
            owner="finance_analytics " + HOSTILE,
            current_version="gold.daily_store_revenue@v4",
            last_published_at="2025-12-20T09:00:00+00:00",
            last_produced_by=LATE_ID,
            last_restated_at="2025-12-01T10:15:00+00:00",
            last_restatement_id=LATE_ID,
            final_through="2025-12-28",
            first_provisional_day="2025-12-29",
            sources=late,
        ),
        Card("gold.store_features", None, None, None, None, None, None, None, None, None),
    ]


def empty_report() -> Report:
    return Report("2025-12-31T23:59:00+00:00", "/srv/tardy/empty", 3, [], [], [], [], [])


def restatement_report() -> RestatementReport:
    summary = full_report().restatements[0]
    return RestatementReport(
        generated_at="2025-12-31T23:59:00+00:00",
        summary=summary,
        manifest={
            "arrival_watermark": "2025-12-01T09:00:00",
            "previous_watermark": "2025-11-30T09:00:00",
            "bronze_version": 412,
            "since_bronze_version": 398,
            "late_rows": 1234,
            "roots": {"silver.sales_transactions": [[day(330), day(339)]]},
            "impacted": {
                "silver.sales_transactions": [[day(330), day(339)]],
                "gold.daily_store_revenue": [[day(330), day(339)]],
                "gold.monthly_store_revenue": [[day(334), day(334)]],
            },
            "absorbed_by_next_run": {"gold.daily_store_revenue": [[day(363), day(364)]]},
            "reasons": {"silver.sales_transactions": "late rows " + HOSTILE},
            "stock_commands": ["sqlmesh restate silver.sales_transactions --start 2025-11-27"],
        },
        audits=[
            {
                "model": "gold.daily_store_revenue",
                "audit": "not_null_revenue",
                "interval_start": day(330),
                "interval_end": day(339),
                "blocking": True,
                "failing_rows": 0,
            },
            {
                "model": "silver.sales_transactions",
                "audit": "unique_transaction_id",
                "interval_start": day(330),
                "interval_end": day(339),
                "blocking": False,
                "failing_rows": 7,
            },
        ],
        breaker=[
            {
                "day": day(333),
                "measure": "revenue",
                "before": "1000.00",
                "after": "1500.00",
                "change": 0.5,
            },
            {"day": day(334), "measure": "rows", "before": "0", "after": "12", "change": None},
        ],
        breaker_rule="gold.daily_store_revenue: a closed day whose rows or measure move by more "
        "than 25%",
        changes=[
            TrailRow(
                model="silver.sales_transactions",
                row_key=f"tx-{i:05d}",
                event_date=day(330 + i % 10),
                change=["added", "changed", "removed"][i % 3],
                action="promoted",
                before=None if i % 3 == 0 else {"net_amount": f"{i}.00", "store": "s1"},
                after=None if i % 3 == 2 else {"net_amount": f"{i + 1}.00", "store": "s1"},
            )
            for i in range(200)
        ],
        changes_total=CHANGE_ROWS,
        how_to=[f'tardy rollback {LATE_ID} --reason "..."'],
    )


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / f"{name}.html"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, PageCheck]]:
    """Each page's HTML and what the browser saw of it (one browser session per page)."""
    tmp = tmp_path_factory.mktemp("html")
    out = {}
    for name, text in (
        ("full", report_page(full_report())),
        ("empty", report_page(empty_report())),
        ("restatement", restatement_page(restatement_report())),
    ):
        out[name] = (text, check_page(write(tmp, name, text), tmp / f"{name}.png"))
    return out


@pytest.mark.parametrize("name", ["full", "empty", "restatement"])
def test_page_runs_offline_without_errors(pages: dict[str, tuple[str, PageCheck]], name: str):
    text, check = pages[name]
    assert check.errors == []
    assert check.requests == []
    assert check.not_drawn == []
    assert text.count(get_plotlyjs()[:300]) == 1  # plotly.js inline, once
    width, height = png_size(check.screenshot)
    assert width == 1280 and height > 900  # the whole page, taller than the window
    assert check.screenshot.stat().st_size > 30_000  # a blank page is a few kB


def test_full_report_draws_every_chart_with_its_data(pages: dict[str, tuple[str, PageCheck]]):
    _, check = pages["full"]
    assert check.charts == CHARTS
    assert check.empty == []
    restated = len(restated_days())
    # daily: first published and final lines, restated markers, the change bars
    assert check.points["daily"] == 3 * DAYS + restated
    # periods: two bar traces (all time, last 7 days), one bar per model
    assert check.points["periods"] == 2 * 3
    # lateness: p50/p95/p99 per source, then the late ratio per source (the weekly one: once)
    assert check.points["lateness"] == 4 * len(SOURCES) * DAYS + 4
    # quarantine: one bar per day and reason
    assert check.points["quarantine"] == len(full_report().quarantine)
    # restatements: one bar per interval of each restatement (the menu shows one)
    assert check.points["restatements"] == len(intervals()) + 6 + 1
    assert all(check.sizes[name] >= 240 for name in CHARTS), check.sizes


def test_full_report_caps_the_periods_table(pages: dict[str, tuple[str, PageCheck]]):
    text, check = pages["full"]
    assert f"… and {PERIOD_ROWS - MAX_TABLE_ROWS} more" in check.text
    section = text.split('id="periods"', 1)[1].split("</section>", 1)[0]
    assert section.count("<tr>") == MAX_TABLE_ROWS + 1  # the header row too


def test_full_report_shows_each_published_models_card(pages: dict[str, tuple[str, PageCheck]]):
    text, check = pages["full"]
    section = text.split('id="products"', 1)[1].split("</section>", 1)[0]
    assert section.count("<tr>") == len(cards()) + 1  # the header row too
    shown = check.text.split("Data products", 1)[1].split("Models trained", 1)[0]
    for value in ("gold.daily_store_revenue", "v4", "2025-12-01 10:15", "2025-12-28"):
        assert value in shown, value
    assert "pos_eu 7.00%" in shown and "pos_us 0.00%" in shown
    assert "gold.store_features" in shown and "not yet" in shown and "never" in shown
    assert 'id="products"' not in pages["empty"][0]  # nothing published: no section


def test_full_report_counts_open_and_reviewed_quarantine(
    pages: dict[str, tuple[str, PageCheck]],
):
    """The stewards' review under the quarantine chart: a row per source and reason."""
    text, check = pages["full"]
    section = text.split('id="quarantine"', 1)[1].split("</section>", 1)[0]
    assert section.count("<tr>") == len(REVIEW) + 1  # the header row too
    shown = " ".join(check.text.split("Quarantine review", 1)[1].split())
    assert "pos_eu negative_quantity" in shown and "3 2 96" in shown
    assert "pos_us invalid_store_id 0 4 -" in shown
    assert "Quarantine review" not in pages["empty"][0]  # nothing quarantined: no table


def test_text_from_the_data_is_escaped(pages: dict[str, tuple[str, PageCheck]]):
    for name in ("full", "restatement"):
        text, check = pages[name]
        assert "<script>console.error" not in text
        assert "<img src=x" not in text
        assert HOSTILE in check.text  # shown as written
        assert not any("injected" in error for error in check.errors)


def test_empty_report_says_nothing_yet(pages: dict[str, tuple[str, PageCheck]]):
    text, check = pages["empty"]
    assert check.charts == CHARTS
    assert check.empty == CHARTS
    assert check.points == dict.fromkeys(CHARTS, 0)
    assert text.count("Nothing yet") == len(CHARTS)
    assert check.text.count("Nothing yet") == len(CHARTS)  # drawn: plotly's SVG text


def test_restatement_page(pages: dict[str, tuple[str, PageCheck]]):
    text, check = pages["restatement"]
    assert check.charts == ["intervals"]
    assert check.points["intervals"] == len(intervals())
    assert check.title == f"Restatement {LATE_ID}"
    for shown in (
        "unique_transaction_id",  # audits
        "not_null_revenue",
        "+50.0%",  # breaker
        "a closed day whose rows or measure move by more than 25%",
        "sqlmesh restate silver.sales_transactions",  # stock commands
        f'tardy rollback {LATE_ID} --reason "..."',  # how to
        f"the first 200 of {CHANGE_ROWS:,}",  # change trail
        f"… and {CHANGE_ROWS - 200} more",
        "net_amount: 1.00 → 2.00",  # the column that differs
        "gold.monthly_store_revenue",
        "1,330.50 → 1,293.25 (-2.80%)",  # beside its bar: before → after (relative change)
        "31,000.00 → 31,123.45 (+0.40%)",
        "0.00 → 250.00 (before was 0: no relative change)",
    ):
        assert shown in check.text, shown
    failing = [row for row in text.split("<tr") if row.startswith(' class="fail"')]
    assert len(failing) == 1 and "unique_transaction_id" in failing[0]


def test_full_report_opens_the_restatements_chart_on_the_latest_change(
    pages: dict[str, tuple[str, PageCheck]],
):
    """The latest restatement (NOOP_ID) changed nothing: the chart opens on the one before it,
    rolled back, and says so in the menu's header and the note above the bars."""
    _, check = pages["full"]
    assert f"{ROLLED_ID} (rolled back)" in check.text  # the menu's header
    assert "rolled back (hatched)" in check.text  # the note
    assert "changed nothing: no key added, removed or changed" not in check.text  # NOOP's note
    assert "not restated by this restatement" not in check.text


def latest_first(summaries: list[RestatementSummary]) -> list[RestatementSummary]:
    """The report page's order of the restatements chart."""
    return sorted(summaries, key=lambda s: s.logged_at, reverse=True)


def shown_bars(figure: go.Figure, visible: list[bool] | None = None) -> list[str]:
    """The interval labels of the bars shown (as the figure opens, or after a menu's
    ``visible``)."""
    flags = visible if visible is not None else [trace.visible for trace in figure.data]
    return [y for trace, flag in zip(figure.data, flags, strict=True) if flag for y in trace.y]


def labels_of(summary: RestatementSummary) -> list[str]:
    ordered = sorted(summary.intervals, key=lambda c: (c.model, c.start, c.end))
    return [f"{c.model} {c.start}..{c.end}" for c in ordered]


def test_restatements_chart_defaults_to_the_latest_restatement_with_changes():
    summaries = latest_first(full_report().restatements)
    assert [s.restatement_id for s in summaries] == [NOOP_ID, ROLLED_ID, LATE_ID]
    figure = intervals_figure(summaries)
    menu = figure.layout.updatemenus[0]
    assert [b.label for b in menu.buttons] == [
        f"{NOOP_ID} (promoted, changed nothing)",
        f"{ROLLED_ID} (rolled back)",
        f"{LATE_ID} (promoted)",
    ]
    assert menu.active == 1
    assert shown_bars(figure) == labels_of(summaries[1])
    assert figure.layout.yaxis.categoryarray == tuple(labels_of(summaries[1]))
    # Each entry of the menu shows its restatement's bars, and only those.
    for button, summary in zip(menu.buttons, summaries, strict=True):
        assert shown_bars(figure, button.args[0]["visible"]) == labels_of(summary)
        assert button.args[1]["yaxis.categoryarray"] == labels_of(summary)
    # None changed anything: the latest (by time, not by place in the list).
    unchanged = [
        RestatementSummary(f"r{i}", "recheck", "promoted", f"2025-12-0{i}T00:00", "ci", [week])
        for i, week in ((1, unchanged_week()), (3, unchanged_week()), (2, unchanged_week()))
    ]
    assert intervals_figure(unchanged).layout.updatemenus[0].active == 1
    # Only a restatement without a diff logged after it: it does not become the default.
    blank = RestatementSummary("r9", "no diff here", "promoted", "2025-12-31T00:00", "ci", [])
    figure = intervals_figure([blank, *summaries])
    menu = figure.layout.updatemenus[0]
    assert menu.buttons[0].label == "r9 (promoted, no diff)"
    assert menu.active == 2
    assert menu.buttons[0].args[1]["xaxis.visible"] is False  # no axes with nothing on them


def test_one_model_restatement_draws_one_panel_and_no_empty_one():
    """NOOP_ID restated one week of one model: one bar, in the only panel, beside the others'
    models in the menu without an empty panel for each of them."""
    summaries = latest_first(full_report().restatements)
    for figure in (intervals_figure(summaries), intervals_figure(summaries[:1])):
        layout = figure.layout.to_plotly_json()
        assert not [k for k in layout if k.startswith(("xaxis", "yaxis")) and k[5:]]
        assert "not restated" not in figure.to_json()
    figure = intervals_figure(summaries)
    noop = figure.layout.updatemenus[0].buttons[0].args
    assert shown_bars(figure, noop[0]["visible"]) == labels_of(summaries[0])
    assert noop[1]["yaxis.categoryarray"] == labels_of(summaries[0])
    late = figure.layout.updatemenus[0].buttons[2].args
    assert noop[1]["height"] < late[1]["height"]  # the height fits the bars
    alone = intervals_figure(summaries[:1])
    assert alone.layout.updatemenus == ()  # one restatement: no menu
    assert shown_bars(alone) == labels_of(summaries[0])
    assert [a.text for a in alone.layout.annotations if a.yref == "y"] == [
        "5,000.00 → 5,000.00 (0.00%)"
    ]
    assert alone.layout.xaxis.range == (-0.01, 0.01)  # not plotly's ±100% around nothing


def test_restatement_bars_show_the_relative_change_per_model():
    late = full_report().restatements[0]
    figure = intervals_figure([late])
    models = sorted({c.model for c in late.intervals})
    assert [trace.name for trace in figure.data] == [
        "gold.daily_store_revenue (revenue)",
        "gold.monthly_store_revenue (revenue)",
        "gold.weekly_store_revenue (revenue)",
        "silver.sales_transactions (net_amount)",
    ]
    assert len({trace.marker.color for trace in figure.data}) == len(models)
    assert all(trace.orientation == "h" for trace in figure.data)
    bars = {
        y: (x, hover)
        for trace in figure.data
        for y, x, hover in zip(trace.y, trace.x, trace.hovertext, strict=True)
    }
    notes = {a.y: a.text for a in figure.layout.annotations if a.yref == "y"}
    assert set(bars) == set(notes) == set(labels_of(late))
    daily = f"gold.daily_store_revenue {day(330)}..{day(330)}"
    assert bars[daily][0] == pytest.approx((1293.25 - 1330.50) / 1330.50)
    assert notes[daily] == "1,330.50 → 1,293.25 (-2.80%)"
    assert (
        "keys added 2, removed 0, changed 3"
        in bars[f"silver.sales_transactions {day(338)}..{day(338)}"][1]
    )
    assert "rows before: 40, after: 40" in bars[daily][1]
    monthly = f"gold.monthly_store_revenue {day(334)}..{day(364)}"
    assert bars[monthly][0] == pytest.approx(123.45 / 31000)
    assert notes[monthly] == "31,000.00 → 31,123.45 (+0.40%)"
    from_zero = f"gold.weekly_store_revenue {day(357)}..{day(357)}"
    assert bars[from_zero][0] == 0
    assert notes[from_zero] == "0.00 → 250.00 (before was 0: no relative change)"
    # Too small a change for two decimals still shows its sign.
    tiny = IntervalChange("m", day(1), day(1), "revenue", "46964.30", "46964.29", 9, 9, 0, 0, 1)
    assert interval_text(tiny) == "46,964.30 → 46,964.29 (-<0.01%)"


def test_rolled_back_restatement_is_hatched():
    summaries = latest_first(full_report().restatements)
    figure = intervals_figure(summaries)
    owners = [b.args[0]["visible"] for b in figure.layout.updatemenus[0].buttons]
    for i, trace in enumerate(figure.data):
        owner = next(j for j, flags in enumerate(owners) if flags[i])
        hatched = summaries[owner].status == "rolled_back"
        assert trace.marker.pattern.shape == ("/" if hatched else ""), (owner, trace.name)


def test_one_day_source_is_drawn_as_points():
    """A source that delivered once has one point per trace: a dot, where a line alone would
    draw nothing (the daily sources keep their plain lines)."""
    figure = lateness_figure(full_report().lateness, 3)
    weekly = [trace for trace in figure.data if len(trace.x) == 1]
    assert len(weekly) == 4  # p50, p95, p99 and the late ratio
    for trace in weekly:
        assert "markers" in trace.mode
        assert trace.x == (hour(200),)
        assert list(trace.marker.size) == [8]
    daily = [trace for trace in figure.data if len(trace.x) == DAYS]
    assert len(daily) == 4 * len(SOURCES)
    assert all(trace.mode == "lines" for trace in daily)
    assert f"{WEEKLY}: lag in hours (1 arrival hour)" in [a.text for a in figure.layout.annotations]


def test_an_alert_is_a_column_over_its_hours_on_its_source_and_the_late_ratio():
    """The baseline alert is drawn over its three hours (through the end of the last) on its
    source's row and the late-ratio row, and its source's limit as a line on its row."""
    figure = lateness_figure(full_report().lateness, 3, [LAG_ALERT], {SOURCES[1]: 88.0})
    columns = [s for s in figure.layout.shapes if s.type == "rect" and s.xref != "paper"]
    columns = [s for s in columns if s.x0 == LAG_ALERT.hours[0]]
    rows = sorted([*SOURCES, WEEKLY])  # one row per source, then the late ratio's
    row = rows.index(SOURCES[1]) + 1
    assert sorted(c.xref for c in columns) == [f"x{row}", f"x{len(rows) + 1}"]
    assert {c.x1 for c in columns} == {"2025-01-15T13:00:00"}
    (line,) = [s for s in figure.layout.shapes if s.type == "line"]
    assert (line.y0, line.y1, line.yref) == (88.0, 88.0, f"y{row}")
    assert "alert: lag_p99_vs_baseline" in [a.text for a in figure.layout.annotations]


def test_points_marks_days_without_a_neighbour():
    few = points([1.0, None, 3.0, 4.0])
    assert few == {"mode": "lines+markers", "marker_size": [8, 5, 5, 5]}  # a dot per day
    many = [float(i) for i in range(100)]
    assert points(many) == {"mode": "lines"}
    many[49] = many[51] = None
    gap = points(many)
    assert gap["mode"] == "lines+markers"
    assert [i for i, size in enumerate(gap["marker_size"]) if size] == [50]


def test_checker_sees_a_broken_page(tmp_path: Path):
    """A chart without points, a script error, a console error and two requests (one to a
    file beside the page): the checker reports each of them."""
    figure = pio.to_html(go.Figure(go.Scatter(x=[], y=[])), full_html=False, include_plotlyjs=True)
    page = (
        f'<div class="tardy-chart" data-chart="broken">{figure}</div>'
        '<script>console.error("boom"); undefinedFunction();</script>'
        '<img src="https://example.invalid/pixel.png"><img src="x.png">'
    )
    (tmp_path / "x.png").write_bytes(b"")  # there: only the route can stop it
    # A chart that is never drawn is waited for 3 s; loading the page keeps its 30 s (3 s
    # were too few for 3.5 MB of inlined plotly.js beside the CI's Spark JVMs).
    check = check_page(
        write(tmp_path, "broken", page), tmp_path / "broken.png", draw_timeout_ms=3000
    )
    assert check.charts == ["broken"]
    assert check.points == {"broken": 0}
    assert check.not_drawn == ["broken"]
    assert any("boom" in e for e in check.errors)
    assert any("undefinedFunction" in e for e in check.errors)
    assert "https://example.invalid/pixel.png" in check.requests
    assert (tmp_path / "x.png").as_uri() in check.requests
    assert check.screenshot.exists()


def test_checker_names_the_make_target_without_chromium(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(ChromiumMissing, match="make chromium"):
        check_page(tmp_path / "none.html", tmp_path / "none.png")
