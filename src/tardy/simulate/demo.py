"""The main job on the embedded default: a month of SQL Sushi Co. with its late data.

Timeline (simulated clock, never the wall clock): the first ``first_days`` days land and are
built into prod by a ``plan``; then the rest lands (late rows, corrections, voids, resends,
out-of-order batches) and a ``run`` at the end of the simulated month absorbs what falls
inside the grace window. Late data for days already outside it stays out of prod until it is
restated: ``detect`` finds it, ``restate --no-promote`` stages, audits and diffs it, the
promotion applies it, and ``status`` shows the restated days with their reason. Before the
restatement, the run's versions are published and a store revenue model is trained on them
(MLflow, under the data home); after it, ``impact`` names that model stale and ``retrain``
trains a challenger on the corrected versions and moves the ``champion`` alias by its rule.
A named restatement of one week (a partner asks for a recheck) recomputes it and promotes
nothing, because nothing in it is wrong; the report (``tardy report``) draws it all. Every
step is idempotent, so the demo can run again on the same data home (then nothing is left to
restate, and the model is kept).
"""

from __future__ import annotations

import json
import typing as t
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from rich.console import Console

from tardy.consumers.status import status
from tardy.engine.detect import detect
from tardy.engine.named import Selection
from tardy.engine.outcome import Outcome, Status
from tardy.ingest import ingest
from tardy.ingest.result import IngestResult
from tardy.lateness.baseline import CLOCK_FILE, FEED
from tardy.project.context import spark_of
from tardy.project.home import DataHome
from tardy.rendering.html import write_report
from tardy.rendering.restatement import diff_table, render_manifest
from tardy.rendering.status import render_status
from tardy.reporting.gather import gather
from tardy.reporting.summary import Summary, summarize
from tardy.requests.restatements import promote_staged, restate
from tardy.simulate import SimulationConfig, SimulationResult, simulate

if t.TYPE_CHECKING:
    from sqlmesh import Context


@dataclass
class DemoResult:
    first_landing: SimulationResult
    first_ingest: IngestResult
    late_landing: SimulationResult
    late_ingest: IngestResult
    summary: Summary
    restatement: Outcome  # of the late data beyond the grace window
    named: Outcome  # the named restatement of one week
    report: str  # the HTML report's path
    # The late store changes step 6 found: per dimension, the validity windows they alter.
    altered: dict[str, list[dict[str, str | None]]]
    models: dict[str, object]  # the model trained on step 5's versions, impact, retrain

    def story(self) -> dict[str, object]:
        """What the restatement steps did (``tardy demo --json``'s ``story``)."""
        return {
            step: {
                "restatement_id": outcome.restatement_id,
                "status": str(outcome.status),
                "evaluated": outcome.evaluated,
                "promoted": outcome.promoted,
            }
            for step, outcome in (("restatement", self.restatement), ("named", self.named))
        } | {
            "report": self.report,
            # The late store changes the restatement applied (its dimensions' altered windows).
            "store_changes": self.altered,
            "models": self.models,
            # The late card refunds the restatement applied: the refund days it promoted.
            "refunds": self.restatement.promoted.get(REFUNDS_MODEL, []),
        }


REFUNDS_MODEL = "silver.refunds"  # the payments source's silver model (models/silver)


def midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def run_demo(
    context: Context,
    home: DataHome,
    console: Console,
    config: SimulationConfig | None = None,
    first_days: int = 14,
) -> DemoResult:
    # The demo's month has every source, card refunds included.
    config = config or SimulationConfig(refunds=True)
    spark = spark_of(context)
    first_clock = midnight(config.start + timedelta(days=first_days))
    final_clock = midnight(config.last_day + timedelta(days=1))
    grace_days = int(context.config.variables["grace_days"])
    # The demo replays a month of 2026: its alerts' now is its feed's clock, not today's
    # (``tardy.lateness.baseline.clock``), so `tardy status --check` finds no source silent.
    (home.root / CLOCK_FILE).write_text(f"{FEED}\n", encoding="utf-8")

    console.rule(f"1. Land and ingest the batches delivered by {first_clock:%Y-%m-%d %H:%M}Z")
    # (sales from the pos and partner systems, store changes from the store master, card
    # refunds from the payment provider)
    first_landing = simulate(config, home.landing, through=first_clock)
    with console.status("Ingesting into bronze"):
        first_ingest = ingest(spark, home.landing)
    console.print(_landed(first_landing, first_ingest))

    console.rule("2. sqlmesh plan prod")
    context.plan("prod", execution_time=first_clock, auto_apply=True, no_prompts=True)
    console.print(
        f"Prod holds {config.start}..{first_clock.date() - timedelta(days=1)}: every model "
        "backfilled and every audit passed."
    )

    console.rule(f"3. Land the late and corrected batches delivered by {final_clock:%Y-%m-%d}")
    late_landing = simulate(config, home.landing, through=final_clock)
    with console.status("Ingesting into bronze"):
        late_ingest = ingest(spark, home.landing)
    console.print(_landed(late_landing, late_ingest))

    console.rule("4. sqlmesh run (absorbs late data inside the grace window)")
    last_day = (final_clock - timedelta(days=1)).date().isoformat()  # inclusive, whole day
    context.run("prod", end=last_day, execution_time=final_clock)
    console.print(
        f"The run recomputed the days inside the {grace_days}-day grace window (and the weeks, "
        "month and features they reach); late rows for older, closed days wait for step 6."
    )

    console.rule("5. tardy publish, tardy train (a model on the published versions)")
    models: dict[str, object] = {"trained": _publish_and_train(context, spark, home, console)}

    console.rule("6. tardy detect (late data for days outside the grace window)")
    with console.status("Comparing new bronze rows with prod"):
        manifest = detect(context, spark)
    if manifest.is_empty:
        console.print("Nothing to restate: prod already reflects every bronze row (a re-run).")
    else:
        render_manifest(manifest, console)
        console.print(
            f"{manifest.late_rows:,} bronze changes belong to closed days: prod leaves them out "
            "until a reviewed restatement applies them."
        )
        if manifest.altered:
            console.print(
                "Store changes arrived late too: gold.daily_region_revenue joins every sale to "
                "its store's region valid at the sale, so the days in those windows are "
                "restated with the sales."
            )

    console.rule("7. tardy restate --no-promote (stage, audit, diff; prod untouched)")
    reason = "demo: late and corrected sales for closed days"
    with console.status("Staging, auditing and diffing the impacted intervals"):
        restatement = restate(context, spark, reason, promote=False, accept_large_change=True)
    if restatement.status == Status.STAGED and restatement.restatement_id is not None:
        if restatement.diff is not None:
            console.print(diff_table(restatement.diff))
        console.print(
            f"Staged {restatement.restatement_id}: its audits passed, and every model is "
            f"readable as environment {restatement.environment} for review."
        )
        console.rule("8. tardy promote (one Delta commit per table with changed days)")
        with console.status("Promoting"):
            restatement = promote_staged(context, spark, restatement.restatement_id)
        promoted = ", ".join(restatement.promoted) or "nothing"
        console.print(f"Promoted {restatement.restatement_id}: {promoted}.")
        from tardy.project.headline import headline

        lead = headline(context)
        shown = lead.model if lead else ""
        _tell_consumers(home, restatement, shown, console)
    else:
        console.print("Nothing to restate.")

    console.rule("9. tardy status (what is final, what was restated and why)")
    with console.status("Measuring lateness"):
        current = status(context, spark)
    render_status(current, console)

    week = config.start + timedelta(days=7 - config.start.weekday())  # the first Monday
    console.rule("10. A named restatement: a partner asks to recheck week 2")
    console.print(
        f"tardy restate --model gold.weekly_store_revenue \\\n    --start {week} --end {week}",
        markup=False,
    )
    selection = Selection(("gold.weekly_store_revenue",), week, week)
    with console.status("Restating the named week"):
        named = restate(
            context, spark, "demo: a partner asks to recheck week 2", selection=selection
        )
    console.print(
        f"Named restatement {named.restatement_id}: the week was recomputed "
        f"({', '.join(named.evaluated) or 'nothing'}) and "
        + (
            f"promoted for {', '.join(named.promoted)}."
            if named.promoted
            else "equals prod, so nothing was promoted."
        )
    )

    console.rule("11. tardy impact, tardy retrain (the model the correction made stale)")
    if restatement.status == Status.PROMOTED and restatement.restatement_id is not None:
        models |= _impact_and_retrain(spark, home, restatement.restatement_id, console)
    else:
        console.print("No restatement promoted: no model to retrain.")

    console.rule("12. tardy report (what late data did to the numbers)")
    with console.status("Drawing the report"):
        report = write_report(gather(context, spark))
    console.print(
        "First published against final revenue per day, the restated periods and why, "
        "lateness per source, the quarantine, each restatement's before/after and the "
        "models with their lineage:"
    )
    console.print(str(report), markup=False, highlight=False, soft_wrap=True)

    with console.status("Summarising"):
        summary = summarize(context, spark, grace_days)
    return DemoResult(
        first_landing,
        first_ingest,
        late_landing,
        late_ingest,
        summary,
        restatement,
        named,
        str(report),
        manifest.altered,
        models,
    )


