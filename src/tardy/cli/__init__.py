"""``tardy``: the command line. Each command opens the project once, in one Spark session.

The commands live by concern: ``tardy.cli.restatement`` (restate, promote, discard,
rollback, log), ``tardy.cli.reading`` (status, detect, history, report, the published
versions), ``tardy.cli.models`` (train, impact, retrain, models); this module holds the
rest, the parser and ``main``.
"""

from __future__ import annotations

import argparse
import os
from datetime import UTC, date, datetime
from pathlib import Path

from rich.markup import escape

from tardy.cli.models import add_parsers as add_model_parsers
from tardy.cli.output import console, err, print_json, report_refusal, spark_without_project
from tardy.cli.quarantine import add_parsers as add_quarantine_parsers
from tardy.cli.reading import (
    cmd_card,
    cmd_detect,
    cmd_export,
    cmd_fingerprint,
    cmd_grace,
    cmd_history,
    cmd_publish,
    cmd_report,
    cmd_show,
    cmd_status,
    cmd_summary,
    cmd_versions,
)
from tardy.cli.restatement import (
    cmd_discard,
    cmd_log,
    cmd_plan,
    cmd_promote,
    cmd_restate,
    cmd_rollback,
)
from tardy.errors import FailpointReached, InputError, TardyError
from tardy.project.gateway import GATEWAYS, select_gateway
from tardy.project.home import activate
from tardy.runtime.busy import home_busy
from tardy.runtime.warm import ENGINE_VARIABLE
from tardy.simulate import SimulationConfig


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
        print_json(result.as_dict())
    else:
        console.print(
            f"Wrote {result.files_written} files ({result.files_existing} already present), "
            f"{result.records:,} records for {result.first_day}..{result.last_day} "
            f"into {landing}"
        )
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from tardy.ingest import ingest
    from tardy.ingest.result import FilesRefused

    spark = spark_without_project(args)
    home = activate()
    with err.status("Ingesting into the declared bronze tables"):
        result = ingest(spark, home.landing, [Path(p) for p in args.paths], strict=False)
    series = None
    if result.files_ingested:  # the lateness series follows what was committed
        from dataclasses import asdict

        from tardy.lateness.series import extend

        with err.status("Extending the lateness series"):
            series = asdict(extend(spark))
    if args.json:
        print_json({**result.as_dict(), "series": series})
    if result.refused:  # every other file was ingested (and printed): name the refused ones
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
    from tardy.project.context import open_context
    from tardy.rendering.summary import render_summary
    from tardy.simulate.demo import run_demo

    with err.status("Starting Spark and loading the SQLMesh project"):
        context = open_context(args.gateway, progress_to_stderr=args.json)
    result = run_demo(context, activate(), err if args.json else console)
    if args.json:
        print_json({**result.summary.as_dict(), "story": result.story()})
    else:
        console.rule("Summary")
        render_summary(result.summary, console)
    return 0


def cmd_notifications(args: argparse.Namespace) -> int:
    """``tardy notifications [list]``: what the outbox holds; ``retry``: the dead letters put
    back and every waiting event sent now (exit 1 when a sink still does not take one)."""
    from tardy.outbox import notifications
    from tardy.project.context import notification_targets
    from tardy.rendering.status import render_notifications

    home = activate().root
    done = None
    if args.action == "retry":
        outbox = notifications.Outbox.of(home, notification_targets)
        done = outbox.retry_dead(args.key)
    backlog = notifications.backlog(home)
    if args.json:
        print_json({"delivery": done.as_dict() if done else None, **backlog.as_dict()})
    else:
        if done is not None:
            console.print(
                f"Retried {done.retried} dead letter(s): {done.delivered} delivered, "
                f"{done.pending} waiting, {done.dead} refused again"
            )
        render_notifications(backlog, console)
        if done is None and not backlog.dead and not any(backlog.pending.values()):
            console.print("The outbox is empty: every event was delivered.")
    if done is not None and (done.busy or done.dead or done.pending):
        why = "another process is delivering" if done.busy else "; ".join(done.errors[:3])
        raise TardyError(f"notifications not all delivered: {why or 'waiting'}")
    return 0


