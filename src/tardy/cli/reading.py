"""The commands that read: ``status``, ``detect``, ``history``, ``report``, ``summary``,
``fingerprint``, and the published versions' ``publish``, ``versions``, ``export``."""

from __future__ import annotations

import argparse
import typing as t
from pathlib import Path

from tardy.cli.output import console, err, print_json, spark_without_project
from tardy.errors import AlertsRaised, InputError
from tardy.project.home import activate


def cmd_summary(args: argparse.Namespace) -> int:
    from tardy.project.context import open_context, spark_of
    from tardy.rendering.summary import render_summary
    from tardy.reporting.summary import summarize

    context = open_context(args.gateway, progress_to_stderr=args.json)
    summary = summarize(context, spark_of(context), int(context.config.variables["grace_days"]))
    if args.json:
        print_json(summary.as_dict())
    else:
        render_summary(summary, console)
    return 0


def cmd_fingerprint(args: argparse.Namespace) -> int:
    from tardy.consumers.fingerprint import fingerprints
    from tardy.project.context import open_context, spark_of

    context = open_context(args.gateway, progress_to_stderr=args.json)
    prints = fingerprints(context, spark_of(context))
    if args.json:
        print_json({table: fp.as_dict() for table, fp in prints.items()})
    else:
        for table, fp in prints.items():
            console.print(f"{table:32} {fp.rows:>10,} rows  {fp.hash}")
    return 0


def render_manifest(manifest: t.Any) -> None:
    from tardy.rendering.restatement import render_manifest

    render_manifest(manifest, console)


def _recorded(args: argparse.Namespace, answer: t.Any) -> t.Any:
    """The answer recorded under the data home's current state (``tardy.cli.recorded``), unless
    ``--fresh``; None when it must be computed."""
    from tardy.cli.recorded import lookup
    from tardy.project.gateway import selected

    return None if args.fresh else lookup(activate().root, selected(), answer)


def _answered(recorded: t.Any, source: t.Any) -> dict[str, str]:
    """Where an answer came from, for ``--json`` and the terminal."""
    from tardy.cli.recorded import Source

    if source is Source.RECORDED:
        err.print(
            f"[dim]Answered from the record of {recorded.recorded_at}: nothing it reads has "
            "changed since (--fresh recomputes).[/]"
        )
    return recorded.provenance(source) if recorded is not None else {"source": str(source)}


def _opened_for_recording(args: argparse.Namespace) -> tuple[t.Any, t.Any, t.Any]:
    """The project's context and session, and a recording of the answers computed with them
    (``tardy.cli.recorded``: the state key is read now, before anything else)."""
    from tardy.cli.recorded import Recording, inputs_of
    from tardy.project.context import open_context, spark_of

    context = open_context(args.gateway, progress_to_stderr=args.json)
    spark = spark_of(context)
    return context, spark, Recording(inputs_of(context, spark, activate().root))


def cmd_detect(args: argparse.Namespace) -> int:
    from tardy.cli.recorded import Answer, Source
    from tardy.engine.detect import detect
    from tardy.engine.results import Manifest

    recorded, source = _recorded(args, Answer.DETECT), Source.RECORDED
    if recorded is not None:
        manifest = Manifest.from_dict(recorded.answers[Answer.DETECT])
    else:
        context, spark, recording = _opened_for_recording(args)
        with err.status("Comparing new bronze rows with prod"):
            manifest = detect(context, spark)
        recorded = recording.commit({Answer.DETECT: manifest.as_dict()})
        source = Source.COMPUTED
    answer = _answered(recorded, source)
    if args.json:
        print_json({**manifest.as_dict(), "answer": answer})
    else:
        render_manifest(manifest)
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from tardy.consumers.publish import publish
    from tardy.engine.restate import hold
    from tardy.project.context import open_context, spark_of

    # Under the restatement lock, like a promotion's own publication: version numbers are
    # counted per model, so two publishers at once would number one version twice.
    with hold("publish", args.gateway):
        context = open_context(args.gateway, progress_to_stderr=args.json)
        with err.status("Publishing the new versions of the published models"):
            result = publish(context, spark_of(context), all_views=True)
    if args.json:
        print_json(result.as_dict())
    elif result.publications:
        names = ", ".join(p.name for p in result.publications)
        console.print(f"Published {len(result.publications)} versions: {names}.")
    else:
        console.print("Nothing new to publish: every published model's version is published.")
    return 0


