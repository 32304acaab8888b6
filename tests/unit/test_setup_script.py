"""``make setup``'s steps (``scripts/setup.py``), on real processes: a step that succeeds is
one line with its time, its own output only in its log; a step that fails shows its log's
last lines and where the whole log is, and its exit code is the script's. (That a fresh
clone's whole ``make setup`` fits one screen is checked by ``.ci/run``.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "setup.py"
spec = importlib.util.spec_from_file_location("tardy_setup_script", SCRIPT)
assert spec is not None and spec.loader is not None
setup_script = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = setup_script  # dataclasses resolve the module's annotations by name
spec.loader.exec_module(setup_script)

NOISY = "import sys\nfor i in range(100): print(f'resolver line {i}')\nprint('made it')\n"


def test_a_step_that_succeeds_is_one_line_and_its_output_stays_in_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "logs" / "noisy.log"
    step = setup_script.Step("noisy step", [sys.executable, "-c", NOISY], log)
    line = step.start().finish()
    assert line.startswith("setup: noisy step") and line.endswith(" s  made it")
    assert len(line) <= 80
    assert capsys.readouterr() == ("", "")  # nothing printed by the step itself
    assert "resolver line 99" in log.read_text()


def test_a_long_line_is_cut_to_the_terminal_width(tmp_path: Path) -> None:
    said = "x" * 200
    step = setup_script.Step("wide", [sys.executable, "-c", f"print('{said}')"], tmp_path / "w")
    line = step.start().finish()
    assert len(line) == 80 and line.endswith("...")


def test_a_failing_step_shows_its_tail_and_its_log_and_keeps_its_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "failing.log"
    failing = NOISY + "sys.exit(7)\n"
    step = setup_script.Step("failing step", [sys.executable, "-c", failing], log)
    with pytest.raises(setup_script.StepFailed) as failed:
        step.start().finish()
    assert failed.value.code == 7
    out, err = capsys.readouterr()
    assert out == ""
    shown = err.splitlines()
    assert shown[0].startswith("setup: failing step failed (exit 7)")
    # The last 30 lines of the log (the 71st resolver line to the step's last), then where
    # the whole log is.
    assert shown[1:-1] == [f"  resolver line {i}" for i in range(71, 100)] + ["  made it"]
    assert shown[-1] == f"the whole log: {log}"


def test_the_script_exits_with_the_failing_steps_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The virtualenv's step, given a Python that does not exist: ``main`` returns 127 (as a
    shell does for a missing program), not 0, and says which program and where its log is;
    no later step ran."""
    missing = tmp_path / "no-such-python"
    venv = tmp_path / "venv"
    assert setup_script.main(["--venv", str(venv), "--python", str(missing)]) == 127
    out, err = capsys.readouterr()
    assert out == ""
    assert f"cannot run {missing}" in err
    assert f"the whole log: {venv / 'setup-logs' / 'venv.log'}" in err
    assert sorted(p.name for p in (venv / "setup-logs").iterdir()) == ["venv.log"]
