"""`make chaos`: kill `tardy` commands at random moments, recover, check that nothing is lost.

Each trial restores one data home to a template state, starts one of ``tardy ingest``,
``tardy restate``, ``tardy promote`` or ``tardy rollback`` as a real process in its own
process group, SIGKILLs the whole group after a seeded random delay, then (in one check
process) checks the state the kill left, runs the documented recovery and checks the
invariants of issue 10:

- right after the kill, every prod table's content hash is its before or its expected after
  state (never a mix within a table), and bronze holds no landing line twice;
- after recovery, prod equals the expected state; bronze holds each landing line exactly
  once; every restatement in the log is in a terminal state; the arrival watermark agrees
  with prod (``detect`` finds the late days exactly when prod lacks them); per day, bronze
  rows = silver rows + superseded rows + quarantined rows, with bronze and superseded counted
  by the independent pandas oracle of the tests from the landing files.

Every command runs on both of the embedded default's paths, in turn (each command gets both
within any 8 trials): in-process (``TARDY_ENGINE=off``, the kill takes the command's own
Spark JVM with it) and on the data home's warm engine (``tardy.runtime.warm``: the engine outlives
the killed client, its statement may still be running on it; the check and the recovery run
on the same engine, which interrupts the dead client's session first).

Templates (built once per run, by the real CLI, on the same path so that the metastore's
absolute locations stay valid): ``landed`` (prod as the tests' ``small`` template holds it,
shared with ``make test``; late rows for closed days landed),
``ingested``, ``staged`` (``restate --no-promote``) and ``promoted``. The kill delay is drawn
uniformly between half a process's start-up and the un-killed command's measured duration.
Seeded: ``--seed S --trials N`` replays the same commands and delays; ``--only K`` replays
trial K alone (the templates of the last run are reused when ``TARDY_HOME`` still holds
them).

Usage: ``python bench/chaos.py [--trials 20] [--seed 7] [--only K]`` with ``TARDY_HOME`` set
to a scratch directory (``make chaos`` does that). Exits non-zero when any trial fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import typing as t
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
COMMANDS = ("ingest", "restate", "promote", "rollback")
# The log actions a restatement may end in once recovery is done.
TERMINAL = {"promoted", "discarded", "rolled_back", "audit_failed", "breaker_tripped"}


def _tests_module(name: str) -> t.Any:
    """A module of the integration tests (``tests/integration``): the pandas oracle, and the
    `small` template with its simulation."""
    folder = str(ROOT / "tests" / "integration")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return __import__(name)


def _config() -> t.Any:
    """The simulation: the tests' `small` template's (2 stores, 10 days)."""
    return _tests_module("children").SMALL_CONFIG


def _clock() -> datetime:
    """The template's clock: its plan ran at the end of its last day."""
    clock: datetime = _tests_module("children").SMALL_CLOCK
    return clock


# -- the base home (child process) ---------------------------------------------------------


