"""What every command shares: the terminal's two consoles, JSON output, refusals."""

from __future__ import annotations

import argparse
import json
import typing as t

from rich.console import Console

from tardy.errors import Refused, TardyError

console = Console(stderr=False)
err = Console(stderr=True)


def print_json(payload: object) -> None:
    print(json.dumps(payload, indent=2, sort_keys=True, default=str))


def report_refusal(args: argparse.Namespace, error: TardyError) -> int:
    """Print a refusal or a failed gate (and its JSON with ``--json``); its exit code."""
    from rich.markup import escape

    label = "refused" if isinstance(error, Refused) else "failed"
    err.print(f"[bold red]{label}:[/] {escape(str(error))}", highlight=False)
    if getattr(args, "json", False):
        print_json({"status": label, "error": str(error), "exit_code": error.exit_code})
    return error.exit_code


def spark_without_project(args: argparse.Namespace) -> t.Any:
    """The warm engine's session when it runs (no SQLMesh loaded), else the project's."""
    from tardy.project.session import engine_session

    spark = engine_session()
    if spark is None:
        from tardy.project.context import open_context, spark_of

        spark = spark_of(open_context(args.gateway, load=False, progress_to_stderr=args.json))
    return spark
