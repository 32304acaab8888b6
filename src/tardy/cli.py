"""``tardy``: the command line. Each command opens the project once, in one Spark session."""

from __future__ import annotations

import argparse
import json
import sys
import typing as t
from datetime import UTC, date, datetime
from pathlib import Path

from rich.console import Console

from tardy.home import activate
from tardy.simulate import SimulationConfig

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


def cmd_ingest(args: argparse.Namespace) -> int:
    from tardy.ingest import ingest
    from tardy.project import open_context, spark_of

    context = open_context(args.gateway, load=False, progress_to_stderr=args.json)
    home = activate()
    with err.status("Ingesting into bronze.pos_events"):
        result = ingest(spark_of(context), home.landing, [Path(p) for p in args.paths])
    if args.json:
        _print_json(result.as_dict())
    else:
        console.print(
            f"Ingested {result.files_ingested} files, {result.rows:,} rows "
            f"({result.rows_with_parse_error} unparseable lines kept for quarantine); "
            f"skipped {result.files_skipped} files already ingested."
        )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from tardy.demo import run_demo
    from tardy.project import open_context
    from tardy.report import render

    with err.status("Starting Spark and loading the SQLMesh project"):
        context = open_context(args.gateway, progress_to_stderr=args.json)
    result = run_demo(context, activate(), err if args.json else console)
    if args.json:
        _print_json(result.summary.as_dict())
    else:
        console.rule("Summary")
        render(result.summary, console)
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    from tardy.project import open_context, spark_of
    from tardy.report import render, summarize

    context = open_context(args.gateway, progress_to_stderr=args.json)
    summary = summarize(spark_of(context), int(context.config.variables["grace_days"]))
    if args.json:
        _print_json(summary.as_dict())
    else:
        render(summary, console)
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
    from rich.table import Table

    since = manifest.since_bronze_version
    console.print(
        f"Bronze version {manifest.bronze_version} (watermark was "
        f"{since if since is not None else 'unset'}); arrival watermark "
        f"{manifest.arrival_watermark}; {manifest.late_rows} late changes not yet in prod."
    )
    table = Table(title="Closed intervals to restate")
    table.add_column("model")
    table.add_column("intervals")
    for model, spans in manifest.impacted.items():
        table.add_row(model, ", ".join(f"{a}..{b}" if a != b else a for a, b in spans) or "-")
    console.print(table)
    for model, spans in manifest.absorbed_by_next_run.items():
        if spans:
            days = ", ".join(f"{a}..{b}" if a != b else a for a, b in spans)
            console.print(f"Inside the grace window, the next `sqlmesh run` absorbs {model} {days}")
    if manifest.stock_commands:
        console.print("Stock equivalent (recomputes whole hulls):")
        for command in manifest.stock_commands:
            console.print(f"  {command}", markup=False)


def cmd_detect(args: argparse.Namespace) -> int:
    from tardy.project import open_context, spark_of
    from tardy.restatement import detect

    context = open_context(args.gateway, progress_to_stderr=args.json)
    with err.status("Comparing new bronze rows with prod"):
        manifest = detect(context, spark_of(context))
    if args.json:
        _print_json(manifest.as_dict())
    else:
        _render_manifest(manifest)
    return 0


def cmd_restate(args: argparse.Namespace) -> int:
    from tardy.project import open_context, spark_of
    from tardy.restatement import restate

    context = open_context(args.gateway, progress_to_stderr=args.json)
    result = restate(context, spark_of(context), args.reason, dry_run=args.dry_run)
    if args.json:
        _print_json(result.as_dict())
        return 0
    _render_manifest(result.manifest)
    if args.dry_run:
        console.print("Dry run: nothing was changed.")
    elif result.manifest.is_empty:
        console.print("Nothing to restate: prod already reflects every bronze row.")
    else:
        for model, items in result.evaluated.items():
            for item in items:
                console.print(f"restated {model} {item['interval']}: {item['rows']:,} rows")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tardy",
        description="Late-arriving, duplicated and corrected POS data on Spark + Delta.",
    )
    parser.add_argument("--gateway", help="SQLMesh gateway (default: config.yaml's, 'local')")
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
    sim.add_argument(
        "--through", type=_utc, help="delivery cutoff (ISO time, UTC): later batches wait"
    )
    sim.add_argument("--landing", type=Path, help="landing folder (default $TARDY_HOME/landing)")
    sim.add_argument("--json", action="store_true")
    sim.set_defaults(func=cmd_simulate)

    ing = sub.add_parser("ingest", help="append new landing files to bronze.pos_events")
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
    det.set_defaults(func=cmd_detect)

    res = sub.add_parser("restate", help="recompute exactly the detected intervals")
    res.add_argument("--reason", required=True, help="why (kept with the watermark)")
    res.add_argument("--json", action="store_true")
    res.add_argument("--dry-run", action="store_true", help="print the manifest, change nothing")
    res.set_defaults(func=cmd_restate)

    fingerprint = sub.add_parser("fingerprint", help="content hash of every model's table")
    fingerprint.add_argument("--json", action="store_true")
    fingerprint.set_defaults(func=cmd_fingerprint)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ValueError, FileExistsError, RuntimeError) as exc:
        err.print(f"[red]error:[/] {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