def cmd_engine(args: argparse.Namespace) -> int:
    from tardy.project.context import engine_settings
    from tardy.rendering.engine import render_engine
    from tardy.runtime import warm

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
        print_json(status.as_dict())
    else:
        render_engine(status, console)
    return 0


AS_OF_HELP = (
    "latest (default), v<N>, a Delta version number, or an ISO-8601 UTC time such as "
    "2024-05-01T12:00:00Z (what was published then)"
)
FRESH_HELP = "compute again even when nothing it reads changed since it was recorded"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tardy",
        description="Late-arriving, duplicated and corrected data on Spark + Delta.",
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
    for name, value in vars(defaults).items():  # a switch per feed: --no-<on one>, --<off one>
        if isinstance(value, bool):
            flag = f"--{'no-' if value else ''}{name.replace('_', '-')}"
            sim.add_argument(flag, dest=name, action="store_const", const=not value)
    sim.add_argument(
        "--through", type=_utc, help="delivery cutoff (ISO time, UTC): later batches wait"
    )
    sim.add_argument("--landing", type=Path, help="landing folder (default $TARDY_HOME/landing)")
    sim.add_argument("--json", action="store_true")
    sim.set_defaults(func=cmd_simulate)

    ing = sub.add_parser(
        "ingest", help="append new landing files to their sources' bronze tables (sources.yaml)"
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

    pln = sub.add_parser(
        "plan",
        help="`sqlmesh plan ENV --restate-model M` as a restatement: the models' days staged "
        "in ENV for review (promoted with --auto-apply)",
    )
    pln.add_argument("environment", help="stage in <schema>__<ENV>.<table> (prod: a new one)")
    pln.add_argument(
        "--restate-model",
        "-r",
        action="append",
        required=True,
        help="as `sqlmesh plan --restate-model`: names, wildcards, tag:...; repeatable",
    )
    pln.add_argument(
        "--start", "-s", type=date.fromisoformat, help="first day (default: its first computed)"
    )
    pln.add_argument(
        "--end", "-e", type=date.fromisoformat, help="last day (default: its last computed)"
    )
    pln.add_argument("--auto-apply", action="store_true", help="promote once audited and diffed")
    pln.add_argument("--reason", help="why (kept in the restatement log; default: the command)")
    pln.add_argument("--json", action="store_true")
    pln.set_defaults(func=cmd_plan)

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
    st.add_argument(
        "--as-of",
        help="now, for --check's windows and silences: an ISO-8601 UTC time, or 'feed' (the "
        "latest arrival); default TARDY_NOW, else the wall clock",
    )
    st.set_defaults(func=cmd_status)

    gr = sub.add_parser(
        "grace", help="the grace window each source's lateness calls for (lateness series)"
    )
    gr.add_argument("source", nargs="?", help="one source (default: every declared one)")
    gr.add_argument(
        "--apply",
        action="store_true",
        help="write the suggested window into project.yaml (then `sqlmesh plan` applies it)",
    )
    gr.add_argument("--json", action="store_true")
    gr.set_defaults(func=cmd_grace)

    hist = sub.add_parser(
        "history", help="a key's bronze records and the restatements that changed its rows"
    )
    hist.add_argument(
        "key", help="a declared source's natural key: a sale's transaction id, a refund's id"
    )
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
    ver.add_argument("table", nargs="?", help="one published model (schema.name)")
    ver.add_argument(
        "--check",
        action="store_true",
        help="mark the versions time travel can no longer read (VACUUM, log retention)",
    )
    ver.add_argument(
        "--notes",
        metavar="VERSION",
        help="print the release note of one version (v3, latest) of TABLE",
    )
    ver.add_argument("--json", action="store_true")
    ver.set_defaults(func=cmd_versions)

    card = sub.add_parser(
        "card", help="a published model's data product card: owner, version, finality"
    )
    card.add_argument("table", help="a published model (schema.name)")
    card.add_argument("--json", action="store_true")
    card.set_defaults(func=cmd_card)

    show = sub.add_parser("show", help="re-read the rows of a published version")
    show.add_argument("table")
    show.add_argument("--as-of", help=AS_OF_HELP)
    show.add_argument(
        "--day", type=date.fromisoformat, help="only this day (a period: its first day)"
    )
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)

    exp = sub.add_parser("export", help="re-export a published version byte for byte")
    exp.add_argument("table")
    exp.add_argument(
        "--as-of",
        help=AS_OF_HELP,
    )
    exp.add_argument("--to", required=True, help="the folder to write the CSV and its .sha256")
    exp.add_argument("--json", action="store_true")
    exp.set_defaults(func=cmd_export)

    add_model_parsers(sub)
    add_quarantine_parsers(sub)

    eng = sub.add_parser("engine", help="the data home's warm Spark engine: status, start, stop")
    eng.add_argument("action", choices=("status", "start", "stop"), nargs="?", default="status")
    eng.add_argument("--force", action="store_true", help="stop even while commands use it")
    eng.add_argument("--json", action="store_true")
    eng.set_defaults(func=cmd_engine)

    note = sub.add_parser(
        "notifications", help="the outbox: events waiting, dead letters; retry them"
    )
    note.add_argument("action", choices=("list", "retry"), nargs="?", default="list")
    note.add_argument("--key", help="retry only the dead letter whose key starts with this")
    note.add_argument("--json", action="store_true")
    note.set_defaults(func=cmd_notifications)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    select_gateway(args.gateway)
    if args.no_engine:
        os.environ[ENGINE_VARIABLE] = "off"
    home = None if args.command in ("simulate", "engine", "notifications") else activate().root
    try:
        busy = home and home_busy(home)
        if busy:
            return report_refusal(args, busy)
        return int(args.func(args))
    except FailpointReached:  # a test's kill, in-process: a killed command delivers nothing
        home = None
        raise
    except TardyError as exc:  # one line, however wide: a terminal wraps it, a log keeps it
        err.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True, highlight=False)
        return exc.exit_code
    except Exception as exc:
        busy = home and home_busy(home, wait=0.0)
        if busy:  # lost the race for the state or metastore to a process that started later
            first = (str(exc).splitlines() or [""])[0][:200]
            busy.args = (f"{busy} ({type(exc).__name__}: {first})",)
            return report_refusal(args, busy)
        if isinstance(exc, ValueError | FileExistsError | RuntimeError):  # e.g. SQLMesh's
            err.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True, highlight=False)
            return 1
        return report_unexpected(exc)
    finally:
        if home is not None:
            _deliver(home)


