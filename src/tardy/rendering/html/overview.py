"""The ``tardy report`` page: five charts over the whole lakehouse."""

from __future__ import annotations

from collections.abc import Sequence

from tardy.rendering.html.daily import daily_figure
from tardy.rendering.html.intervals import intervals_figure
from tardy.rendering.html.lateness import lateness_figure
from tardy.rendering.html.models import models_section
from tardy.rendering.html.page import Chart, cards, chart_section, page, status_badge, table
from tardy.rendering.html.periods import periods_figure
from tardy.rendering.html.products import products_section
from tardy.rendering.html.quarantine import quarantine_figure, review_table
from tardy.reporting.records import Report, RestatedPeriod, RestatementSummary

MAX_RESTATEMENTS = 10  # restatements in the report page's before/after chart (the latest)


def periods_table(periods: Sequence[RestatedPeriod]) -> str:
    latest = sorted(periods, key=lambda p: (p.promoted_at, p.model, p.period), reverse=True)
    return "<h3>Restated periods, latest first</h3>" + table(
        ["model", "period", "restatement", "reason", "promoted at"],
        ([p.model, p.period, p.restatement_id, p.reason, p.promoted_at] for p in latest),
        wrap=[3],
    )


def restatements_table(summaries: Sequence[RestatementSummary]) -> str:
    return "<h3>The restatements shown</h3>" + table(
        ["restatement", "status", "logged at", "actor", "intervals", "reason"],
        (
            [s.restatement_id, status_badge(s.status), s.logged_at, s.actor, len(s.intervals)]
            + [s.reason]
            for s in summaries
        ),
        numeric=[4],
        wrap=[5],
        scroll=False,
    )


def report_page(report: Report) -> str:
    """The ``tardy report`` page: five charts over the whole lakehouse."""
    latest = sorted(report.restatements, key=lambda s: s.logged_at, reverse=True)
    latest = latest[:MAX_RESTATEMENTS]
    restated_days = sum(1 for d in report.daily if d.revision)
    charts = [
        Chart(
            "daily",
            f"{report.headline_model}: first published vs today",
            f"{report.headline_measure or 'Rows'} per period, summed over the model's rows "
            "(the project's headline model). The dotted grey line is the value first "
            "published, the blue line today's value; they part only where a restatement "
            "changed the day (orange diamonds, r1, r2… = how many times). The bars below show "
            "final minus first published. Yellow bands: provisional days, still inside the "
            "grace window. Hover a day for the restatements and their reasons.",
            daily_figure(report.daily, report.headline_model, report.headline_measure),
            empty=not report.daily,
        ),
        Chart(
            "periods",
            "Periods restated, by model",
            "How many periods (days, week or month starts) of each model a promoted "
            "restatement changed: all time (grey) and in the last 7 days (orange). Hover a bar "
            "for the restatements and reasons; the table lists every period.",
            periods_figure(report.periods),
            empty=not report.periods,
            below=periods_table(report.periods) if report.periods else "",
        ),
        Chart(
            "lateness",
            f"Lateness per source (grace window: {report.grace_days} days)",
            "For each source system, how long its rows took to arrive (hours from event to "
            "arrival; p50 = typical row, p95/p99 = the slowest 5% / 1%), per arrival hour. The "
            f"red band marks the end of the {report.grace_days}-day grace window: rows that "
            "lag beyond it arrive after their day became final and force a restatement. The "
            "dash-dotted line is the p99 lag above which the source alerts (a multiple of its "
            "own recent p99); a red column is an alert now, over the hours it covers. The "
            "last panel shows the late share per source.",
            lateness_figure(
                report.lateness, report.grace_days, report.lateness_alerts, report.lag_limits
            ),
            empty=not report.lateness,
        ),
        Chart(
            "quarantine",
            "Quarantined rows by reason",
            "Rows the pipeline set aside instead of counting, per day of the row, stacked by "
            "reason (the legend gives each reason's total). A tall bar is a day whose "
            "numbers miss rows until the source sends them again, corrected.",
            quarantine_figure(report.quarantine),
            empty=not report.quarantine,
            below=review_table(report.quarantine_review) if report.quarantine_review else "",
        ),
        Chart(
            "restatements",
            f"Before and after, per restatement (latest {MAX_RESTATEMENTS})",
            "One restatement at a time (pick it in the menu; it opens on the latest one that "
            "changed anything): one bar per restated interval of every model, the relative "
            "change of its measure, (after − before) / before, coloured by model; beside it "
            "the measure before → after in its own units. A bar at 0 changed nothing, or "
            "started from 0 (its numbers say so). Hatched bars: the restatement was rolled "
            "back. Hover a bar for rows and keys added, removed and changed.",
            intervals_figure(latest),
            empty=not any(s.intervals for s in latest),
            below=restatements_table(latest) if latest else "",
        ),
    ]
    quarantined = sum(q.rows for q in report.quarantine)
    facts = [
        ("days restated", f"{restated_days:,} of {len(report.daily):,}"),
        ("periods restated in the last 7 days", f"{sum(p.recent for p in report.periods):,}"),
        ("restatements logged", f"{len(report.restatements):,}"),
        ("rows quarantined", f"{quarantined:,}"),
        ("grace window", f"{report.grace_days} days"),
    ]
    return page(
        "tardy report: what late data did to the numbers",
        f"Generated {report.generated_at} · data home {report.home}",
        [cards(facts)]
        + [chart_section(c) for c in charts]
        + ([products_section(report.cards)] if report.cards else [])
        + ([models_section(report.models)] if report.models else []),
    )


# -- the restatement page ------------------------------------------------------------------------
