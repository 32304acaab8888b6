"""The steward's commands: ``tardy quarantine`` lists quarantined records with their review;
``reject``, ``duplicate`` and ``fix`` decide (``tardy.quarantine``)."""

from __future__ import annotations

import argparse
import typing as t

from tardy.cli.output import console, print_json, report_refusal
from tardy.errors import TardyError


def cmd_quarantine(args: argparse.Namespace) -> int:
    from tardy.project.context import open_context, spark_of
    from tardy.quarantine.listing import read, short_ids
    from tardy.quarantine.steward import settle_rejected
    from tardy.rendering.quarantine import render_listing

    context = open_context(args.gateway, progress_to_stderr=args.json)
    listing = read(context, spark_of(context))
    settle_rejected(listing, context)  # a rejection a kill left unannounced
    chosen = listing.select(args.source, args.reason_filter, open_only=not args.all)
    ids = short_ids(listing.records)
    if args.json:
        print_json(
            {
                "clock": listing.clock.isoformat() if listing.clock else None,
                "records": [r.as_dict(ids[r.record_id]) for r in chosen],
            }
        )
    else:
        render_listing(chosen, ids, "open and reviewed" if args.all else "open", console)
    return 0


def _decide(args: argparse.Namespace, action: t.Callable[..., t.Any]) -> int:
    """Run a decision under the restatement lock, taken before the project opens (of two
    stewards at once, the second is refused, exit 3)."""
    from tardy.engine.restate import hold
    from tardy.project.context import open_context, spark_of
    from tardy.quarantine.steward import LOCK_NAME
    from tardy.rendering.quarantine import render_decided

    try:
        with hold(LOCK_NAME, args.gateway):
            context = open_context(args.gateway, progress_to_stderr=args.json)
            decided = action(context, spark_of(context))
    except TardyError as error:
        return report_refusal(args, error)
    if args.json:
        print_json(decided.as_dict())
    else:
        render_decided(decided, console)
    return 0


def cmd_reject(args: argparse.Namespace) -> int:
    from tardy.quarantine.steward import reject

    return _decide(
        args, lambda context, spark: reject(context, spark, args.ids, args.reason, args.supersede)
    )


def cmd_duplicate(args: argparse.Namespace) -> int:
    from tardy.quarantine.steward import duplicate

    return _decide(
        args,
        lambda context, spark: duplicate(
            context, spark, args.id, args.of, args.reason, args.supersede
        ),
    )


def cmd_fix(args: argparse.Namespace) -> int:
    from tardy.quarantine.steward import fix

    return _decide(
        args,
        lambda context, spark: fix(context, spark, args.id, args.set, args.reason, args.supersede),
    )


def add_parsers(sub: t.Any) -> None:
    q = sub.add_parser(
        "quarantine",
        help="quarantined records of every source and their review; reject, duplicate, fix",
    )
    q.add_argument("--source", help="one declared source")
    q.add_argument("--reason", dest="reason_filter", metavar="REASON", help="one reason")
    shown = q.add_mutually_exclusive_group()
    shown.add_argument("--open", action="store_true", help="only the open ones (default)")
    shown.add_argument("--all", action="store_true", help="the reviewed ones too")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_quarantine)
    actions = q.add_subparsers(dest="action")
    supersede = "replace the record's decision (a new row; the old one stays)"

    rej = actions.add_parser("reject", help="reject records for good; their owner is told")
    rej.add_argument("ids", nargs="+", metavar="ID", help="as `tardy quarantine` lists them")
    rej.add_argument("--reason", required=True, help="why (kept in the review table)")
    rej.add_argument("--supersede", action="store_true", help=supersede)
    rej.add_argument("--json", action="store_true")
    rej.set_defaults(func=cmd_reject)

    dup = actions.add_parser("duplicate", help="mark a record a replay of another")
    dup.add_argument("id", metavar="ID")
    dup.add_argument("--of", required=True, metavar="ID", help="the record it replays (bronze)")
    dup.add_argument("--reason", help="why (default: a replay of the other record)")
    dup.add_argument("--supersede", action="store_true", help=supersede)
    dup.add_argument("--json", action="store_true")
    dup.set_defaults(func=cmd_duplicate)

    fix = actions.add_parser(
        "fix", help="land a steward record with fixed values; ingest and restate absorb it"
    )
    fix.add_argument("id", metavar="ID")
    fix.add_argument(
        "--set",
        action="append",
        required=True,
        metavar="FIELD=VALUE",
        help="a field of the source's record (sources.yaml), typed by its declaration",
    )
    fix.add_argument("--reason", required=True, help="why (kept in the record and the table)")
    fix.add_argument("--supersede", action="store_true", help=supersede)
    fix.add_argument("--json", action="store_true")
    fix.set_defaults(func=cmd_fix)
