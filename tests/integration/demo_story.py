"""The ``demo`` template: `tardy demo`'s own code (``tardy.simulate.demo.run_demo``) run once per
content hash in the worker's warm engine, on a smaller month than the command's; what it told
and returned are the template's facts (``test_demo_story``)."""

from __future__ import annotations

import io
import json
import typing as t
from datetime import date
from pathlib import Path

from homes import Engine, Template

from tardy.simulate import SimulationConfig

# Smaller than the command's month (5 stores x 28 days x 120 sales), with the rates of late,
# duplicated, corrected and moved rows raised so that each kind reaches a closed day.
DEMO_CONFIG = SimulationConfig(
    seed=11,
    stores=3,
    days=21,
    start=date(2026, 1, 1),
    transactions_per_store_day=25,
    late_days_rate=0.08,
    late_weeks_rate=0.03,
    correction_rate=0.03,
    void_rate=0.02,
    refunds=True,
    refund_rate=0.05,
)
FIRST_DAYS = 10


def run_demo(home: t.Any, context: t.Any) -> dict[str, t.Any]:
    """The demo's steps on the open home: its summary and story as the command's ``--json``
    prints them, and what it told (its console, 80 columns)."""
    from rich.console import Console

    from tardy.simulate.demo import run_demo as demo

    told = io.StringIO()
    console = Console(file=told, width=80, force_terminal=False, color_system=None)
    result = demo(context, home, console, config=DEMO_CONFIG, first_days=FIRST_DAYS)
    facts = json.loads(json.dumps(result.summary.as_dict(), default=str))
    facts["story"] = json.loads(json.dumps(result.story(), default=str))
    facts["told"] = told.getvalue()
    return facts


def build_demo(engine: Engine, root: Path) -> dict[str, t.Any]:
    home, context, _ = engine.open(root)
    return run_demo(home, context)


DEMO = Template("demo", build_demo)
