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


@pytest.mark.parametrize(
    ("name", "setting", "replaced", "named"),
    [
        (
            "project.yaml",
            "headline_model: gold.daily_store_revenue",
            "headline_model: gold.daily_sales",
            "project.yaml: headline_model names gold.daily_sales, which is not a model",
        ),
        (
            "sources.yaml",
            "rules: invalid_reason",
            "rules: sale_rules",
            "field 'rules' names the macro @sale_rules, which the project's macros/ do not",
        ),
    ],
)
def test_a_setting_that_names_nothing_the_project_has_exits_1_in_one_line(
    engine,
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    setting: str,
    replaced: str,
    named: str,
) -> None:
    """A copy of the project whose one setting names what it lacks: every command stops as
    it loads the project (before it reads a table), one line naming the setting and its
    file. Loading starts Spark for this home (SQLMesh asks the engine its default catalog),
    so the command runs as ``engine.foreign``, which closes that session after it."""
    from test_code_change import copy_project

    from tardy.runtime.warm import ENGINE_VARIABLE

    project = copy_project(tmp_path / "project")
    path = project / name
    text = path.read_text()
    assert setting in text
    path.write_text(text.replace(setting, replaced, 1))
    monkeypatch.setenv("TARDY_PROJECT", str(project))
    monkeypatch.setenv("TARDY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TARDY_SOURCES", raising=False)
    monkeypatch.setenv(ENGINE_VARIABLE, "off")  # in this process, not a warm engine
    with engine.foreign(tmp_path / "home"):
        code, out, err = cli_in_process("status")
    lines = [line for line in err.splitlines() if line.strip()]
    assert (code, len(lines)) == (1, 1), err
    assert lines[0].startswith("error: ") and named in lines[0] and "Traceback" not in out + err
