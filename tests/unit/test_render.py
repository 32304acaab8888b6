"""Every table the CLI prints fits 80 columns and shows each model name and id whole.

The inputs are the domain objects the tables are built from (no Spark): the project's
longest model names, full ISO intervals, several spans per model and big numbers. Each
table is rendered as a terminal of 80 columns would show it.
"""

from __future__ import annotations

import dataclasses
import io
from datetime import datetime

import pytest
from rich.console import Console

from tardy.consumers.card import Card
from tardy.consumers.history import KeyHistory
from tardy.consumers.revisions import Revisions
from tardy.consumers.status import RestatedDay, SourceStatus, Status
from tardy.engine.results import Diff, IntervalDiff, Manifest
from tardy.lateness.alerts import Alert, Metric
from tardy.rendering import (
    cells,
    consumers,
    history,
    models,
    quarantine,
    restatement,
    versions,
)
from tardy.rendering import status as status_tables
from tardy.rendering import summary as summary_tables
from tardy.reporting.summary import Summary

WIDTH = 80
MODELS = [
    "silver.sales_transactions",
    "silver.sales_quarantine",
    "gold.daily_store_revenue",
    "gold.weekly_store_revenue",
    "gold.monthly_store_revenue",
    "gold.store_features",
]
RESTATEMENT_ID = "20260115T093012Z-a1b2c3"
SCATTERED = [
    ["2026-01-03", "2026-01-03"],
    ["2026-01-05", "2026-01-07"],
    ["2026-01-10", "2026-01-10"],
    ["2026-01-12", "2026-01-14"],
    ["2026-01-17", "2026-01-17"],
]
IMPACTED = {
    "silver.sales_transactions": SCATTERED,
    "silver.sales_quarantine": [["2026-01-04", "2026-01-04"]],
    "gold.daily_store_revenue": SCATTERED,
    "gold.weekly_store_revenue": [
        ["2025-12-29", "2025-12-29"],
        ["2026-01-05", "2026-01-05"],
        ["2026-01-12", "2026-01-12"],
    ],
    "gold.monthly_store_revenue": [["2026-01-01", "2026-01-01"]],
    "gold.store_features": [["2026-01-03", "2026-02-13"]],
}


def manifest() -> Manifest:
    return Manifest(
        arrival_watermark="2026-02-14T23:59:58.123456+00:00",
        previous_watermark="2026-01-31T23:59:41+00:00",
        bronze_version=1234,
        since_bronze_version=1187,
        late_rows=13_188,
        impacted=IMPACTED,
        absorbed_by_next_run={"silver.sales_transactions": [["2026-02-12", "2026-02-14"]]},
        reasons={model: "..." for model in IMPACTED},
        stock_commands=[
            "sqlmesh plan --restate-model bronze.pos_events --start 2026-01-03 --end 2026-02-13"
        ],
    )


def diff() -> Diff:
    def item(model: str, span: list[str], measure: str, base: int) -> IntervalDiff:
        return IntervalDiff(
            model=model,
            interval=span,
            rows_before=5_360_334 + base,
            rows_after=5_360_412 + base,
            sums_before={measure: "12345678.90", "discount": "1234.50"},
            sums_after={measure: "12346901.15", "discount": "1240.00"},
            keys_added=1_234,
            keys_removed=56,
            keys_changed=7_890,
        )

    measures = {"silver.sales_transactions": "net_amount", "gold.store_features": "revenue_28d"}
    intervals = [
        item(model, span, measures.get(model, "revenue"), i)
        for model, spans in IMPACTED.items()
        if model != "silver.sales_quarantine"
        for i, span in enumerate(spans)
    ]
    intervals.append(
        IntervalDiff("silver.sales_quarantine", ["2026-01-04", "2026-01-04"], 13_185, 13_188,
                     {}, {}, 3, 0, 0)
    )  # fmt: skip
    return Diff(RESTATEMENT_ID, intervals, threshold=0.001, breaker=[])


