"""The HTML pages of ``tardy report``: one self-contained file each, charts a reader reads at a
glance.

``report_page`` (``tardy.rendering.html.overview``) draws a ``tardy.reporting.records.Report``
(what late data did to the numbers); ``restatement_page`` (``tardy.rendering.html.restatement``)
draws one ``RestatementReport`` for its reviewers. Each page carries plotly.js once, inline, and
every chart's data in its own script: it opens without a network. Every chart sits in a
``<div class="tardy-chart" data-chart="NAME">`` (``data-empty="true"`` when there is nothing to
draw yet: the chart then shows a "nothing yet" note instead of traces), under a sentence saying
what it shows and how to read it.

All text from the data is escaped: ``html.escape`` in the page, and in the charts too (plotly
reads a subset of HTML in its labels and hover texts, and turns the escaped entities back
into the plain characters).

The modules: ``page`` (the shell: document, sections, tables), ``text`` (escaping and
numbers), ``style`` (the charts' common look), one module per chart (``daily``, ``periods``,
``lateness``, ``quarantine``, ``intervals``) and one per page (``overview``, ``restatement``).
"""

from __future__ import annotations

import typing as t
from datetime import UTC, datetime
from pathlib import Path

from tardy.project.home import activate
from tardy.rendering.html.overview import report_page
from tardy.rendering.html.restatement import restatement_page

__all__ = ["report_page", "restatement_page"]

if t.TYPE_CHECKING:
    from tardy.reporting.records import Report, RestatementReport


def reports_dir() -> Path:
    """``$TARDY_HOME/reports``, where the pages are written."""
    folder = activate().root / "reports"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_report(report: Report) -> Path:
    """Write ``$TARDY_HOME/reports/report-<UTC time>.html`` (and ``latest.html``) of a
    gathered report (``tardy.reporting.gather.gather``)."""
    page = report_page(report)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = reports_dir() / f"report-{stamp}.html"
    path.write_text(page, encoding="utf-8")
    (reports_dir() / "latest.html").write_text(page, encoding="utf-8")
    return path


def write_restatement_report(report: RestatementReport) -> Path:
    """Write ``$TARDY_HOME/reports/restatement-<id>.html`` of a gathered restatement report
    (``tardy.reporting.gather.gather_restatement``)."""
    page = restatement_page(report)
    path = reports_dir() / f"restatement-{report.summary.restatement_id}.html"
    path.write_text(page, encoding="utf-8")
    return path
