"""The HTML pages of ``tardy report``: one self-contained file each, charts a reader reads at a
glance.

``report_page`` (``tardy.rendering.html.overview``) draws a ``tardy.report_records.Report``
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

from tardy.rendering.html.overview import report_page
from tardy.rendering.html.restatement import restatement_page

__all__ = ["report_page", "restatement_page"]