def log_rows() -> list[dict[str, object]]:
    def row(restatement_id: str, status: str, promoted: bool) -> dict[str, object]:
        created = datetime(2026, 1, 15, 9, 30, 12)
        out: dict[str, object] = {
            "restatement_id": restatement_id,
            "reason": "partner resend of stores 17 and 23 after the POS outage of 2026-01-05 "
            "(ticket OPS-1234)",
            "actor": "alice@build-runner-07",
            "created_at": created,
            "actions": [{"action": "staged", "at": created}],
            "status": status,
            "staged_at": created,
            "intervals": IMPACTED,
        }
        if promoted:
            out["promoted_at"] = datetime(2026, 1, 15, 9, 41, 7)
        return out

    return [
        row(RESTATEMENT_ID, "promoted", True),
        row("20260116T101500Z-0f9e8d", "breaker_tripped", False),
        row("20260117T120000Z-77aa01", "rolled_back", True),
    ]


def source(name: str, scale: int) -> SourceStatus:
    return SourceStatus(
        source_system=name,
        rows=5_360_334 * scale,
        measured_rows=5_358_001 * scale,
        rows_without_event_ts=1_204 * scale,
        rows_event_after_arrival=1_129 * scale,
        late_rows=98_765 * scale,
        late_ratio=0.018433,
        lag_hours_p50=1.5,
        lag_hours_p95=1234.5,
        lag_hours_p99=12345.6,
        max_arrival_ts="2026-02-14T23:59:58.123456+00:00",
    )


def status() -> Status:
    return Status(
        max_arrival_ts="2026-02-14T23:59:58.123456+00:00",
        data_watermark="2026-02-11T23:59:58.123456+00:00",
        grace_days=3,
        last_final_day="2026-02-10",
        first_provisional_day="2026-02-11",
        sources=[source("partner", 1), source("pos", 3)],
        overall=source("*", 4),
        pending_final={**IMPACTED, "gold.store_features": [["2026-01-03", "2026-02-10"]]},
        pending_provisional={"gold.store_features": [["2026-02-11", "2026-02-13"]]},
        absorbed_but_final={"silver.sales_transactions": [["2026-02-09", "2026-02-10"]]},
        restated=[
            RestatedDay(
                "gold.daily_store_revenue",
                "2026-01-10",
                "final",
                "20260115T093012Z-store_2_fix",
                "partner resend of stores 17 and 23 after the POS outage [OPS-1234]",
                "2026-01-15 09:41:00",
            )
        ],
        view="tardy.daily_store_revenue_status",
        revisions=DAILY_MOVED,
        revisions_by_model={
            "gold.daily_store_revenue": DAILY_MOVED,
            "gold.weekly_store_points": Revisions(
                model="gold.weekly_store_points", measure=None, rows=4, days=2, max_revision=1
            ),
        },
    )


DAILY_MOVED = Revisions(
    model="gold.daily_store_revenue",
    measure="revenue",
    rows=1_234,
    days=321,
    max_revision=3,
    first_published="123456789.05",
    now="123457001.10",
    net_change="212.05",
    gross_change="9876.50",
    largest_day="2026-01-10",
    largest_day_change="-1234.50",
)


# The case: with a column per source, five sources broke a name mid-word at 80
# columns (`store_maste` / `r`); a row per source reads ten as well as two.
TEN_SOURCES = [
    "pos",
    "partner",
    "store_master",
    "payment_provider",
    "loyalty_programme",
    "web_orders",
    "marketplace_feed",
    "returns_desk",
    "inventory_counts",
    "gift_cards",
]


def ten_sources() -> Status:
    return dataclasses.replace(
        status(), sources=[source(name, 1 + n) for n, name in enumerate(TEN_SOURCES)]
    )


def card() -> Card:
    return Card(
        table="gold.daily_store_net_revenue",
        description="Net revenue per store and event day: sales revenue minus card refunds "
        "of that day, from silver.sales_transactions and silver.refunds.",
        owner="finance_analytics",
        current_version="gold.daily_store_net_revenue@v12",
        last_published_at="2026-02-15T06:00:00+00:00",
        last_produced_by="run",
        last_restated_at="2026-02-14T09:41:00+00:00",
        last_restatement_id=RESTATEMENT_ID,
        final_through="2026-02-10",
        first_provisional_day="2026-02-11",
        sources=[source(name, 1) for name in TEN_SOURCES[:4]],
        statements=2,
    )