def _tell_consumers(home: DataHome, promoted: Outcome, shown: str, console: Console) -> None:
    """What the people who read the numbers get: each new version's release note (``shown``'s
    whole), and the event the file sink received (``tardy.consumers``)."""
    from rich.markdown import Markdown

    from tardy.consumers import notes
    from tardy.outbox import notifications
    from tardy.project.context import notification_targets

    notifications.deliver_pending(home.root, targets=notification_targets)
    for published in promoted.published:
        table, version = str(published["table_name"]), int(str(published["version"]))
        note = notes.read(home.root, table, version)
        if note is None:
            continue
        path = Path(note["files"]["md"])
        if table == shown:
            console.print(Markdown(path.read_text(encoding="utf-8")))
        verdict = "material" if note["material"] else "not material"
        console.print(f"Release note ({verdict}):", highlight=False)
        console.print(str(path.relative_to(home.root)), markup=False, highlight=False)
    sink = home.root / notifications.FILE_SINK
    if sink.exists():
        last = json.loads(sink.read_text(encoding="utf-8").splitlines()[-1])
        console.print(f"The newest event in $TARDY_HOME/{sink.name}:", highlight=False)
        console.print(last["text"], markup=False, highlight=False)


def _publish_and_train(
    context: Context, spark: t.Any, home: DataHome, console: Console
) -> int | None:
    """Publish the run's versions; train the first model on them (kept on a re-run)."""
    from tardy.consumers.publish import publish
    from tardy.rendering.models import render_model
    from tardy.training.pipeline import registered, train
    from tardy.training.snapshot import Window

    with console.status("Publishing the gold models' versions"):
        published = publish(context, spark)
    names = ", ".join(p.name for p in published.publications) or "nothing new"
    console.print(f"Published: {names}.")
    if registered(home.root):
        console.print("A model is registered already (a re-run): kept.")
        return None
    with console.status("Training store_revenue on the published versions (MLflow)"):
        trained = train(spark, home.root, Window())
    render_model(trained.registered, console)
    return trained.registered.version


def _impact_and_retrain(
    spark: t.Any, home: DataHome, restatement_id: str, console: Console
) -> dict[str, object]:
    from tardy.rendering.models import render_impact, render_retrained
    from tardy.training.pipeline import impact, retrain

    found = impact(spark, home.root, restatement_id)
    render_impact(found, console)
    if not found.stale:
        return {"stale": []}
    with console.status("Retraining on the corrected versions, backtesting both"):
        result = retrain(spark, home.root, restatement_id)
    render_retrained(result, console)
    return {
        "stale": sorted({s.version for s in found.stale}),
        "retrained": result.challenger.version,
        "champion": result.champion,
        "promoted": result.promoted,
    }


def _landed(landing: SimulationResult, ingested: IngestResult) -> str:
    return (
        f"landing: {landing.files_written} new files ({landing.files_existing} already there); "
        f"bronze: {ingested.files_ingested} files / {ingested.rows:,} rows ingested, "
        f"{ingested.files_skipped} files skipped (already ingested)"
    )
