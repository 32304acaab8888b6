"""The commands of models trained on published versions: ``train``, ``impact``, ``retrain``,
``models`` (``tardy.training``)."""

from __future__ import annotations

import argparse
import typing as t

from tardy.cli.output import console, err, print_json, spark_without_project
from tardy.errors import ChallengerRefused
from tardy.project.home import activate

if t.TYPE_CHECKING:
    from tardy.training.snapshot import Window


def _window(args: argparse.Namespace) -> Window:
    from tardy.training.snapshot import Window

    return Window(args.first, args.last, args.horizon_days, args.holdout_days)


def cmd_train(args: argparse.Namespace) -> int:
    from tardy.rendering.models import render_model
    from tardy.training.pipeline import train

    spark = spark_without_project(args)
    with err.status("Training on the latest published versions"):
        trained = train(spark, activate().root, _window(args), args.alpha)
    if args.json:
        print_json(trained.as_dict())
    else:
        render_model(trained.registered, console)
    return 0


def cmd_impact(args: argparse.Namespace) -> int:
    from tardy.rendering.models import render_impact
    from tardy.training.pipeline import impact

    spark = spark_without_project(args)
    found = impact(spark, activate().root, args.restatement_id)
    if args.json:
        print_json(found.as_dict())
    else:
        render_impact(found, console)
    return 0


def cmd_retrain(args: argparse.Namespace) -> int:
    from tardy.rendering.models import render_retrained
    from tardy.training.pipeline import retrain

    spark = spark_without_project(args)
    with err.status(f"Retraining after {args.after} and backtesting against the champion"):
        result = retrain(spark, activate().root, args.after, args.alpha, args.tolerance)
    if args.json:
        print_json(result.as_dict())
    else:
        render_retrained(result, console)
    return 0 if result.promoted else ChallengerRefused.exit_code


def cmd_models(args: argparse.Namespace) -> int:
    from tardy.rendering.models import render_models
    from tardy.training.pipeline import registered, rollback

    home = activate().root
    if args.rollback:
        before, after = rollback(home)
        if not args.json:
            console.print(f"store_revenue@champion moved back from v{before} to v{after}.")
    found = registered(home)
    if args.json:
        print_json([r.as_dict() for r in found])
    else:
        render_models(found, console)
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from datetime import date

    from tardy.training.lineage import DEFAULT_TOLERANCE
    from tardy.training.model import DEFAULT_ALPHA

    train = sub.add_parser(
        "train",
        help="train the project's model (project.yaml training) on the latest published versions",
    )
    train.add_argument("--from", dest="first", type=date.fromisoformat, help="first feature day")
    train.add_argument("--to", dest="last", type=date.fromisoformat, help="last feature day")
    train.add_argument(
        "--horizon-days", type=int, default=7, help="the label: the measure over the N days after"
    )
    train.add_argument(
        "--holdout-days", type=int, default=7, help="the last N feature days, held out"
    )
    train.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="ridge penalty")
    train.add_argument("--json", action="store_true")
    train.set_defaults(func=cmd_train)

    imp = sub.add_parser(
        "impact", help="the published versions and models a restatement made stale"
    )
    imp.add_argument("restatement_id")
    imp.add_argument("--json", action="store_true")
    imp.set_defaults(func=cmd_impact)

    ret = sub.add_parser(
        "retrain", help="retrain after a restatement; move the champion by the alias rule"
    )
    ret.add_argument("--after", required=True, metavar="RESTATEMENT_ID")
    ret.add_argument("--alpha", type=float, help="ridge penalty (default: the champion's)")
    ret.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help="crown the challenger when its MAE <= the champion's x (1 + tolerance)",
    )
    ret.add_argument("--json", action="store_true")
    ret.set_defaults(func=cmd_retrain)

    mod = sub.add_parser("models", help="the registered model versions and their lineage")
    mod.add_argument(
        "--rollback", action="store_true", help="move the champion alias back one version"
    )
    mod.add_argument("--json", action="store_true")
    mod.set_defaults(func=cmd_models)
