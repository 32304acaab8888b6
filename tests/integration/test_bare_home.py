"""Every read command on a data home that holds none of the tables it reads (no ingest, no
plan yet), through the CLI's entry point in-process on real Spark + Delta: each answers, or
says in one line what is missing; none ends in a Python traceback."""

from __future__ import annotations

import pytest
from children import cli_in_process

# Every command that reads the home, with the arguments it needs.
READS = [
    ("status",),
    ("status", "--json"),
    ("status", "--check"),
    ("summary",),
    ("detect",),
    ("log",),
    ("grace",),
    ("history", "K-1"),
    ("report",),
    ("fingerprint",),
    ("versions",),
    ("card", "gold.daily_store_revenue"),
    ("quarantine",),
    ("notifications",),
    ("models",),
]


@pytest.fixture(scope="module")
def answers(engine, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], tuple]:
    root = tmp_path_factory.mktemp("bare") / "home"
    engine.open(root)
    try:
        return {argv: cli_in_process(*argv) for argv in READS}
    finally:
        engine.release()


@pytest.mark.parametrize("argv", READS, ids=" ".join)
def test_a_read_command_on_a_bare_home_answers_or_says_one_line(answers, argv) -> None:
    code, out, err = answers[argv]
    assert "Traceback" not in out + err, (argv, out[-2000:], err[-2000:])
    if code not in (0, 4):  # 4: status --check's alerts
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 1 and len(lines) == 1 and lines[0].startswith("error:"), (argv, code, err)


def test_status_on_a_bare_home_says_bronze_is_empty(answers) -> None:
    code, out, _ = answers[("status",)]
    assert code == 0 and "Bronze is empty" in out
