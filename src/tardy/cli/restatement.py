"""The restatement commands: ``restate``, ``promote``, ``discard``, ``rollback``, ``log``."""

from __future__ import annotations

import argparse
import typing as t
from contextlib import nullcontext
from pathlib import Path

from tardy.cli.output import console, print_json, report_refusal, spark_without_project
from tardy.cli.reading import render_manifest
from tardy.errors import InputError, TardyError


def _render_outcome(outcome: t.Any) -> None:
    if outcome.recovered:
        console.print(f"Recovered: {outcome.recovered}")
    if outcome.manifest is not None:
        render_manifest(outcome.manifest)
    if outcome.diff is not None:
        from tardy.rendering.restatement import diff_table

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


def _restatement_command(
    args: argparse.Namespace, action: t.Callable[..., t.Any], lock_as: str | None = None
) -> int:
    """Runs a restatement action; a refusal or a failed gate exits non-zero with its reason.

    With ``lock_as`` (a restatement id) the restatement lock is taken before the project and
    Spark open (``tardy.engine.restate.hold``): of two restatements started together, the
    loser is refused (exit 3) before it touches the data home's state or metastore.
    """
    from tardy.engine.restate import hold
    from tardy.project.context import open_context, spark_of

    try:
        with hold(lock_as, args.gateway) if lock_as else nullcontext():
            context = open_context(args.gateway, progress_to_stderr=getattr(args, "json", False))
            result = action(context, spark_of(context))
    except TardyError as error:
        return report_refusal(args, error)
    if getattr(args, "json", False):
        print_json(result.as_dict() if hasattr(result, "as_dict") else result)
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
    """The request file ``--request`` names (``tardy.requests.request``), or None."""
    from tardy.requests.request import load

    return load(Path(args.request)) if getattr(args, "request", None) else None


def cmd_restate(args: argparse.Namespace) -> int:
    from tardy.engine.plan import new_id
    from tardy.requests.restatements import restate
    from tardy.requests.review import markdown

    try:
        request = _request(args)
        if request is not None and (args.model or args.start or args.end or args.reason):
            raise InputError("--request gives the reason and models: not with --reason/--model")
        if request is None and not args.reason:
            raise InputError("a restatement needs --reason (or --request FILE)")
        selection = request.selection if request else _selection(args)
    except TardyError as error:
        return report_refusal(args, error)
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


def cmd_plan(args: argparse.Namespace) -> int:
    """``tardy plan ENV --restate-model M [--start D] [--end D] [--auto-apply]``: the stock
    command's habit, as a named restatement (``tardy restate --model M --env ENV
    --no-promote``): staged in ENV for review, or promoted with ``--auto-apply``. No range:
    the models' computed days, as SQLMesh restates them. ``prod``: staged in an environment
    named after the restatement."""
    from tardy.engine.named import Selection, computed_range
    from tardy.engine.plan import new_id
    from tardy.requests.restatements import restate

    models = tuple(args.restate_model)
    restatement_id = new_id()
    reason = args.reason or " ".join(
        ["tardy plan", args.environment]
        + [f"--restate-model {m}" for m in models]
        + [f"--{k} {v}" for k, v in (("start", args.start), ("end", args.end)) if v]
    )

    def action(context: t.Any, spark: t.Any) -> t.Any:
        start, end = args.start, args.end
        if start is None or end is None:
            first, last = computed_range(context, models)
            start, end = start or first, end or last
        return restate(
            context,
            spark,
            reason,
            promote=args.auto_apply,
            restatement_id=restatement_id,
            selection=Selection(models, start, end),
            environment_name=None if args.environment == "prod" else args.environment,
        )

    return _restatement_command(args, action, lock_as=restatement_id)


def _restatement_of(spark: t.Any, args: argparse.Namespace, request: t.Any) -> str:
    """The restatement a command acts on: the id given, or the latest of ``--request``."""
    from tardy.engine.restate import latest_with_suffix
    from tardy.requests.request import RequestError

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
        return report_refusal(args, error)
    return _restatement_command(
        args,
        lambda context, spark: act(context, spark, _restatement_of(spark, args, request)),
        lock_as=args.restatement_id or f"request-{request.name}",
    )


def cmd_promote(args: argparse.Namespace) -> int:
    from tardy.requests.restatements import promote_staged

    return _by_id_or_request(args, promote_staged)


def cmd_discard(args: argparse.Namespace) -> int:
    from tardy.requests.restatements import discard

    return _by_id_or_request(args, discard)


def cmd_rollback(args: argparse.Namespace) -> int:
    from tardy.requests.restatements import rollback

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
    from tardy.rendering.restatement import log_table

    spark = spark_without_project(args)
    if args.json:
        print_json(
            restatement_log.entries(spark, args.restatement_id)
            if args.restatement_id
            else restatement_log.summary(spark)
        )
        return 0
    console.print(log_table(restatement_log.summary(spark), args.restatement_id))
    return 0
