"""``tardy``: the command line. Each command opens the project once, in one Spark session."""

from __future__ import annotations

import argparse
import json
import os
import sys
import typing as t
from contextlib import nullcontext
from datetime import UTC, date, datetime
from pathlib import Path

from rich.console import Console

from tardy.busy import home_busy
from tardy.errors import AlertsRaised, InputError, Refused, TardyError
from tardy.gateway import GATEWAYS, select_gateway
from tardy.home import activate
from tardy.simulate import SimulationConfig
from tardy.warm import ENGINE_VARIABLE

console = Console(stderr=False)
err = Console(stderr=True)


def _print_json(payload: object) -> None:
    print(json.dumps(payload, indent=2, sort_keys=True, default=str))


def _utc(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def cmd_simulate(args: argparse.Namespace) -> int:
    from tardy.simulate import simulate

    overrides = {
        name: getattr(args, name)
        for name in SimulationConfig.__dataclass_fields__
        if getattr(args, name, None) is not None
    }
    config = SimulationConfig(**overrides)
    landing = args.landing or activate().landing
    result = simulate(config, landing, through=args.through)
    if args.json:
        _print_json(result.as_dict())
    else:
        console.print(
            f"Wrote {result.files_written} files ({result.files_existing} already present), "
            f"{result.records:,} records for {result.first_day}..{result.last_day} "
            f"into {landing}"
        )
    return 0


def _spark_without_project(args: argparse.Namespace) -> t.Any:
    """The warm engine's session when it runs (no SQLMesh loaded), else the project's."""
    from tardy.session import engine_session

    spark = engine_session()
    if spark is None:
        from tardy.project import open_context, spark_of

        spark = spark_of(open_context(args.gateway, load=False, progress_to_stderr=args.json))
    return spark


def cmd_ingest(args: argparse.Namespace) -> int:
    from tardy.ingest import FilesRefused, ingest

    spark = _spark_without_project(args)
    home = activate()
    with err.status("Ingesting into bronze.pos_events and bronze.store_changes"):
        result = ingest(spark, home.landing, [Path(p) for p in args.paths], strict=False)
    if args.json:
        _print_json(result.as_dict())
    if result.refused:  # every other file was ingested (and printed): name the refused ones
        from rich.markup import escape

        error = FilesRefused(result)
        err.print(f"[red]error:[/] {escape(str(error))}", highlight=False)
        return error.exit_code
    if not args.json:
        console.print(
            f"Ingested {result.files_ingested} files, {result.rows:,} rows "
            f"({', '.join(f'{t}: {n:,}' for t, n in result.rows_by_table.items())}; "
            f"{result.rows_with_parse_error} unparseable lines kept for quarantine); "
            f"skipped {result.files_skipped} files already ingested."
        )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from tardy.demo import run_demo
    from tardy.project import open_context
    from tardy.render import render_summary

    with err.status("Starting Spark and loading the SQLMesh project"):
        context = open_context(args.gateway, progress_to_stderr=args.json)
    result = run_demo(context, activate(), err if args.json else console)
    if args.json:
        _print_json({**result.summary.as_dict(), "story": result.story()})
    else:
        console.rule("Summary")
        render_summary(result.summary, console)
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    from tardy.project import open_context, spark_of
    from tardy.render import render_summary
    from tardy.report import summarize

    context = open_context(args.gateway, progress_to_stderr=args.json)
    summary = summarize(spark_of(context), int(context.config.variables["grace_days"]))
    if args.json:
        _print_json(summary.as_dict())
    else:
        render_summary(summary, console)
    return 0


def cmd_fingerprint(args: argparse.Namespace) -> int:
    from tardy.fingerprint import fingerprints
    from tardy.project import open_context, spark_of

    context = open_context(args.gateway, progress_to_stderr=args.json)
    prints = fingerprints(context, spark_of(context))
    if args.json:
        _print_json({table: fp.as_dict() for table, fp in prints.items()})
    else:
        for table, fp in prints.items():
            console.print(f"{table:32} {fp.rows:>10,} rows  {fp.hash}")
    return 0


def _render_manifest(manifest: t.Any) -> None:
    from tardy.render import render_manifest

    render_manifest(manifest, console)


def _recorded(args: argparse.Namespace, answer: t.Any) -> t.Any:
    """The answer recorded under the data home's current state (``tardy.recorded``), unless
    ``--fresh``; None when it must be computed."""
    from tardy.gateway import selected
    from tardy.recorded import lookup

    return None if args.fresh else lookup(activate().root, selected(), answer)


def _answered(recorded: t.Any, source: t.Any) -> dict[str, str]:
    """Where an answer came from, for ``--json`` and the terminal."""
    from tardy.recorded import Source

    if source is Source.RECORDED:
        err.print(
            f"[dim]Answered from the record of {recorded.recorded_at}: nothing it reads has "
            "changed since (--fresh recomputes).[/]"
        )
    return recorded.provenance(source) if recorded is not None else {"source": str(source)}


def _opened_for_recording(args: argparse.Namespace) -> tuple[t.Any, t.Any, t.Any]:
    """The project's context and session, and a recording of the answers computed with them
    (``tardy.recorded``: the state key is read now, before anything else)."""
    from tardy.project import open_context, spark_of
    from tardy.recorded import Recording, inputs_of

    context = open_context(args.gateway, progress_to_stderr=args.json)
    spark = spark_of(context)
    return context, spark, Recording(inputs_of(context, spark, activate().root))


def cmd_detect(args: argparse.Namespace) -> int:
    from tardy.engine.detect import Manifest, detect
    from tardy.recorded import Answer, Source

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
        _print_json({**manifest.as_dict(), "answer": answer})
    else:
        _render_manifest(manifest)
    return 0


def _render_outcome(outcome: t.Any) -> None:
    if outcome.recovered:
        console.print(f"Recovered: {outcome.recovered}")
    if outcome.manifest is not None:
        _render_manifest(outcome.manifest)
    if outcome.diff is not None:
        from tardy.render import diff_table

        console.print(diff_table(outcome.diff))
        for trip in outcome.diff.breaker:
            console.print(f"  breaker: {trip.day} {trip.measure} {trip.before} -> {trip.after}")
    for model in outcome.evaluated:
        # With nothing promoted at all, the closing message says so once for every model.
        if model in outcome.promoted or outcome.status != "promoted" or not outcome.promoted:
            continue
        console.print(f"{model}: recomputed unchanged, nothing promoted", markup=False)
    if outcome.seconds:
        steps = ", ".join(
            f"{step} {seconds:.1f} s ({outcome.statements.get(step, 0)} statements)"
            for step, seconds in outcome.seconds.items()
        )
        console.print(f"Steps: {steps}", markup=False)
    messages = {
        "dry_run": "Dry run: nothing was changed.",
        "nothing_to_do": "Nothing to restate: prod already reflects every bronze row.",
        "staged": f"Staged restatement {outcome.restatement_id}; prod is unchanged. Review "
        f"{outcome.report_dir}/diff.md, then `tardy promote {outcome.restatement_id}` "
        f"(or `tardy discard {outcome.restatement_id}`).",
        "promoted": f"Promoted restatement {outcome.restatement_id} "
        f"(report in {outcome.report_dir}).",
        "already_promoted": f"Restatement {outcome.restatement_id} was already promoted.",
    }
    message = messages[outcome.status]
    if outcome.environment:
        example = next(iter(outcome.views.values()), "")
        console.print(
            f"Query it as environment {outcome.environment}: every model under "
            f"<schema>__{outcome.environment}.<table>, e.g. SELECT * FROM {example}",
            markup=False,
        )
    named = outcome.manifest is not None and outcome.manifest.named is not None
    if outcome.status == "nothing_to_do" and named:
        message = "Nothing to restate: the named models have no computed interval in that range."
    elif outcome.status == "promoted" and not outcome.promoted:
        message = (
            f"Restatement {outcome.restatement_id}: every restated interval was recomputed "
            f"equal to prod, so nothing was promoted (report in {outcome.report_dir})."
        )
    console.print(message, markup=False)


def _report(args: argparse.Namespace, error: TardyError) -> int:
    """Print a refusal or a failed gate (and its JSON with ``--json``); its exit code."""
    from rich.markup import escape

    label = "refused" if isinstance(error, Refused) else "failed"
    err.print(f"[bold red]{label}:[/] {escape(str(error))}", highlight=False)
    if getattr(args, "json", False):
        _print_json({"status": label, "error": str(error), "exit_code": error.exit_code})
    return error.exit_code


def _restatement_command(
    args: argparse.Namespace, action: t.Callable[..., t.Any], lock_as: str | None = None
) -> int:
    """Runs a restatement action; a refusal or a failed gate exits non-zero with its reason.

    With ``lock_as`` (a restatement id) the restatement lock is taken before the project and
    Spark open (``tardy.engine.restate.hold``): of two restatements started together, the
    loser is refused (exit 3) before it touches the data home's state or metastore.
    """
    from tardy.engine.restate import hold
    from tardy.project import open_context, spark_of

    try:
        with hold(lock_as, args.gateway) if lock_as else nullcontext():
            context = open_context(args.gateway, progress_to_stderr=getattr(args, "json", False))
            result = action(context, spark_of(context))
    except TardyError as error:
        return _report(args, error)
    if getattr(args, "json", False):
        _print_json(result.as_dict() if hasattr(result, "as_dict") else result)
    elif hasattr(result, "status"):
        _render_outcome(result)
    else:
        console.print(result, markup=False)
    return 0


def _selection(args: argparse.Namespace) -> t.Any:
    """The named restatement ``--model/--start/--end`` ask for, or None (detected)."""
    from tardy.engine.named import Selection

    given = [args.model, args.start, args.end]
    if not any(given):
        return None
    if not all(given):
        raise InputError("a named restatement needs --model, --start and --end together")
    return Selection(tuple(args.model), args.start, args.end)


def _request(args: argparse.Namespace) -> t.Any:
    """The request file ``--request`` names (``tardy.request``), or None."""
    from tardy.request import load

    return load(Path(args.request)) if getattr(args, "request", None) else None


def cmd_restate(args: argparse.Namespace) -> int:
    from tardy.engine.restate import new_id, restate
    from tardy.review import markdown

    try:
        request = _request(args)
        if request is not None and (args.model or args.start or args.end or args.reason):
            raise InputError("--request gives the reason and models: not with --reason/--model")
        if request is None and not args.reason:
            raise InputError("a restatement needs --reason (or --request FILE)")
        selection = request.selection if request else _selection(args)
    except TardyError as error:
        return _report(args, error)
    reason = request.reason if request else args.reason
    restatement_id = None
    if not args.dry_run:  # a dry run takes no lock
        restatement_id = request.restatement_id(new_id()) if request else new_id()

    def action(context: t.Any, spark: t.Any) -> t.Any:
        outcome = restate(
            context,
            spark,
            reason,
            dry_run=args.dry_run,
            promote=not args.no_promote,
            accept_large_change=args.accept_large_change,
            threshold=args.max_change,
            restatement_id=restatement_id,
            selection=selection,
            environment_name=args.env,
        )
        text = None
        if outcome.report_dir:
            text = markdown(outcome, args.request)
            (Path(outcome.report_dir) / "review.md").write_text(text)
        if args.review:
            text = text or f"## tardy restatement: {outcome.status}\n\nNothing to restate.\n"
            Path(args.review).write_text(text)
        return outcome

    return _restatement_command(args, action, lock_as=restatement_id)


def _restatement_of(spark: t.Any, args: argparse.Namespace, request: t.Any) -> str:
    """The restatement a command acts on: the id given, or the latest of ``--request``."""
    from tardy.engine.restate import latest_with_suffix
    from tardy.request import RequestError

    if request is None:
        return str(args.restatement_id)
    found = latest_with_suffix(spark, request.id_suffix())
    if found is None:
        raise RequestError(
            f"no restatement of request {request.name} yet: "
            f"`tardy restate --request {args.request} --no-promote` stages one"
        )
    return found


def _by_id_or_request(args: argparse.Namespace, act: t.Callable[[t.Any, t.Any, str], t.Any]) -> int:
    """Run ``act(context, spark, restatement_id)`` on the id given or the request's latest."""
    try:
        request = _request(args)
        if (request is None) == (args.restatement_id is None):
            raise InputError("give a restatement id or --request FILE (one of them)")
    except TardyError as error:
        return _report(args, error)
    return _restatement_command(
        args,
        lambda context, spark: act(context, spark, _restatement_of(spark, args, request)),
        lock_as=args.restatement_id or f"request-{request.name}",
    )


def cmd_promote(args: argparse.Namespace) -> int:
    from tardy.engine.restate import promote_staged

    return _by_id_or_request(args, promote_staged)


def cmd_discard(args: argparse.Namespace) -> int:
    from tardy.engine.restate import discard

    return _by_id_or_request(args, discard)


def cmd_rollback(args: argparse.Namespace) -> int:
    from tardy.engine.restate import rollback

    def action(context: t.Any, spark: t.Any) -> dict[str, object]:
        versions = rollback(context, spark, args.restatement_id, args.reason)
        return {
            "restatement_id": args.restatement_id,
            "status": "rolled_back",
            "table_versions": versions,
        }

    return _restatement_command(args, action, lock_as=args.restatement_id)


def cmd_log(args: argparse.Namespace) -> int:
    from tardy.engine import log as restatement_log
    from tardy.render import log_table

    spark = _spark_without_project(args)
    if args.json:
        _print_json(
            restatement_log.entries(spark, args.restatement_id)
            if args.restatement_id
            else restatement_log.summary(spark)
        )
        return 0
    console.print(log_table(restatement_log.summary(spark), args.restatement_id))
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from tardy.project import open_context, spark_of
    from tardy.versions import publish

    context = open_context(args.gateway, progress_to_stderr=args.json)
    with err.status("Publishing the new versions of the published models"):
        result = publish(context, spark_of(context))
    if args.json:
        _print_json(result.as_dict())
    elif result.publications:
        names = ", ".join(p.name for p in result.publications)
        console.print(f"Published {len(result.publications)} versions: {names}.")
    else:
        console.print("Nothing new to publish: every published model's version is published.")
    return 0


def cmd_versions(args: argparse.Namespace) -> int:
    from tardy.render import render_versions
    from tardy.versions import publications

    found = publications(_spark_without_project(args), args.table)
    if args.json:
        _print_json([p.as_dict() for p in found])
    else:
        render_versions(found, console)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from tardy.versions import export

    spark = _spark_without_project(args)
    with err.status(f"Exporting {args.table}"):
        exported = export(spark, args.table, args.as_of, Path(args.to))
    if args.json:
        _print_json(exported.as_dict())
    else:
        console.print(
            f"Wrote {exported.publication.name} ({exported.rows:,} rows), SHA-256 "
            f"{exported.sha256}, as published:"
        )
        console.print(exported.path, soft_wrap=True)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from tardy.alerts import check, thresholds
    from tardy.recorded import Answer, Source
    from tardy.render import render_alerts, render_status
    from tardy.status import Status

    recorded, source = _recorded(args, Answer.STATUS), Source.RECORDED
    if recorded is not None:
        result = Status.from_dict(recorded.answers[Answer.STATUS])
        variables = recorded.answers[Answer.VARIABLES]
    else:
        from tardy import status as measure

        context, spark, recording = _opened_for_recording(args)
        with err.status("Measuring lateness and comparing new bronze rows with prod"):
            result = measure.status(context, spark)
        variables = context.config.variables
        answers = {Answer.STATUS: result.as_dict(), Answer.VARIABLES: variables}
        if result.manifest is not None:  # detect's answer too: `tardy detect` follows
            answers[Answer.DETECT] = result.manifest.as_dict()
        recorded, source = recording.commit(answers), Source.COMPUTED
    limits = thresholds(variables) if args.check else None
    answer = _answered(recorded, source)
    alerts = check(result, limits) if limits is not None else []
    if args.json:
        payload = {**result.as_dict(), "answer": answer}
        if limits is not None:
            payload["alerts"] = [alert.as_dict() for alert in alerts]
        _print_json(payload)
    else:
        render_status(result, console)
        if limits is not None:
            render_alerts(alerts, console)
    if alerts:
        raise AlertsRaised(
            f"{len(alerts)} alert(s): " + "; ".join(alert.message for alert in alerts)
        )
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from tardy.engine.delta import Meter
    from tardy.history import history
    from tardy.project import open_context, spark_of
    from tardy.render import render_history

    context = open_context(args.gateway, progress_to_stderr=args.json)
    meter = Meter(spark_of(context))
    with meter.step("history"):
        story = history(context, spark_of(context), args.transaction_id)
    if args.json:
        _print_json({**story.as_dict(), **meter.as_dict()})
    else:
        render_history(story, console)
    return 0 if story.found else 1


def cmd_report(args: argparse.Namespace) -> int:
    from tardy.engine.delta import Meter
    from tardy.project import open_context, spark_of
    from tardy.reporting import write_report, write_restatement_report

    context = open_context(args.gateway, progress_to_stderr=args.json)
    spark = spark_of(context)
    meter = Meter(spark)
    with err.status("Reading the lakehouse and drawing the report"), meter.step("report"):
        if args.restatement_id:
            path = write_restatement_report(context, spark, args.restatement_id)
        else:
            path = write_report(context, spark)
    if args.json:
        _print_json({"path": str(path), **meter.as_dict()})
    else:
        console.print(str(path), markup=False, highlight=False, soft_wrap=True)
    return 0


def cmd_engine(args: argparse.Namespace) -> int:
    from tardy import warm
    from tardy.project import engine_settings
    from tardy.render import render_engine

    paths = warm.Paths(activate().root)
    if args.action == "start":
        if not warm.enabled():
            raise InputError(f"{warm.ENGINE_VARIABLE}=off: this shell runs Spark in-process")
        with err.status("Starting the data home's engine"):
            warm.start(paths, engine_settings())
    elif args.action == "stop":
        warm.stop(paths, force=args.force)
    status = warm.status(paths)
    if args.json:
        _print_json(status.as_dict())
    else:
        render_engine(status, console)
    return 0


FRESH_HELP = "compute again even when nothing it reads changed since it was recorded"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tardy",
        description="Late-arriving, duplicated and corrected POS data on Spark + Delta.",
    )
    parser.add_argument(
        "--gateway",
        choices=GATEWAYS,
        help="project.yaml's gateway (default: $TARDY_GATEWAY, else 'connect' when "
        "$TARDY_SPARK_REMOTE is set, else 'local')",
    )
    parser.add_argument(
        "--no-engine",
        action="store_true",
        help="run Spark in this process, not on the data home's warm engine (TARDY_ENGINE=off)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("simulate", help="write deterministic landing batch files")
    defaults = SimulationConfig()
    sim.add_argument("--seed", type=int)
    sim.add_argument("--stores", type=int)
    sim.add_argument("--days", type=int)
    sim.add_argument("--start", type=date.fromisoformat, help=f"first day ({defaults.start})")
    sim.add_argument("--transactions-per-store-day", type=int)
    for name, value in vars(defaults).items():
        if name.endswith("_rate"):
            sim.add_argument(f"--{name.replace('_', '-')}", type=float, help=f"default {value}")
    sim.add_argument(
        "--no-partner-resend", dest="partner_resend", action="store_const", const=False
    )
    sim.add_argument("--no-store-changes", dest="store_changes", action="store_const", const=False)
    sim.add_argument(
        "--through", type=_utc, help="delivery cutoff (ISO time, UTC): later batches wait"
    )
    sim.add_argument("--landing", type=Path, help="landing folder (default $TARDY_HOME/landing)")
    sim.add_argument("--json", action="store_true")
    sim.set_defaults(func=cmd_simulate)

    ing = sub.add_parser(
        "ingest", help="append new landing files to bronze.pos_events / bronze.store_changes"
    )
    ing.add_argument("paths", nargs="*", help="files or folders (default: the whole landing)")
    ing.add_argument("--json", action="store_true")
    ing.set_defaults(func=cmd_ingest)

    demo = sub.add_parser("demo", help="the end-to-end job on the embedded default")
    demo.add_argument("--json", action="store_true")
    demo.set_defaults(func=cmd_demo)

    summary = sub.add_parser("summary", help="rows per layer, lateness, quarantine, weeks")
    summary.add_argument("--json", action="store_true")
    summary.set_defaults(func=cmd_summary)

    det = sub.add_parser("detect", help="closed intervals late bronze rows change (a manifest)")
    det.add_argument("--json", action="store_true")
    det.add_argument("--fresh", action="store_true", help=FRESH_HELP)
    det.set_defaults(func=cmd_detect)

    res = sub.add_parser(
        "restate",
        help="stage, audit, diff and promote exactly the detected intervals (or the named "
        "models over a range)",
    )
    res.add_argument("--reason", help="why (kept in the restatement log)")
    res.add_argument(
        "--request",
        help="a request file (restatements/<name>.yaml: reason, optional models/start/end) "
        "instead of --reason/--model",
    )
    res.add_argument(
        "--review", help="also write the review (a pull-request comment body) to this file"
    )
    res.add_argument(
        "--model",
        action="append",
        help="restate this model (and what reads it) instead of what detect finds; "
        "repeatable; names, wildcards and tag:... as `sqlmesh plan --restate-model`",
    )
    res.add_argument("--start", type=date.fromisoformat, help="first day (with --model)")
    res.add_argument("--end", type=date.fromisoformat, help="last day (with --model)")
    res.add_argument(
        "--env",
        help="with --no-promote: the environment to query it in (<schema>__<env>.<table>); "
        "default: named after the restatement",
    )
    res.add_argument("--json", action="store_true")
    res.add_argument("--dry-run", action="store_true", help="print the manifest, change nothing")
    res.add_argument(
        "--no-promote", action="store_true", help="stop after the diff; `tardy promote` later"
    )
    res.add_argument(
        "--accept-large-change",
        action="store_true",
        help="promote even when the circuit breaker trips",
    )
    res.add_argument(
        "--max-change",
        type=float,
        help="circuit breaker threshold, relative (default: config variable "
        "restatement_max_change)",
    )
    res.set_defaults(func=cmd_restate)

    pro = sub.add_parser("promote", help="promote a staged restatement (or finish one)")
    pro.add_argument("restatement_id", nargs="?")
    pro.add_argument("--request", help="the latest restatement of this request file")
    pro.add_argument("--json", action="store_true")
    pro.set_defaults(func=cmd_promote)

    dis = sub.add_parser("discard", help="drop a staged restatement")
    dis.add_argument("restatement_id", nargs="?")
    dis.add_argument("--request", help="the latest restatement of this request file")
    dis.add_argument("--json", action="store_true")
    dis.set_defaults(func=cmd_discard)

    rb = sub.add_parser("rollback", help="restore the tables a restatement changed")
    rb.add_argument("restatement_id")
    rb.add_argument("--reason", required=True, help="why (kept in the restatement log)")
    rb.add_argument("--json", action="store_true")
    rb.set_defaults(func=cmd_rollback)

    log = sub.add_parser("log", help="the restatement log")
    log.add_argument("restatement_id", nargs="?", help="one restatement's entries")
    log.add_argument("--json", action="store_true")
    log.set_defaults(func=cmd_log)

    st = sub.add_parser("status", help="data watermark, final/provisional days, lateness")
    st.add_argument("--json", action="store_true")
    # Also accepted after the subcommand; SUPPRESS keeps a `tardy --gateway G status` value.
    st.add_argument(
        "--gateway", choices=GATEWAYS, default=argparse.SUPPRESS, help="project.yaml's gateway"
    )
    st.add_argument(
        "--check",
        action="store_true",
        help="exit 4 when a source's late ratio or p99 lag passes its tier's threshold, or "
        "late data for final days waits too long (project.yaml: lateness_alert_*)",
    )
    st.add_argument("--fresh", action="store_true", help=FRESH_HELP)
    st.set_defaults(func=cmd_status)

    hist = sub.add_parser(
        "history", help="a transaction's bronze records and the restatements that changed it"
    )
    hist.add_argument("transaction_id")
    hist.add_argument("--json", action="store_true")
    hist.set_defaults(func=cmd_history)

    rep = sub.add_parser(
        "report", help="write the HTML report (late data and our numbers); print its path"
    )
    rep.add_argument("--restatement", dest="restatement_id", help="one restatement's page")
    rep.add_argument("--json", action="store_true")
    rep.set_defaults(func=cmd_report)

    fingerprint = sub.add_parser("fingerprint", help="content hash of every model's table")
    fingerprint.add_argument("--json", action="store_true")
    fingerprint.set_defaults(func=cmd_fingerprint)

    pub = sub.add_parser("publish", help="publish the published models' new versions")
    pub.add_argument("--json", action="store_true")
    pub.set_defaults(func=cmd_publish)

    ver = sub.add_parser("versions", help="the published versions of each published model")
    ver.add_argument("table", nargs="?", help="one model, e.g. gold.daily_store_revenue")
    ver.add_argument("--json", action="store_true")
    ver.set_defaults(func=cmd_versions)

    exp = sub.add_parser("export", help="re-export a published version byte for byte")
    exp.add_argument("table")
    exp.add_argument(
        "--as-of",
        help="latest (default), v<N>, a Delta version number, or an ISO-8601 UTC time "
        "(what was published then)",
    )
    exp.add_argument("--to", required=True, help="the folder to write the CSV and its .sha256")
    exp.add_argument("--json", action="store_true")
    exp.set_defaults(func=cmd_export)

    eng = sub.add_parser("engine", help="the data home's warm Spark engine: status, start, stop")
    eng.add_argument("action", choices=("status", "start", "stop"), nargs="?", default="status")
    eng.add_argument("--force", action="store_true", help="stop even while commands use it")
    eng.add_argument("--json", action="store_true")
    eng.set_defaults(func=cmd_engine)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    select_gateway(args.gateway)
    if args.no_engine:
        os.environ[ENGINE_VARIABLE] = "off"
    home = None if args.command in ("simulate", "engine") else activate().root
    try:
        busy = home and home_busy(home)
        if busy:
            return _report(args, busy)
        return int(args.func(args))
    except TardyError as exc:
        err.print(f"[red]error:[/] {exc}")
        return exc.exit_code
    except Exception as exc:
        busy = home and home_busy(home, wait=0.0)
        if busy:  # lost the race for the state or metastore to a process that started later
            first = (str(exc).splitlines() or [""])[0][:200]
            busy.args = (f"{busy} ({type(exc).__name__}: {first})",)
            return _report(args, busy)
        if isinstance(exc, ValueError | FileExistsError | RuntimeError):  # e.g. SQLMesh's
            err.print(f"[red]error:[/] {exc}")
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