def cmd_versions(args: argparse.Namespace) -> int:
    from tardy.consumers.versions import publications, readable
    from tardy.rendering.versions import render_versions

    spark = spark_without_project(args)
    found = publications(spark, args.table)
    if args.notes:
        return _print_note(args, spark, found)
    gone = None
    if args.check:
        with err.status("Checking that time travel still reads each version"):
            gone = {p.name for p in found if not readable(spark, p)}
    if args.json:
        print_json(
            [
                {**p.as_dict(), "readable": None if gone is None else p.name not in gone}
                for p in found
            ]
        )
    else:
        render_versions(found, console, gone)
    return 0


def _print_note(args: argparse.Namespace, spark: t.Any, found: list[t.Any]) -> int:
    """``tardy versions TABLE --notes vN``: the version's release note (composed again when a
    killed process never wrote it)."""
    from tardy.consumers import notes
    from tardy.consumers.versions import resolve

    if not args.table:
        raise InputError("--notes needs a table: tardy versions TABLE --notes vN")
    home = activate().root
    note = notes.read(home, args.table, resolve(found, args.table, args.notes).version)
    if note is None:
        from tardy.project.context import open_context, spark_of

        context = open_context(args.gateway, progress_to_stderr=args.json)
        note = notes.note_of(context, spark_of(context), home, args.table, args.notes)
    if args.json:
        print_json(note)
    else:
        from rich.markdown import Markdown

        console.print(Markdown(Path(note["files"]["md"]).read_text(encoding="utf-8")))
        console.print(note["files"]["md"], markup=False, highlight=False, soft_wrap=True)
    return 0


def cmd_card(args: argparse.Namespace) -> int:
    from tardy.consumers.card import card
    from tardy.project.context import open_context, spark_of
    from tardy.rendering.consumers import render_card

    context = open_context(args.gateway, progress_to_stderr=args.json)
    with err.status(f"Reading {args.table}'s publications and sources"):
        found = card(context, spark_of(context), args.table)
    if args.json:
        print_json(found.as_dict())
    else:
        render_card(found, console)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from tardy.consumers.rereads import export

    spark = spark_without_project(args)
    with err.status(f"Exporting {args.table}"):
        exported = export(spark, args.table, args.as_of, Path(args.to))
    if args.json:
        print_json(exported.as_dict())
    else:
        console.print(
            f"Wrote {exported.publication.name} ({exported.rows:,} rows), file SHA-256 "
            f"{exported.sha256}; it reads as published:"
        )
        console.print(exported.path, soft_wrap=True)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from tardy.consumers.rereads import show
    from tardy.rendering.versions import render_shown

    shown = show(spark_without_project(args), args.table, args.as_of, args.day)
    if args.json:
        print_json(shown.as_dict())
    else:
        render_shown(shown, console)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from tardy.cli.recorded import Answer, Source
    from tardy.consumers.status import Status
    from tardy.lateness.alerts import check, check_baseline, thresholds
    from tardy.lateness.baseline import Baseline, clock, day_models
    from tardy.lateness.baseline import measure as measure_baseline
    from tardy.outbox import notifications
    from tardy.project.context import notification_targets
    from tardy.project.sources import declared
    from tardy.rendering.status import render_alerts, render_notifications, render_status

    now = clock(args.as_of, activate().root)
    recorded, source = _recorded(args, Answer.STATUS), Source.RECORDED
    if recorded is not None and args.check and not _same_clock(recorded, now):
        recorded = None  # no baseline recorded, or at another hour: silence moves with time
    baseline = None
    if recorded is not None:
        result = Status.from_dict(recorded.answers[Answer.STATUS])
        variables = recorded.answers[Answer.VARIABLES]
        if args.check:
            baseline = Baseline.from_dict(recorded.answers[Answer.BASELINE])
    else:
        from tardy.consumers import status as measure

        context, spark, recording = _opened_for_recording(args)
        with err.status("Measuring lateness and comparing new bronze rows with prod"):
            result = measure.status(context, spark)
            variables = context.config.variables
            if args.check:
                found = declared()
                baseline = measure_baseline(
                    spark, variables, found.owners(), day_models(context), now, found.cadences()
                )
        answers = {Answer.STATUS: result.as_dict(), Answer.VARIABLES: variables}
        if baseline is not None:
            answers[Answer.BASELINE] = baseline.as_dict()
        if result.manifest is not None:  # detect's answer too: `tardy detect` follows
            answers[Answer.DETECT] = result.manifest.as_dict()
        recorded, source = recording.commit(answers), Source.COMPUTED
    limits = thresholds(variables, declared().tiers()) if args.check else None
    answer = _answered(recorded, source)
    owners = {name: s.owner for name, s in declared().sources.items()}
    alerts = check(result, limits, owners) if limits is not None else []
    if limits is not None and baseline is not None:
        alerts += check_baseline(baseline, limits)
    backlog = notifications.backlog(activate().root)  # live, never recorded: files only
    if args.json:
        payload = {**result.as_dict(), "answer": answer, "notifications": backlog.as_dict()}
        if limits is not None:
            payload["alerts"] = [alert.as_dict() for alert in alerts]
            payload["baseline"] = baseline.as_dict() if baseline is not None else None
        print_json(payload)
    else:
        render_status(result, console)
        render_notifications(backlog, console)
        if limits is not None:
            render_alerts(alerts, console)
    if alerts:
        events = [
            notifications.alerted(alert.message, alert.as_dict(), result.max_arrival_ts)
            for alert in alerts
        ]
        notifications.notify(
            activate().root,
            variables.get("notifications"),
            *events,
            targets=notification_targets,
        )
        raise AlertsRaised(
            f"{len(alerts)} alert(s): " + "; ".join(alert.message for alert in alerts)
        )
    return 0


