"""The README's 5-minute tour, run as written: every command of its code blocks, in order,
from ``## A 5-minute tour`` through the named restatement (``### Request files`` and what
follows are exercised by their own modules).

Commands run in this worker's warm engine (``tardy`` through its ``main``, the stock
``sqlmesh`` through its click group), not as processes: what the commands do is the subject
here, ``test_cli`` covers the processes. ``<id>`` is the id the staging command printed; of
two alternatives (``# or, ...``) the first runs; the SQL a comment gives for "any Spark SQL
client" runs on the engine's session; ``cat`` reads the file. Each command must exit 0 and
the review must show what the README says it shows.
"""

from __future__ import annotations

import io
import re
import shlex
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from children import cli_in_process

from tardy.project.home import project_root

ID = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-z_]+\b")
SQL_COMMENT = "# any Spark SQL client: "


def tour_commands(readme: str) -> list[str]:
    """The tour's commands in order: the lines of its ``bash`` blocks, alternatives after
    an ``# or`` comment left out, the Spark SQL comment kept."""
    section = readme.split("## A 5-minute tour", 1)[1].split("### Request files", 1)[0]
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        alternative = False
        for line in block.splitlines():
            line = line.strip()
            if line.startswith("# or"):
                alternative = True
            elif line.startswith(SQL_COMMENT) or (line and not line.startswith("#")):
                if not alternative:
                    commands.append(line)
                alternative = False
    return commands


def _sqlmesh(*argv: str) -> tuple[int, str]:
    from sqlmesh.cli.main import cli

    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(out):
        try:
            cli.main(
                args=["--paths", str(project_root()), *argv],
                prog_name="sqlmesh",
                standalone_mode=False,
            )
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue()


def test_every_command_of_the_tour_parses_as_written() -> None:
    """The fast tier's guard of the tour (long tier: the next test runs it): each of its
    ``tardy`` commands is accepted by tardy's own parser, each ``sqlmesh`` one by the stock
    CLI's click group (the command and its options exist), in the order the README gives."""
    from sqlmesh.cli.main import cli as sqlmesh_cli

    from tardy.cli import build_parser

    commands = tour_commands((project_root() / "README.md").read_text())
    assert commands[0].startswith("export TARDY_HOME=")
    programs = []
    for command in commands[1:]:
        if command.startswith(SQL_COMMENT):
            continue
        argv = shlex.split(command.replace("<id>", "20260101T000000Z-tour").replace("$", ""))
        programs.append(argv[0])
        if argv[0] == ".venv/bin/tardy":
            try:
                parsed = build_parser().parse_args(argv[1:])
            except SystemExit as refused:
                raise AssertionError(f"{command}: tardy's parser refused it") from refused
            assert callable(parsed.func), command
        elif argv[0] == ".venv/bin/sqlmesh":
            name, *rest = argv[1:]
            sub = sqlmesh_cli.commands.get(name)
            assert sub is not None, f"{command}: no sqlmesh command {name}"
            context = sub.make_context(name, list(rest), resilient_parsing=False)
            assert context.params, command
        else:
            assert argv[0] == "cat", command
    assert programs.count(".venv/bin/tardy") >= 5 and ".venv/bin/sqlmesh" in programs


# Long tier: the tour's restatements (in this worker's engine). Its fast guard: the test
# above (every command parses), the named restatements of test_small_checks.
@pytest.mark.long
def test_the_readme_tour_runs_as_written(engine, tmp_path_factory: pytest.TempPathFactory) -> None:
    readme = (project_root() / "README.md").read_text()
    commands = tour_commands(readme)
    assert commands[0].startswith("export TARDY_HOME=")
    assert any(c.startswith(".venv/bin/tardy restate --model") for c in commands)  # named
    home, _, spark = engine.open(tmp_path_factory.mktemp("tour") / "home")
    restatement_id = None
    outputs: dict[str, str] = {}
    for command in commands[1:]:
        if "<id>" in command:
            assert restatement_id, f"{command}: no id printed before it"
            command = command.replace("<id>", restatement_id)
        if command.startswith(SQL_COMMENT):
            rows = spark.sql(command.removeprefix(SQL_COMMENT)).collect()
            assert rows, command  # the environment view reads the staged day
            continue
        argv = shlex.split(command.replace("$TARDY_HOME", str(home.root)))
        if argv[0] == "cat":
            text = Path(argv[1]).read_text()
            assert restatement_id in text and "| model | interval |" in text, text[:500]
            continue
        program, args = argv[0], argv[1:]
        if program == ".venv/bin/tardy":
            code, out, err = cli_in_process(*args)
            output = out + err
        else:
            assert program == ".venv/bin/sqlmesh", command
            code, output = _sqlmesh(*args)
        assert code == 0, f"{command}\n{output[-3000:]}"
        outputs[command] = output
        if restatement_id is None and "--no-promote" in args:
            found = ID.findall(" ".join(output.split()))
            assert found, output[-2000:]
            restatement_id = found[0]
    # What the tour says each step shows.
    detect = outputs[".venv/bin/tardy detect"]
    assert "silver.sales_transactions" in detect and "sqlmesh plan --restate-model" in detect
    promoted = outputs[f".venv/bin/tardy promote {restatement_id}"]
    assert "Promoted" in promoted or "promoted" in promoted
    log = outputs[".venv/bin/tardy log"]
    assert restatement_id in " ".join(log.split())
    history = outputs[".venv/bin/tardy history S001-20260102-00044"]
    assert "S001-20260102-00044" in history