def summary() -> Summary:
    return Summary(
        rows={"bronze.pos_events": 5_360_334, **dict.fromkeys(MODELS, 21_443_210)},
        lateness={
            "records_with_event_ts": 21_432_004,
            "late_share": 0.1834,
            "beyond_grace_share": 0.0184,
            "grace_days": 3,
            "p95_lag_hours": 1234.5,
            "by_source": {
                name: {
                    "records_with_event_ts": 5_360_334 * (1 + n),
                    "late_share": 0.1834,
                    "beyond_grace_share": 0.0184,
                    "p95_lag_hours": 12345.6,
                }
                for n, name in enumerate(TEN_SOURCES)
            },
        },
        quarantined={
            "discount_exceeds_gross": 1_234_567,
            "missing_transaction_id": 12,
            "unknown_store": 3,
        },
        quarantined_by_model={
            "silver.sales_quarantine": {
                "discount_exceeds_gross": 1_234_567,
                "missing_transaction_id": 12,
            },
            "silver.store_quarantine": {"unknown_store": 3},
        },
        weekly=[
            {"week_start": "2025-12-29", "rows": 5_360_334, "revenue": "12345678.90"},
            {"week_start": "2026-01-05", "rows": 5_360_412, "revenue": "123456789.05"},
        ],
        headline_model="gold.daily_store_revenue",
    )


TRANSACTION = "S017-20260105-00042"


def transaction_history() -> KeyHistory:
    sale = {
        "transaction_id": TRANSACTION,
        "store_id": "17",
        "event_date": "2026-01-05",
        "net_amount": "1234567.50",
        "record_type": "sale",
        "version_count": "1",
    }
    record = {
        "bronze_table": "bronze.pos_events",
        "fields": [
            "transaction_id",
            "record_type",
            "store_id",
            "product_id",
            "quantity",
            "unit_price",
            "discount",
            "corrects_transaction_id",
        ],
        "event_time": "2026-01-05T12:00:01",
        "arrival_ts": "2026-01-05T23:59:58",
        "event_ts": "2026-01-05T12:00:01",
        "transaction_id": TRANSACTION,
        "record_type": "sale",
        "store_id": "17",
        "product_id": "4",
        "quantity": "1000",
        "unit_price": "1234.5675",
        "discount": "0.0",
        "corrects_transaction_id": None,
        "source_system": "partner",
        "source_file": "partner/arrival_ts=20260105T235958Z/partner-resend-stores-17-23.jsonl",
        "line_number": 123456,
        "parse_error": None,
    }
    correction = {
        **record,
        "arrival_ts": "2026-01-19T08:00:00",
        "record_type": "correction",
        "event_time": "2026-01-07T12:00:01",
        "event_ts": "2026-01-07T12:00:01",
        "transaction_id": f"{TRANSACTION}-C",
        "corrects_transaction_id": TRANSACTION,
    }
    change = {
        "model": "silver.sales_transactions",
        "row_key": TRANSACTION,
        "event_date": "2026-01-05",
        "change": "changed",
        "action": "promoted",
        "restatement_id": RESTATEMENT_ID,
        "reason": "partner resend of stores 17 and 23 after the POS outage [OPS-1234]",
        "actor": "ci",
        "before": sale,
        "after": {**sale, "net_amount": "1234.50", "version_count": "2"},
        "promoted_at": "2026-01-20T09:00:00",
    }
    return KeyHistory(
        TRANSACTION,
        [record, correction],
        [change, {**change, "action": "rolled_back", "before": change["after"], "after": sale}],
        {"silver.sales_transactions": [sale]},
    )


