"""The report's models section: each registered model version, what it read, whether a
later publication changed days it read, and a link to its files (``tardy.training``)."""

from __future__ import annotations

from collections.abc import Sequence

from tardy.rendering.html.page import Markup, table
from tardy.rendering.html.text import esc
from tardy.reporting.records import ModelRow

HOW = (
    "Each version of the project's model registered in the data home's MLflow store, "
    "newest first: the published versions and days it was trained on, its mean absolute "
    "error on the held-out days, and the publications since that changed days it read "
    "(stale: `tardy retrain --after` the restatement). Readers load the champion "
    "(models:/store_revenue@champion)."
)


def models_section(models: Sequence[ModelRow]) -> str:
    rows = [
        (
            Markup(
                f'<a href="{esc(m.artifacts)}">v{m.version}</a>'
                + (" <b>champion</b>" if m.champion else "")
            ),
            Markup("<br>".join(esc(i) for i in m.trained_on)),
            "-" if m.holdout_mae is None else f"{m.holdout_mae:,.2f}",
            m.trained_after or "-",
            Markup("<br>".join(esc(s) for s in m.stale_by) or "no"),
        )
        for m in sorted(models, key=lambda m: m.version, reverse=True)
    ]
    return (
        '<section id="models"><h2>Models trained on published versions</h2>'
        f'<p class="how">{esc(HOW)}</p>'
        + table(
            ("version", "trained on", "holdout MAE", "retrained after", "stale by"),
            rows,
            numeric=(2,),
            wrap=(1, 4),
        )
        + "</section>"
    )