def _late_lines(landing: Path) -> list[str]:
    """Late records for closed days: new sales on two days, a correction that moves an
    existing sale to another day, an exact duplicate of an existing record and an invalid
    record (it must end in the quarantine)."""
    config = _config()
    existing = None
    for path in sorted(landing.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("record_type") == "sale" and record.get("event_ts", "").startswith(
                str(config.start + timedelta(days=2))
            ):
                existing = record
                break
        if existing:
            break
    assert existing, "the simulation has no sale on day 2"
    day = [str(config.start + timedelta(days=n)) for n in range(config.days)]
    sale = {"record_type": "sale", "store_id": 1, "product_id": 2, "quantity": 1}
    lines = [
        {
            **sale,
            "transaction_id": f"CHAOS-{d}-{i}",
            "unit_price": 4.5,
            "event_ts": f"{d}T08:00:00Z",
        }
        for d in (day[1], day[4])
        for i in range(2)
    ]
    lines.append(
        {
            **existing,
            "record_type": "correction",
            "transaction_id": f"{existing['transaction_id']}-C1",
            "corrects_transaction_id": existing["transaction_id"],
            "quantity": 3,
            "event_ts": f"{day[5]}T09:30:00Z",
        }
    )
    lines.append(existing)
    lines.append(
        {
            **sale,
            "transaction_id": f"CHAOS-{day[3]}-bad",
            "quantity": -2,
            "unit_price": 1.0,
            "event_ts": f"{day[3]}T10:00:00Z",
        }
    )
    return [json.dumps(line) for line in lines]


def build_base() -> None:
    """Child: prod as the tests' `small` template holds it (the simulation ingested and
    planned; built here unless ``make test`` or an earlier run built it for the same project
    digest, one builder at a time: ``tests/integration/homes.py``), a baseline restatement of
    its own late data, then late rows for closed days landed (not ingested)."""
    from tardy.ingest.landing import arrival_dir_name
    from tardy.requests.restatements import restate

    root = Path(os.environ["TARDY_HOME"])
    engine = _tests_module("homes").Engine()
    _tests_module("children").SMALL.copy_to(engine, root)  # opens the template's home to build it
    home, context, spark = engine.open(root)
    clock = _clock()
    restate(context, spark, "chaos: baseline")
    lines = _late_lines(home.landing)
    for n, chunk in enumerate((lines[:3], lines[3:])):
        folder = home.landing / "pos" / arrival_dir_name(clock + timedelta(hours=1 + n))
        folder.mkdir(parents=True)
        (folder / f"chaos-{n}.jsonl").write_text("\n".join(chunk) + "\n")
    from tardy.consumers.fingerprint import fingerprints
    from tardy.engine import log

    landed = {name: fp.as_dict() for name, fp in fingerprints(context, spark).items()}
    print(json.dumps({"landed": landed, "ids_before": sorted(log.latest(spark))}))


# -- checks (child process) ----------------------------------------------------------------


def _oracle() -> t.Any:
    return _tests_module("oracle")


def _landing_lines(landing: Path) -> Counter[tuple[str, int]]:
    """(file relative to the landing root, line number) of every landing line, read here."""
    lines: Counter[tuple[str, int]] = Counter()
    for path in sorted(landing.rglob("*.jsonl")):
        count = len(path.read_bytes().splitlines())
        for number in range(1, count + 1):
            lines[(path.relative_to(landing).as_posix(), number)] += 1
    return lines


def _bronze_lines(spark: t.Any) -> Counter[tuple[str, int]]:
    rows = spark.sql(  # sales in bronze.pos_events, store_master files in bronze.store_changes
        "SELECT source_file, line_number, COUNT(*) AS n FROM ("
        "SELECT source_file, line_number FROM bronze.pos_events UNION ALL "
        "SELECT source_file, line_number FROM bronze.store_changes"
        ") GROUP BY source_file, line_number"
    ).collect()
    return Counter({(r.source_file, int(r.line_number)): int(r.n) for r in rows})


def _reconciliation(spark: t.Any, landing: Path) -> list[str]:
    """Per day: bronze rows = silver + superseded + quarantined (bronze and superseded from
    the oracle, silver and quarantine from prod)."""
    oracle = _oracle()
    records = oracle.records(sorted(landing.rglob("*.jsonl")), landing)
    expected_silver = oracle.silver(records)
    valid = records[records["valid"]]
    bronze = Counter(str(d) for d in records["report_date"])
    superseded = Counter(str(d) for d in valid["event_date"])
    superseded.subtract(Counter(str(d) for d in expected_silver["event_date"]))
    silver = {
        str(r.d): int(r.n)
        for r in spark.sql(
            "SELECT event_date AS d, COUNT(*) AS n FROM silver.sales_transactions GROUP BY 1"
        ).collect()
    }
    quarantined = {
        str(r.d): int(r.n)
        for r in spark.sql(
            "SELECT report_date AS d, COUNT(*) AS n FROM silver.sales_quarantine GROUP BY 1"
        ).collect()
    }
    problems = []
    for day in sorted(set(bronze) | set(silver) | set(quarantined)):
        total = silver.get(day, 0) + superseded.get(day, 0) + quarantined.get(day, 0)
        if bronze.get(day, 0) != total:
            problems.append(
                f"{day}: bronze {bronze.get(day, 0)} != silver {silver.get(day, 0)} + "
                f"superseded {superseded.get(day, 0)} + quarantined {quarantined.get(day, 0)}"
            )
    return problems


def _trail(spark: t.Any, latest: dict[str, str]) -> list[str]:
    """The change trail agrees with the log whatever was killed: no key twice in one
    restatement's step, and every rolled-back (or discarded) promotion reversed row for row,
    a promoted one not at all."""
    from tardy.engine.trail import TRAIL_TABLE

    if not spark.catalog.tableExists(TRAIL_TABLE):
        return []
    problems = []
    twice = spark.sql(
        f"SELECT restatement_id, action, model, row_key, event_date FROM {TRAIL_TABLE} "
        "GROUP BY ALL HAVING COUNT(*) > 1"
    ).collect()
    if twice:
        problems.append(f"change trail rows twice: {[tuple(r) for r in twice[:3]]}")
    counts = {
        (r.restatement_id, r.action): int(r.n)
        for r in spark.sql(
            f"SELECT restatement_id, action, COUNT(*) AS n FROM {TRAIL_TABLE} GROUP BY 1, 2"
        ).collect()
    }
    for rid, state in latest.items():
        promoted, reversed_ = counts.get((rid, "promoted"), 0), counts.get((rid, "rolled_back"), 0)
        if state == "promoted" and reversed_:
            problems.append(f"{rid} is promoted, but its trail rows are reversed")
        if state in ("rolled_back", "discarded") and promoted != reversed_:
            problems.append(f"{rid} is {state}: {promoted} trail rows, {reversed_} reversed")
    return problems


def _states(fingerprints: dict[str, t.Any], before: dict, after: dict) -> dict[str, str]:
    return {
        table: "before" if fp == before[table] else "after" if fp == after[table] else "MIXED"
        for table, fp in fingerprints.items()
    }


def _cli(*argv: str) -> int:
    from tardy.cli import main

    return main(list(argv))


@dataclass
class Check:
    phase: str = ""
    recovery: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def check_trial(spec_path: Path) -> None:
    """Child: the state after the kill, the documented recovery, the final invariants."""
    from tardy.consumers.fingerprint import fingerprints
    from tardy.engine import log
    from tardy.engine.detect import detect
    from tardy.project.context import open_context, spark_of
    from tardy.project.home import activate

    spec = json.loads(spec_path.read_text())
    home = activate()
    context = open_context()
    spark = spark_of(context)
    check = Check()
    states = spec["states"]
    command, rid = spec["command"], spec["restatement_id"]

    def fps() -> dict[str, t.Any]:
        return {name: fp.as_dict() for name, fp in fingerprints(context, spark).items()}

    def latest() -> dict[str, str]:
        return {i: str(row.action) for i, row in log.latest(spark).items()}

    # 1. What the kill left.
    killed = _states(fps(), states[spec["before"]], states[spec["after"]])
    mixed = sorted(table for table, state in killed.items() if state == "MIXED")
    if mixed:
        check.problems.append(f"after the kill, tables in neither state: {mixed}")
    twice = [key for key, n in _bronze_lines(spark).items() if n > 1]
    if twice:
        check.problems.append(f"after the kill, landing lines twice in bronze: {twice[:3]}")
    actions = latest()
    kept = sum(state == "after" for state in killed.values())
    if command == "ingest":
        committed = bool(_bronze_lines(spark).keys() - {tuple(x) for x in spec["bronze_before"]})
        check.phase = "bronze committed" if committed else "before the bronze commit"
    else:
        new = sorted(set(actions) - set(spec["ids_before"]))
        rid = rid or (new[-1] if new else "")
        check.phase = f"log: {actions.get(rid, 'no row')}, {kept}/{len(killed)} tables after"
        if command == "restate" and actions.get(rid) == "staged":
            check.problems.append("a killed `tardy restate` left its restatement staged")

    # 2. The documented recovery (README): re-run what was interrupted.
    def run(*argv: str) -> int:
        code = _cli(*argv)
        check.recovery.append(f"{argv[0]}→{code}")
        return code

    if command == "ingest":
        run("ingest")
        run("restate", "--reason", "chaos: recovery")
    elif command == "restate":
        run("restate", "--reason", "chaos: recovery")
    elif command == "promote":
        if latest().get(rid) in {"staged", "promoting"}:
            run("promote", rid)
        run("restate", "--reason", "chaos: recovery")
    else:  # rollback
        if latest().get(rid) in {"promoted", "rolling_back"}:
            run("rollback", rid, "--reason", "chaos: recovery")
        if _states(fps(), states["landed"], states["landed"]) != {
            table: "before" for table in states["landed"]
        }:
            check.problems.append("after the rollback's recovery, prod is not as before")
        if not any(detect(context, spark).impacted.values()):
            check.problems.append("rolled back, but the watermark hides the late days")
        run("restate", "--reason", "chaos: absorb again")

    # 3. The final invariants.
    final = _states(fps(), states["promoted"], states["promoted"])
    wrong = sorted(table for table, state in final.items() if state != "before")
    if wrong:
        check.problems.append(f"after recovery, tables not in the expected state: {wrong}")
    landing_lines = _landing_lines(home.landing)
    bronze_lines = _bronze_lines(spark)
    if bronze_lines != landing_lines:
        missing = landing_lines - bronze_lines
        extra = bronze_lines - landing_lines
        check.problems.append(
            f"bronze != landing lines: missing {list(missing)[:3]}, extra {list(extra)[:3]}"
        )
    open_ = {i: a for i, a in latest().items() if a not in TERMINAL}
    if open_:
        check.problems.append(f"restatements not in a terminal state: {open_}")
    if any(detect(context, spark).impacted.values()):
        check.problems.append("prod holds the late data, but detect still finds late days")
    check.problems.extend(_reconciliation(spark, home.landing))
    check.problems.extend(_trail(spark, latest()))
    Path(spec["result"]).write_text(json.dumps(asdict(check)))


# -- the harness ---------------------------------------------------------------------------


ENGINES = ("in-process", "warm")
# A check (the state after the kill, the recovery, the invariants) takes 1-3 minutes here;
# one that waits past this bound fails its trial with the engine's state instead of hanging
# the run (a wedged engine: docs/warm-engine.md, "The watchdog").
CHECK_TIMEOUT = float(os.environ.get("CHAOS_CHECK_TIMEOUT", "900"))


@dataclass
class Trial:
    number: int
    command: str
    delay: float
    engine: str = "in-process"
    exit: str = ""
    phase: str = ""
    recovery: str = ""
    verdict: str = ""
    problems: list[str] = field(default_factory=list)


class Harness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.templates = root / "templates"
        self.logs = root / "logs"
        # Templates are built in-process; a trial picks its path (``trial_env``).
        self.env = {**os.environ, "TARDY_HOME": str(self.home), "TARDY_ENGINE": "off"}
        self.env.pop("TARDY_FAILPOINT", None)
        self.meta: dict[str, t.Any] = {}

    def _run(self, *args: str, log: str) -> tuple[subprocess.CompletedProcess, float]:
        started = time.perf_counter()
        with open(self.logs / f"{log}.log", "w") as out:
            done = subprocess.run(
                args, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=out, text=True
            )
        (self.logs / f"{log}.out").write_text(done.stdout)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): see {self.logs}")
        return done, time.perf_counter() - started

    def _tardy(self, *args: str, log: str) -> tuple[str, float]:
        done, seconds = self._run(str(BIN / "tardy"), *args, log=log)
        return done.stdout, seconds

    def _save(self, name: str) -> None:
        shutil.copytree(self.home, self.templates / name, symlinks=True)

    def stop_engine(self) -> None:
        from tardy.runtime import warm

        warm.stop(warm.Paths(self.home))

    def engine_state(self, env: dict[str, str]) -> str:
        """``tardy engine status``'s state and probe, itself bounded."""
        try:
            done = subprocess.run(
                [str(BIN / "tardy"), "engine", "status", "--json"],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            status = json.loads(done.stdout)
        except (subprocess.TimeoutExpired, ValueError) as error:
            return f"`tardy engine status` did not answer ({type(error).__name__})"
        probe = status.get("probe") or {}
        return f"{status['state']} (probe: {probe.get('error') or probe.get('seconds')})"

    def restore(self, name: str) -> None:
        self.stop_engine()  # never swap a home's files under its running engine
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.copytree(self.templates / name, self.home, symlinks=True)

    def _fingerprint(self, log: str) -> dict[str, t.Any]:
        return json.loads(self._tardy("fingerprint", "--json", log=log)[0])

    def build(self, commands: set[str]) -> None:
        """The templates ``commands`` need, the prod states and the un-killed commands'
        durations (a run of ingest and restate trials only needs no staged template)."""
        meta_path = self.root / "templates.json"
        if meta_path.exists():
            self.meta = json.loads(meta_path.read_text())
            if commands <= set(self.meta["commands"]):
                return
        shutil.rmtree(self.root, ignore_errors=True)
        self.logs.mkdir(parents=True)
        done, _ = self._run(str(BIN / "python"), __file__, "--build-base", log="build-base")
        base = json.loads(done.stdout.strip().splitlines()[-1])
        landed = base["landed"]
        bronze_before = self._bronze_lines_of_template()
        self._save("landed")
        seconds: dict[str, float] = {}
        _, seconds["ingest"] = self._tardy("ingest", log="template-ingest")
        self._save("ingested")
        rid = ""
        if commands & {"promote", "rollback"}:
            out, stage = self._tardy(
                "restate", "--reason", "chaos", "--no-promote", "--json", log="template-restate"
            )
            rid = json.loads(out)["restatement_id"]
            self._save("staged")
            _, seconds["promote"] = self._tardy("promote", rid, "--json", log="template-promote")
            seconds["restate"] = stage + seconds["promote"]  # two process starts: one less below
        else:
            _, seconds["restate"] = self._tardy(
                "restate", "--reason", "chaos", "--json", log="template-restate"
            )
        started = time.perf_counter()
        promoted = self._fingerprint("fingerprint-promoted")
        startup = time.perf_counter() - started  # a process that reads 6 small tables
        if rid:  # `tardy restate` is one process: the staging one's and promote's, less a start
            seconds["restate"] = max(seconds["restate"] - startup, startup)
        if promoted == landed:
            raise SystemExit("template: the late rows changed nothing in prod")
        if "rollback" in commands:
            self._save("promoted")
            _, seconds["rollback"] = self._tardy(
                "rollback", rid, "--reason", "chaos", "--json", log="template-rollback"
            )
            if self._fingerprint("fingerprint-rolled-back") != landed:
                raise SystemExit("template: the rollback did not restore prod as landed")
        self.meta = {
            "commands": sorted(commands),
            "restatement_id": rid,
            "states": {"landed": landed, "promoted": promoted},
            "bronze_before": bronze_before,
            "ids_before": base["ids_before"],
            "startup": startup,
            "seconds": seconds,
        }
        meta_path.write_text(json.dumps(self.meta))

    def _bronze_lines_of_template(self) -> list[list[t.Any]]:
        """The landing lines bronze holds before the late files are ingested."""
        landing = self.home / "landing"
        return [
            [path.relative_to(landing).as_posix(), n]
            for path in sorted(landing.rglob("*.jsonl"))
            if not path.name.startswith("chaos-")
            for n in range(1, len(path.read_bytes().splitlines()) + 1)
        ]

    def trial(self, trial: Trial) -> Trial:
        template, argv, before, after = {
            "ingest": ("landed", ["ingest"], "landed", "landed"),
            "restate": (
                "ingested",
                ["restate", "--reason", "chaos", "--json"],
                "landed",
                "promoted",
            ),
            "promote": (
                "staged",
                ["promote", self.meta["restatement_id"], "--json"],
                "landed",
                "promoted",
            ),
            "rollback": (
                "promoted",
                ["rollback", self.meta["restatement_id"], "--reason", "chaos", "--json"],
                "promoted",
                "landed",
            ),
        }[trial.command]
        self.restore(template)
        env = {**self.env, "TARDY_ENGINE": "on" if trial.engine == "warm" else "off"}
        if trial.engine == "warm":  # started first: the kill lands in the command's work
            subprocess.run(
                [str(BIN / "tardy"), "engine", "start"], cwd=ROOT, env=env, check=True,
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
        log = self.logs / f"trial-{trial.number:02d}-{trial.command}.log"
        with open(log, "w") as out:
            process = subprocess.Popen(
                [str(BIN / "tardy"), *argv],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                process.wait(timeout=trial.delay)
                trial.exit = f"done first (exit {process.returncode})"
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                trial.exit = f"at {trial.delay:.1f}s"
        spec = {
            "command": trial.command,
            "restatement_id": self.meta["restatement_id"]
            if trial.command in ("promote", "rollback")
            else "",
            "states": self.meta["states"],
            "before": before,
            "after": after,
            "bronze_before": [tuple(x) for x in self.meta["bronze_before"]],
            "ids_before": self.meta["ids_before"],
            "result": str(self.root / "check.json"),
        }
        spec_path = self.root / "spec.json"
        spec_path.write_text(json.dumps(spec))
        Path(spec["result"]).unlink(missing_ok=True)
        with open(self.logs / f"trial-{trial.number:02d}-check.log", "w") as out:
            check = subprocess.Popen(
                [str(BIN / "python"), __file__, "--check", str(spec_path)],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            timed_out = False
            try:
                check.wait(timeout=CHECK_TIMEOUT)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(check.pid, signal.SIGKILL)
                check.wait()
        engine = self.engine_state(env) if timed_out else ""
        self.stop_engine()
        if timed_out:
            trial.problems = [
                f"the check waited past {CHECK_TIMEOUT:.0f} s; the engine: {engine}; see {out.name}"
            ]
        elif check.returncode != 0 or not Path(spec["result"]).exists():
            trial.problems = [f"the check process failed ({check.returncode}): {out.name}"]
        else:
            result = json.loads(Path(spec["result"]).read_text())
            trial.phase, trial.problems = result["phase"], result["problems"]
            trial.recovery = ", ".join(result["recovery"]) or "none needed"
        trial.verdict = "FAIL" if trial.problems else "ok"
        return trial


def planned_commands(trials: int) -> list[str]:
    """The command of each trial: in turn, so that each gets trials/4."""
    return [COMMANDS[n % len(COMMANDS)] for n in range(trials)]


def plan(seed: int, trials: int, seconds: dict[str, float], startup: float) -> list[Trial]:
    """Commands in turn (each gets trials/4), each on both paths in turn; a delay drawn
    uniformly between half the start-up of a process (JVM, metastore) and the command's
    un-killed duration, so that most kills land while the command works rather than while
    its JVM starts. On the warm engine there is no JVM to start: between 1 s (the client's
    imports and connection) and the command's in-process duration less that start-up."""
    rnd = random.Random(seed)
    commands = planned_commands(trials)
    planned = []
    for n, command in enumerate(commands):
        engine = ENGINES[(n // len(COMMANDS) + n) % len(ENGINES)]
        # `--only K` builds K's templates alone: the other trials' bounds are placeholders,
        # each draw still takes one number, so trial K gets its delay of the full run.
        took = seconds.get(command, startup)
        if engine == "warm":
            low, high = 1.0, max(took - startup, 2.0)
        else:
            low, high = startup / 2, max(took, startup)
        delay = round(rnd.uniform(low, high), 1)
        planned.append(Trial(number=n, command=command, delay=delay, engine=engine))
    return planned


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", type=int, help="replay this trial number alone")
    parser.add_argument("--build-base", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--check", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_base:
        build_base()
        return 0
    if args.check:
        check_trial(args.check)
        return 0

    from rich.console import Console
    from rich.table import Table

    console = Console(width=80)
    root = Path(os.environ.get("TARDY_HOME", ROOT / ".tardy" / "chaos")).resolve()
    harness = Harness(root)
    started = time.perf_counter()
    console.print(f"chaos: seed {args.seed}, {args.trials} trials, under {root}")
    commands = planned_commands(args.trials)
    harness.build({commands[args.only]} if args.only is not None else set(commands))
    console.print(
        "templates built; un-killed durations (s): "
        + ", ".join(f"{k} {v:.0f}" for k, v in harness.meta["seconds"].items())
    )
    trials = plan(args.seed, args.trials, harness.meta["seconds"], harness.meta["startup"])
    if args.only is not None:
        trials = [trials[args.only]]
    done = []
    for trial in trials:
        done.append(harness.trial(trial))
        console.print(
            f"trial {trial.number}: {trial.command} ({trial.engine}) {trial.exit}; "
            f"{trial.phase}; {trial.verdict}"
        )
        for problem in trial.problems:
            console.print(f"  [red]{problem}[/]")
    table = Table(title=f"chaos, seed {args.seed}", width=80)
    for column in ("#", "command", "killed", "phase killed in", "recovery", "verdict"):
        table.add_column(column, overflow="fold")
    for trial in done:
        table.add_row(
            str(trial.number),
            f"{trial.command} ({trial.engine})",
            trial.exit,
            trial.phase,
            trial.recovery,
            trial.verdict,
        )
    console.print(table)
    failed = [trial.number for trial in done if trial.problems]
    console.print(
        f"{len(done) - len(failed)}/{len(done)} trials passed in "
        f"{time.perf_counter() - started:.0f}s"
        + (
            f"; replay: TARDY_HOME={root} {sys.executable} bench/chaos.py "
            f"--seed {args.seed} --only {failed[0]}"
            if failed
            else ""
        )
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