ALERTS = [
    Alert("partner_feed_of_stores", Metric.LATE_RATIO, 0.9876, 0.05, "daily"),
    Alert("pos", Metric.LAG_HOURS_P99, 12_345.6, 120.0, "daily"),
    Alert("*", Metric.PENDING_AGE_HOURS, 1_000.25, 72.0, "pending"),
]


def rendered(*objects: object, printer: object = None, width: int = WIDTH) -> str:
    """What a terminal ``width`` columns wide shows: the objects printed, or
    ``printer(data, console)``."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    if printer is not None:
        printer(*objects, console)  # type: ignore[operator]
    else:
        console.print(*objects)
    return console.export_text()


def rendered_at(width: int, renderable: object) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


def publications() -> list:
    from tardy.consumers.versions import Publication

    def published(version: int, by: str, days: list[str]) -> Publication:
        return Publication(
            table_name="gold.daily_store_revenue",
            version=version,
            physical_table="sqlmesh__gold.gold__daily_store_revenue__3697885641",
            delta_version=40 + version,
            time_column="event_date",
            produced_by=by,
            changed_days=days,
            revisions={day: version - 1 for day in days},
            rows=560,
            sha256=f"{version}" * 64,
            published_at="2026-01-15T09:30:12+00:00",
        )

    month = [f"2026-01-{d:02d}" for d in range(1, 29)]
    return [
        published(1, "run", month),
        published(2, RESTATEMENT_ID, ["2026-01-10"]),
        published(3, "rollback:20260115T093012Z-store_2_fix", ["2026-01-10", "2026-01-12"]),
    ]


def render_versions_checked(found: list, console: Console) -> None:
    """``tardy versions --check`` with v1 gone."""
    versions.render_versions(found, console, {f"{found[0].table_name}@v1"})


def shown():
    from tardy.consumers.rereads import Shown

    columns = ["event_date", "store_id", "transactions", "items", "revenue", "corrected"]
    rows = [("2026-01-10", str(s), "130", "366", "4651.70", "1") for s in range(1, 6)]
    return Shown(publications()[0], "2026-01-10", columns, rows)


def registered() -> list:
    from tardy.training.registry import Registered
    from tardy.training.snapshot import Input

    def model(version: int, versions: tuple[int, int], after: str) -> Registered:
        return Registered(
            version=version,
            run_id="r" * 32,
            inputs=[
                Input("gold.store_features", versions[0], "p", 40, "2026-01-01", "2026-01-21"),
                Input("gold.daily_store_revenue", versions[1], "p", 41, "2026-01-02", "2026-01-28"),
            ],
            snapshot_sha256="f" * 64,
            params={"alpha": "1.0"},
            metrics={"holdout_mae": 978.2987 + version},
            code_version="8aef8a3f31769c2d3c2d0d4b7a2e6f1a1b2c3d4e-dirty",
            trained_after=after,
            decision="",
            champion=version == 1,
            created_at="2026-01-29T00:00:00+00:00",
            artifacts="file:///home/models/artifacts/m-1",
        )

    return [model(1, (1, 1), ""), model(2, (12, 12), RESTATEMENT_ID)]


def impact():
    from tardy.training.lineage import StaleModel, superseded
    from tardy.training.pipeline import Impact

    found = [p for p in publications()[:2]]
    replaced = superseded(RESTATEMENT_ID, found)
    days = [f"2026-01-{d:02d}" for d in range(1, 22)]
    stale = [
        StaleModel(1, True, "gold.store_features@v1", "gold.store_features@v2", days),
        StaleModel(1, True, "gold.daily_store_revenue@v1", "gold.daily_store_revenue@v2", days),
    ]
    return Impact(RESTATEMENT_ID, replaced, stale, 2)


def retrained():
    from tardy.training.pipeline import Retrained

    snapshot = {"holdout_start": "2026-01-15", "holdout_rows": 35}
    reason = "challenger MAE 997.8055 > champion's 978.2987 x 1.05: the champion stays"
    return Retrained(registered()[1], 1, 1, 997.81, 978.30, False, reason, snapshot, 4, 9.5)


def quarantined() -> list:
    from tardy.quarantine.listing import Quarantined
    from tardy.quarantine.reviews import Decision, Review

    sha = "9f2c4e" + "0" * 58
    decided = Decision(
        "rv-20260130120000-a1b2c3d4",
        f"{sha}:1204",
        "partner_feed_of_stores",
        Review.REJECTED,
        "a test terminal",
        "steward@example.com",
        datetime(2026, 1, 30, 12),
    )
    return [
        Quarantined(
            f"{sha}:{line}",
            source,
            "silver.sales_quarantine",
            reason,
            day,
            "2026-01-03T06:00:00",
            age,
            "{}",
            f"{source}/x.jsonl",
            decided if line == 1204 else None,
        )
        for line, source, reason, day, age in (
            (7, "pos", "discount_exceeds_gross", "2026-01-02", 613.0),
            (1204, "partner_feed_of_stores", "missing_transaction_id", "2026-01-03", 12345.5),
            (88, "store_master", "invalid_effective_ts", None, None),
        )
    ]


def quarantine_counts() -> list:
    from tardy.quarantine.listing import counts

    return counts(quarantined())


TABLES = {
    "quarantine": lambda **kw: rendered(
        quarantined(),
        {r.record_id: f"{r.record_id[:6]}:{r.line}" for r in quarantined()},
        "open and reviewed",
        printer=quarantine.render_listing,
        **kw,
    ),
    "quarantine review": lambda **kw: rendered(quarantine.counts_table(quarantine_counts()), **kw),
    "manifest": lambda **kw: rendered(restatement.manifest_table(manifest()), **kw),
    "detect": lambda **kw: rendered(manifest(), printer=restatement.render_manifest, **kw),
    "diff": lambda **kw: rendered(restatement.diff_table(diff()), **kw),
    "log": lambda **kw: rendered(restatement.log_table(log_rows()), **kw),
    "log one": lambda **kw: rendered(restatement.log_table(log_rows(), RESTATEMENT_ID), **kw),
    "lateness": lambda **kw: rendered(status_tables.lateness_table(status()), **kw),
    "lateness ten sources": lambda **kw: rendered(
        status_tables.lateness_table(ten_sources()), **kw
    ),
    "pending": lambda **kw: rendered(status_tables.pending_table(status()), **kw),
    "status": lambda **kw: rendered(status(), printer=status_tables.render_status, **kw),
    "restated": lambda **kw: rendered(status_tables.restated_table(status().restated), **kw),
    "summary": lambda **kw: rendered(summary(), printer=summary_tables.render_summary, **kw),
    "history": lambda **kw: rendered(transaction_history(), printer=history.render_history, **kw),
    "alerts": lambda **kw: rendered(ALERTS, printer=status_tables.render_alerts, **kw),
    "versions": lambda **kw: rendered(publications(), printer=versions.render_versions, **kw),
    "card": lambda **kw: rendered(card(), printer=consumers.render_card, **kw),
    "versions checked": lambda **kw: rendered(
        publications(), printer=render_versions_checked, **kw
    ),
    "show": lambda **kw: rendered(shown(), printer=versions.render_shown, **kw),
    "models": lambda **kw: rendered(registered(), printer=models.render_models, **kw),
    "trained": lambda **kw: rendered(registered()[1], printer=models.render_model, **kw),
    "impact": lambda **kw: rendered(impact(), printer=models.render_impact, **kw),
    "retrained": lambda **kw: rendered(retrained(), printer=models.render_retrained, **kw),
}
# The names each table must show whole, each time on one line.
NAMES = {
    "quarantine": [
        "partner_feed_of_stores",
        "discount_exceeds_gross",
        "missing_transaction_id",
        "9f2c4e:1204",
        "invalid_effective_ts",
    ],
    "quarantine review": ["partner_feed_of_stores", "discount_exceeds_gross", "store_master"],
    "manifest": MODELS,
    "detect": MODELS,
    "diff": [*MODELS, RESTATEMENT_ID],
    "log": [RESTATEMENT_ID, "20260116T101500Z-0f9e8d", "20260117T120000Z-77aa01", *MODELS],
    "log one": [RESTATEMENT_ID, *MODELS],
    "lateness": ["partner", "pos", "all"],
    "lateness ten sources": [*TEN_SOURCES, "all"],
    "pending": MODELS,
    "status": [*MODELS, "partner", "pos", "20260115T093012Z-store_2_fix"],
    "restated": ["gold.daily_store_revenue", "20260115T093012Z-store_2_fix", "[OPS-1234]"],
    "summary": [
        *MODELS,
        "bronze.pos_events",
        "discount_exceeds_gross",
        "missing_transaction_id",
        "silver.store_quarantine",
        *TEN_SOURCES,
    ],
    "history": [TRANSACTION, RESTATEMENT_ID, "silver.sales_transactions"],
    "alerts": ["partner_feed_of_stores", "pos"],
    "versions": ["gold.daily_store_revenue", RESTATEMENT_ID, "20260115T093012Z-store_2_fix"],
    "card": ["gold.daily_store_net_revenue@v12", RESTATEMENT_ID, *TEN_SOURCES[:4]],
    "versions checked": ["v1 gone", RESTATEMENT_ID, "20260115T093012Z-store_2_fix"],
    "show": ["gold.daily_store_revenue@v1", "4651.70"],
    "models": ["gold.daily_store_revenue@v12", "v1 champion"],
    "trained": ["gold.daily_store_revenue@v12", RESTATEMENT_ID],
    "impact": ["gold.daily_store_revenue@v1", "v1 champion", RESTATEMENT_ID],
    "retrained": ["gold.store_features@v12", RESTATEMENT_ID, "v1 (champion)"],
}


# A table's lines end in its right border: Rich crops a table wider than the console at
# the console's width, so a line of 80 characters can still be a table cut short.
BORDERS = {"┏": "┓", "┃": "┃", "┡": "┩", "│": "│", "├": "┤", "└": "┘"}


@pytest.mark.parametrize("name", TABLES)
def test_fits_80_columns(name: str) -> None:
    text = TABLES[name]()
    lines = text.splitlines()
    assert all(len(line) <= WIDTH for line in lines), "\n" + text
    for line in lines:
        if line[:1] in BORDERS:
            assert line.rstrip().endswith(BORDERS[line[0]]), f"cropped: {line}\n{text}"


@pytest.mark.parametrize("name", TABLES)
def test_names_whole_on_one_line(name: str) -> None:
    text = TABLES[name]()
    assert "…" not in text, "\n" + text
    # As often on the lines at 80 columns as where nothing needs to wrap.
    unwrapped = TABLES[name](width=500)
    for model in NAMES[name]:
        shown = sum(line.count(model) for line in text.splitlines())
        assert shown and shown == unwrapped.count(model), f"{model} cut or wrapped:\n{text}"


def test_intervals_wrap_between_ranges() -> None:
    # 30 columns: a plain wrap at spaces would split "2026-01-05 .. 2026-01-07" after "..".
    text = rendered_at(30, cells.Intervals(SCATTERED))
    assert text.splitlines() == [
        "2026-01-03,",
        "2026-01-05 .. 2026-01-07,",
        "2026-01-10,",
        "2026-01-12 .. 2026-01-14,",
        "2026-01-17",
    ]
    # A range alone wider than the column: at its spaces, nothing lost.
    assert rendered_at(16, cells.Intervals([SCATTERED[1]])).split() == [
        "2026-01-05",
        "..",
        "2026-01-07",
    ]
    assert rendered_at(30, cells.Intervals([])).strip() == "-"


def test_numbers_whole() -> None:
    text = TABLES["diff"]()
    lines = text.splitlines()
    for number in ("5,360,334", "→ 5,360,412", "12,345,678.90", "→ 12,346,901.15", "+1,234 −56"):
        assert any(number in line for line in lines), f"{number}:\n{text}"
    assert "net_amount" in text and "revenue_28d" in text  # each model's measure, named
    text = TABLES["lateness"]()
    assert "21,441,336" in text and "12345.6" in text and "2026-02-14" in text


def test_stock_command_pastes_as_one() -> None:
    text = TABLES["detect"]()
    lines = text.splitlines()
    start = lines.index("Stock equivalent (recomputes whole hulls):") + 1
    command = " ".join(line.strip().removesuffix("\\").strip() for line in lines[start:] if line)
    assert command == manifest().stock_commands[0]
    assert lines[start].endswith(" \\")  # a shell continuation, not a wrapped line
    short = "sqlmesh plan --restate-model m --start 2026-01-01 --end 2026-01-02"
    assert cells.shell_lines(short, WIDTH) == f"  {short}"


def test_log_filters_one_restatement() -> None:
    text = TABLES["log one"]()
    assert RESTATEMENT_ID in text and "20260116T101500Z-0f9e8d" not in text


def test_status_keeps_its_messages() -> None:
    text = TABLES["status"]()
    assert "2026-02-11T23:59:58.123456+00:00" in text and "2026-02-10" in text
    assert "Lateness by source" in text and "tardy detect" in text
    # The headline's status view, its query alone on its line (to copy).
    assert "SELECT * FROM tardy.daily_store_revenue_status" in text.splitlines()


def test_status_without_pending_late_data_says_so_in_one_line() -> None:
    import dataclasses

    quiet = dataclasses.replace(
        status(),
        pending_final={m: [] for m in MODELS},
        pending_provisional={},
        absorbed_but_final={},
    )
    text = rendered(quiet, printer=status_tables.render_status)
    assert "No late data waits for a restatement" in text
    assert "Late data prod does not reflect yet" not in text
    assert "Late data prod does not reflect yet" in TABLES["status"]()


def test_status_says_how_much_restated_days_moved() -> None:
    """A line per model restatements moved: its headline measure's totals, or its rows."""
    text = " ".join(TABLES["status"]().split())
    assert "moved 1,234 rows of gold.daily_store_revenue on 321 periods (up to revision r3)" in text
    assert "revenue 123,456,789.05 → 123,457,001.10, net +212.05, gross 9,876.50" in text
    assert "most on 2026-01-10 (-1,234.50)" in text
    assert "moved 4 rows of gold.weekly_store_points on 2 periods (up to revision r1)." in text