ERRORS_LOG = "errors.log"


def report_unexpected(exc: Exception) -> int:
    """An error tardy did not expect (an engine's, mostly: a Spark ``AnalysisException`` on a
    model missing a column): one line with its kind and its message's first line, the whole
    traceback appended to the data home's ``logs/errors.log``; exit 1."""
    import sys
    import traceback

    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    where = ""
    try:
        log = activate().logs / ERRORS_LOG
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as out:
            out.write(f"--- {datetime.now(UTC).isoformat(timespec='seconds')} {sys.argv}\n")
            out.write("".join(traceback.format_exception(exc)))
        where = f" (the traceback: {log})"
    except Exception:  # noqa: BLE001 - no home to log in: the line alone
        pass
    line = escape(f"{type(exc).__name__}: {first[:300]}{where}")
    err.print(f"[red]error:[/] {line}", highlight=False, soft_wrap=True)
    return 1


def _deliver(home: Path) -> None:
    """Deliver the notifications this or an earlier command raised, within a short budget;
    what is not delivered stays in the outbox for the next command, and no error of a sink
    reaches the command's exit code."""
    from tardy.engine.promote import failpoint
    from tardy.outbox.notifications import deliver_pending
    from tardy.project.context import notification_targets

    failpoint("deliver", 0)  # test hook: killed after the command's commits, before delivery
    try:
        deliver_pending(home, targets=notification_targets)
    except Exception as error:  # a full disk, an unreadable URL file: the command stands
        err.print(f"[yellow]notifications not delivered:[/] {error}")
