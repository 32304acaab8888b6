"""The shell of a report page: the document (CSS, plotly.js once, inline), a chart's section,
cards, tables and code blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from tardy.rendering.html.text import esc

MAX_TABLE_ROWS = 200  # rows of a page table; the rest is counted in an "and N more" line

PLOT_CONFIG = {"displaylogo": False, "responsive": True}

CSS = """
*{box-sizing:border-box}
body{margin:0;font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1f2933;
 background:#f3f4f6;font-size:14px;line-height:1.45}
header{background:#0f172a;color:#f8fafc;padding:18px 32px}
header h1{margin:0 0 4px;font-size:22px}
header .meta{margin:0;color:#cbd5e1;font-size:13px}
main{max-width:1280px;margin:0 auto;padding:8px 24px 32px}
section{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:14px 18px;margin:14px 0}
h2{font-size:17px;margin:0 0 4px}
h3{font-size:14px;margin:14px 0 6px}
p.how{color:#4b5563;margin:0 0 8px;max-width:980px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:14px 0}
.card{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:10px 16px;min-width:170px}
.card b{display:block;font-size:22px}
.card span{color:#4b5563;font-size:12px}
.tardy-chart{width:100%}
.tardy-chart>div{height:auto!important}
.scroll{max-height:420px;overflow:auto;border:1px solid #e5e7eb;border-radius:6px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:4px 8px;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:top;
 white-space:nowrap}
td.wrap{white-space:normal;min-width:240px}
th.num{text-align:right}
th{background:#f9fafb;position:sticky;top:0;white-space:normal}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.fail td{background:#fee2e2;color:#7f1d1d;font-weight:600}
.more,.none{color:#6b7280;font-style:italic;margin:6px 0}
.status{display:inline-block;padding:1px 8px;border-radius:10px;background:#e5e7eb;font-size:12px}
.status.promoted{background:#dcfce7;color:#14532d}
.status.rolled_back{background:#fee2e2;color:#7f1d1d}
.status.staged{background:#dbeafe;color:#1e3a8a}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#0f172a;color:#e2e8f0;padding:10px 12px;border-radius:6px;overflow:auto}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}
dl.facts dt{color:#4b5563}
dl.facts dd{margin:0}
""".strip()


class Markup(str):
    """Text that is already HTML (built here from escaped parts): table cells keep it as is."""


@dataclass(frozen=True)
class Chart:
    """One chart of a page: its name (``data-chart``), heading, how-to-read sentence, figure."""

    name: str
    title: str
    how: str
    figure: go.Figure
    empty: bool = False
    below: str = ""  # HTML under the chart (a table)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    numeric: Sequence[int] = (),
    wrap: Sequence[int] = (),
    classes: Sequence[str] | None = None,
    total: int | None = None,
    scroll: bool = True,
) -> str:
    """An HTML table of at most ``MAX_TABLE_ROWS`` rows, then "… and N more" when cut.
    Cells are escaped unless they are ``Markup``; ``numeric`` columns align right, ``wrap``
    columns (long text) may wrap; ``classes`` gives each row's class."""
    rows = list(rows)
    count = len(rows) if total is None else total
    if not rows:
        return '<p class="none">None.</p>'
    kinds = {j: " class=num" for j in numeric} | {j: " class=wrap" for j in wrap}
    head = "".join(f"<th{kinds.get(j, '')}>{esc(h)}</th>" for j, h in enumerate(headers))
    body = []
    for i, row in enumerate(rows[:MAX_TABLE_ROWS]):
        cells = "".join(
            f"<td{kinds.get(j, '')}>"
            f"{cell if isinstance(cell, Markup) else esc('' if cell is None else cell)}</td>"
            for j, cell in enumerate(row)
        )
        css = classes[i] if classes and classes[i] else ""
        body.append(f'<tr class="{esc(css)}">{cells}</tr>' if css else f"<tr>{cells}</tr>")
    out = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    if scroll and len(rows) > 15:
        out = f'<div class="scroll">{out}</div>'
    shown = min(len(rows), MAX_TABLE_ROWS)
    if count > shown:
        out += f'<p class="more">… and {count - shown:,} more</p>'
    return out


def status_badge(status: str) -> Markup:
    return Markup(f'<span class="status {esc(status)}">{esc(status)}</span>')


def code_block(lines: Sequence[str]) -> str:
    if not lines:
        return '<p class="none">None.</p>'
    return f"<pre><code>{esc(chr(10).join(lines))}</code></pre>"


def chart_section(chart: Chart) -> str:
    div = pio.to_html(
        chart.figure,
        config=PLOT_CONFIG,
        include_plotlyjs=False,
        full_html=False,
        div_id=f"chart-{chart.name}",
    )
    return (
        f'<section id="{esc(chart.name)}"><h2>{esc(chart.title)}</h2>'
        f'<p class="how">{esc(chart.how)}</p>'
        f'<div class="tardy-chart" data-chart="{esc(chart.name)}"'
        f' data-empty="{"true" if chart.empty else "false"}">{div}</div>{chart.below}</section>'
    )


def cards(facts: Sequence[tuple[str, str]]) -> str:
    items = "".join(
        f'<div class="card"><b>{esc(v)}</b><span>{esc(k)}</span></div>' for k, v in facts
    )
    return f'<div class="cards">{items}</div>'


def page(title: str, meta: str, body: Sequence[str]) -> str:
    """The whole document: CSS, plotly.js (once, inline), the header and the sections."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>'
        f'<body><header><h1>{esc(title)}</h1><p class="meta">{esc(meta)}</p></header>'
        f"<main>{''.join(body)}</main></body></html>\n"
    )