def test_history_tells_the_transactions_story() -> None:
    text = TABLES["history"]()
    flat = " ".join(text.split())
    # Each record: arrival, event time and its fields, its table, file and line.
    assert "2026-01-19 08:00" in text and "correction" in text and "2026-01-07 12:00" in text
    assert "123456" in flat
    wide = TABLES["history"](width=500)
    assert "quantity 1000, unit_price 1234.5675, discount 0.0" in wide
    assert f"corrects_transaction_id {TRANSACTION}" in wide
    assert "corrects_transaction_id None" not in wide  # a field without value is left out
    # The change shows only the columns that moved, before → after.
    flat = TABLES["history"](width=500)
    assert "net_amount: 1234567.50 → 1234.50; version_count: 1 → 2" in flat
    assert "rolled_back" in text and "[OPS-1234]" in flat
    assert (
        f"Now in silver.sales_transactions: transaction_id {TRANSACTION}, store_id 17, "
        "event_date 2026-01-05, net_amount 1234567.50, record_type sale, version_count 1."
    ) in flat
    empty = rendered(KeyHistory("T-404", [], []), printer=history.render_history)
    assert "No bronze record and no restatement names key T-404" in empty


def test_alerts_name_source_metric_and_tier() -> None:
    text = " ".join(TABLES["alerts"]().split())
    assert "source partner_feed_of_stores: late_ratio 98.76% > 5.00% (tier daily)" in text
    assert "source pos: lag_hours_p99 12,345.6 h > 120.0 h (tier daily)" in text
    assert "waited 1,000.2 h for a restatement (limit 72.0 h)" in text
    assert "Check passed" in rendered([], printer=status_tables.render_alerts)