def _same_clock(recorded: t.Any, now: t.Any) -> bool:
    """Whether a recorded answer's baseline was measured at ``now``'s hour (the feed's own
    clock: whenever it was, as nothing committed since)."""
    from tardy.cli.recorded import Answer
    from tardy.lateness.baseline import Baseline

    raw = recorded.answers.get(Answer.BASELINE)
    if raw is None:
        return False
    if now is None:
        return Baseline.from_dict(raw).clock == Baseline.from_dict(raw).now
    return (
        Baseline.from_dict(raw).clock == now.replace(minute=0, second=0, microsecond=0).isoformat()
    )


def cmd_history(args: argparse.Namespace) -> int:
    from tardy.consumers.history import history
    from tardy.engine.meter import Meter
    from tardy.project.context import open_context, spark_of
    from tardy.rendering.history import render_history

    context = open_context(args.gateway, progress_to_stderr=args.json)
    meter = Meter(spark_of(context))
    with meter.step("history"):
        story = history(context, spark_of(context), args.key)
    if args.json:
        print_json({**story.as_dict(), **meter.as_dict()})
    else:
        render_history(story, console)
    return 0 if story.found else 1


def cmd_report(args: argparse.Namespace) -> int:
    from tardy.engine.meter import Meter
    from tardy.project.context import open_context, spark_of
    from tardy.rendering.html import write_report, write_restatement_report
    from tardy.reporting.gather import gather, gather_restatement

    context = open_context(args.gateway, progress_to_stderr=args.json)
    spark = spark_of(context)
    meter = Meter(spark)
    with err.status("Reading the lakehouse and drawing the report"), meter.step("report"):
        if args.restatement_id:
            path = write_restatement_report(gather_restatement(spark, args.restatement_id))
        else:
            path = write_report(gather(context, spark))
    if args.json:
        print_json({"path": str(path), **meter.as_dict()})
    else:
        console.print(str(path), markup=False, highlight=False, soft_wrap=True)
    return 0


def cmd_grace(args: argparse.Namespace) -> int:
    from tardy.lateness.alerts import thresholds
    from tardy.lateness.grace import fit, write_grace_days
    from tardy.project.context import open_context, spark_of
    from tardy.project.home import project_root
    from tardy.project.sources import declared
    from tardy.rendering.grace import render_fit

    context = open_context(args.gateway, progress_to_stderr=args.json)
    variables = context.config.variables
    limits = thresholds(variables, declared().tiers())
    with err.status("Reading the lateness series"):
        result = fit(spark_of(context), project_root(), variables, limits, args.source)
    if args.apply and result.suggested != result.current:
        write_grace_days(project_root(), result.suggested)
        result.applied = True
    if args.json:
        print_json(result.as_dict())
    else:
        render_fit(result, console)
    return 0
