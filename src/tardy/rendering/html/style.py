"""The look every chart of the report pages shares: colours, a small plotly template, and the
"nothing yet" chart drawn when there is no data.
"""

from __future__ import annotations

import plotly.graph_objects as go

from tardy.rendering.html.text import plain

MAX_HOVER_LINES = 8  # restatements listed in one hover text

GREY = "#9ca3af"
BLUE = "#2563eb"
ORANGE = "#ea580c"
GREEN = "#16a34a"
RED = "#dc2626"
SOURCE_COLOURS = ("#0f766e", "#7c3aed", "#db2777", "#65a30d", "#0369a1", "#b45309", "#475569")

_AXIS = {"gridcolor": "#e5e7eb", "linecolor": "#9ca3af", "zerolinecolor": "#d1d5db"}
# A small template of our own: plotly's default one would add ~5 kB of JSON to every chart.
TEMPLATE = go.layout.Template(
    layout={
        "font": {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "colorway": list(SOURCE_COLOURS),
        "xaxis": {**_AXIS, "automargin": True},
        "yaxis": {**_AXIS, "automargin": True},
        "hoverlabel": {"align": "left", "font": {"size": 12}},
        "hovermode": "closest",
        "margin": {"l": 60, "r": 24, "t": 40, "b": 40},
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
    }
)


def nothing_yet(message: str, height: int = 240) -> go.Figure:
    """An empty chart that says why it is empty."""
    figure = go.Figure(
        layout={
            "template": TEMPLATE,
            "height": height,
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "margin": {"l": 20, "r": 20, "t": 20, "b": 20},
        }
    )
    figure.add_annotation(
        text=plain(message),
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font={"size": 16, "color": "#6b7280"},
    )
    return figure
