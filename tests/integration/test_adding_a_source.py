"""docs/adding-a-source.md, followed as written on a copy of the project: a fourth source (a
loyalty feed) added with the guide's YAML, SQL and macro blocks only, then its late,
duplicated, corrected and invalid records through ingest, detect and restate.

The copy gets every block of the guide that names a file (``file=<path>``; ``append`` adds
to the project's file), and the commands of its last step run in this worker's warm engine
(``tardy`` through its ``main``, ``sqlmesh`` through its click group), in a data home of
its own, with the test's clock for the plan. The expected days come from the construction
of the late records, and the expected points from a Python oracle over the landing lines
(the winner of each entry: its latest valid record), not from the models.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from children import cli_in_process
from test_code_change import copy_project as copy_project_files
from test_code_change import view_target
from test_readme_tour import _sqlmesh

from tardy.project.home import project_root

REPO = project_root()  # before the test points TARDY_PROJECT at its copy
GUIDE = REPO / "docs" / "adding-a-source.md"
BLOCK = re.compile(r"```\w+ file=(\S+)( append)?\n(.*?)```", re.S)
START = date(2026, 1, 1)  # the project's default start (project.yaml)
DAYS = 10
CLOCK = datetime(2026, 1, 11, tzinfo=UTC)  # the plan runs at midnight after the last day
GRACE = 3  # config's grace_days
SILVER, QUARANTINE, GOLD = (
    "silver.loyalty_points",
    "silver.loyalty_quarantine",
    "gold.daily_store_points",
)


def day(n: int) -> date:
    return START + timedelta(days=n - 1)


def copy_project(target: Path) -> list[str]:
    """The project's files (as ``test_code_change`` copies them), then the guide's blocks;
    the files the guide wrote."""
    copy_project_files(target)
    written = []
    for name, append, body in BLOCK.findall(GUIDE.read_text()):
        path = target / name
        if append:
            path.write_text(path.read_text().rstrip("\n") + "\n" + body)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
        written.append(name)
    return written


def guide_commands() -> list[list[str]]:
    text = GUIDE.read_text()
    section = text.split("## 8. Apply and run", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the guide's last step has its commands"
    return [shlex.split(line) for line in block.group(1).splitlines() if line.strip()]


def entry(points_id: str, n: int, store: int, points: object, **extra: object) -> dict:
    return {
        "points_id": points_id,
        "member_id": f"M-{store}",
        "store_id": store,
        "earned_ts": f"{day(n)}T10:00:00Z",
        "points": points,
        **extra,
    }


def land(landing: Path, arrival: datetime, name: str, records: list[dict | str]) -> None:
    folder = landing / "loyalty" / f"arrival_ts={arrival:%Y%m%dT%H%M%SZ}"
    folder.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


def oracle(landing: Path) -> dict[tuple[date, int], int]:
    """Points per (day, store) from the landing lines: per entry (the one a record corrects,
    else its own id), the valid record that arrived last wins."""
    winners: dict[str, tuple[str, dict]] = {}
    for path in sorted(landing.glob("loyalty/arrival_ts=*/*.jsonl")):
        arrival = path.parent.name.removeprefix("arrival_ts=")
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
                points = int(str(record["points"]))
            except (ValueError, KeyError):
                continue
            key = record.get("corrects_points_id") or record["points_id"]
            if key not in winners or winners[key][0] <= arrival:
                winners[key] = (arrival, {**record, "points": points})
    out: dict[tuple[date, int], int] = defaultdict(int)
    for _, record in winners.values():
        out[(date.fromisoformat(record["earned_ts"][:10]), record["store_id"])] += record["points"]
    return dict(out)


def gold(spark) -> dict[tuple[date, int], int]:
    rows = spark.sql(f"SELECT earned_date, store_id, points FROM {GOLD}").collect()
    return {(r.earned_date, r.store_id): int(r.points) for r in rows}


def run(command: list[str]) -> tuple[int, str]:
    program, args = command[0], command[1:]
    if program == ".venv/bin/tardy":
        code, out, err = cli_in_process(*args)
        return code, out + err
    assert program == ".venv/bin/sqlmesh", command
    if args[0] == "plan":  # the test's clock; the project's own unit tests run in `make test`
        assert "--execution-time" in args and "--no-prompts" in args, args  # the guide's
        at = args.index("--execution-time")
        args = [*args[:at], *args[at + 2 :], "--execution-time", CLOCK.strftime("%Y-%m-%d")]
        args = [*args, "--skip-tests"]
    return _sqlmesh(*args)


def test_a_source_added_by_the_guide_is_ingested_detected_and_restated(
    engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    written = copy_project(project)
    assert written == [
        "sources.yaml",
        "external_models.yaml",
        "macros/loyalty_rules.py",
        "models/silver/loyalty_points.sql",
        "models/silver/loyalty_quarantine.sql",
        "models/gold/daily_store_points.sql",
        "audits/points_reconcile_with_silver.sql",
    ]
    monkeypatch.setenv("TARDY_PROJECT", str(project))
    monkeypatch.delenv("TARDY_SOURCES", raising=False)
    try:
        home, _, spark = engine.open(tmp_path / "home")
        # On time: two stores' entries every day, each landed the evening of its day.
        for n in range(1, DAYS + 1):
            arrival = datetime.combine(day(n), datetime.min.time(), UTC) + timedelta(hours=20)
            land(
                home.landing,
                arrival,
                f"day-{n}",
                [entry(f"P-{n}-{s}", n, s, 10 * n + s) for s in (1, 2)],
            )
        for command in guide_commands():
            code, output = run(command)
            assert code == 0, f"{shlex.join(command)}\n{output[-3000:]}"
        before = gold(spark)
        assert before == oracle(home.landing)
        assert len(before) == 2 * DAYS

        # Late, the morning after the plan: a new entry for a closed day (3), a verbatim
        # resend of day 5's entry of store 1, a correction moving day 6's entry of store 2
        # to day 4, an invalid record of day 2 (its points are not a number), and a new
        # entry inside the grace window (day 9: left to the next run).
        late = CLOCK + timedelta(hours=6)
        land(
            home.landing,
            late,
            "late",
            [
                entry("P-late", 3, 1, 7),
                entry("P-5-1", 5, 1, 51),
                entry("P-6-2-fix", 4, 2, 99, corrects_points_id="P-6-2"),
                entry("P-bad", 2, 2, "lots"),
                entry("P-recent", 9, 1, 5),
            ],
        )
        code, out, err = cli_in_process("ingest", "--json")
        assert code == 0, err
        code, out, err = cli_in_process("detect", "--json")
        assert code == 0, err
        manifest = json.loads(out)
        closed = day(DAYS) - timedelta(days=GRACE)
        assert day(9) > closed >= day(6)
        # Day 5: a verbatim resend, though the guide's silver model takes the latest arrival
        # of an entry (no macro keeps a version's first): detection sees no change.
        assert days(manifest["roots"][SILVER]) == {day(3), day(4), day(6)}
        assert days(manifest["roots"][QUARANTINE]) == {day(2)}
        assert days(manifest["absorbed_by_next_run"][SILVER]) == {day(9)}
        assert days(manifest["impacted"][GOLD]) == {day(3), day(4), day(6)}
        assert not any(
            spans for model, spans in manifest["roots"].items() if model not in (SILVER, QUARANTINE)
        )

        code, out, err = cli_in_process("restate", "--reason", "late loyalty points", "--json")
        assert code == 0, err
        result = json.loads(out)
        assert result["status"] == "promoted", result
        after = gold(spark)
        expected = oracle(home.landing)
        for key in set(after) | set(expected):
            if key[0] <= closed:
                assert after.get(key) == expected.get(key), key
            else:  # inside the grace window: prod as before, for the next run
                assert after.get(key) == before.get(key), key
        assert after[(day(3), 1)] == before[(day(3), 1)] + 7
        assert after[(day(4), 2)] == before[(day(4), 2)] + 99
        assert (day(6), 2) not in after
        assert after[(day(5), 1)] == before[(day(5), 1)]
        quarantined = spark.sql(f"SELECT report_date, reason FROM {QUARANTINE}").collect()
        assert [(r.report_date, r.reason) for r in quarantined] == [(day(2), "invalid_points")]

        # The guide's reconciliation audit: it passes on two restated days, and fails on one
        # day (one result) once silver lost a row of it behind SQLMesh's back (in its
        # physical table).
        audit = ("audit", "--model", GOLD, "--start", str(day(3)), "--end", str(day(4)))
        code, output = _sqlmesh(*audit)
        assert code == 0, output[-3000:]
        silver = view_target(spark, SILVER)
        spark.sql(f"DELETE FROM {silver} WHERE earned_date = DATE'{day(4)}' AND store_id = 2")
        code, output = _sqlmesh(*audit)
        assert code == 1, output[-3000:]
        assert "Failure in audit points_reconcile_with_silver" in output, output[-3000:]
        assert "Got 1 results, expected 0." in output, output[-3000:]
    finally:
        engine.release()


def days(spans: list[list[str]]) -> set[date]:
    """The days of a manifest's ``[[first, last], ...]``."""
    out = set()
    for first, last in spans:
        a, b = date.fromisoformat(first), date.fromisoformat(last)
        out |= {a + timedelta(days=i) for i in range((b - a).days + 1)}
    return out
