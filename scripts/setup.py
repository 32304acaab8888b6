"""``make setup``: the virtualenv, tardy's packages, Delta's jars and the JVM class archive.

One line per step with its time. A step's own output (pip's resolver, Ivy's jar resolver,
the training JVM's warnings) goes to its log under ``<venv>/setup-logs/``; it is shown only
when the step fails: then its last lines and where the whole log is, and the step's exit
code is this script's. The extras' packages install while the jars download and the archive
is built (neither needs them).

Standard library only: it runs on the system Python before the virtualenv exists.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

TAIL = 30  # lines of a failed step's log shown
WIDTH = 80  # every line fits a terminal's width
EXTRAS = ("dev", "cluster", "ml")  # pyproject.toml's optional dependencies installed
CANNOT_RUN = 127  # a step whose program cannot be started, as a shell says it


class StepFailed(Exception):
    """A step exited non-zero; ``code`` is its exit code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class Step:
    """A command run with its output in ``log``."""

    name: str
    argv: list[str]
    log: Path
    started: float = field(default=0.0)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> Step:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.started = time.perf_counter()
        with open(self.log, "wb") as out:
            try:
                self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT)
            except OSError as error:  # no such program: a failure like any other, in its log
                out.write(f"cannot run {self.argv[0]}: {error}\n".encode())
        return self

    def finish(self) -> str:
        """Wait for the step; its line, or :class:`StepFailed` after its log's tail."""
        code = CANNOT_RUN if self.process is None else self.process.wait()
        seconds = time.perf_counter() - self.started
        lines = self.log.read_text(errors="replace").splitlines()
        if code != 0:
            tail = lines[-TAIL:]
            print(
                f"setup: {self.name} failed (exit {code}) after {seconds:.1f} s; "
                f"the last {len(tail)} lines of its log:",
                *(f"  {line}" for line in tail),
                f"the whole log: {self.log}",
                sep="\n",
                file=sys.stderr,
            )
            raise StepFailed(code)
        # The step's last line says what it made (the jars' and the archive's), when it says.
        said = next((line.strip() for line in reversed(lines) if line.strip()), "")
        return _fit(f"setup: {self.name:<17}{seconds:6.1f} s  {said}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait()


def _fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 3] + "..."


def extras(pyproject: Path) -> list[str]:
    """The requirements of the extras, for one pip call."""
    optional = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    return [requirement for extra in EXTRAS for requirement in optional[extra]]


def setup(root: Path, venv: Path, python: str) -> None:
    logs = venv / "setup-logs"
    bin_python = str(venv / "bin" / "python")
    pip = [bin_python, "-m", "pip", "install", "--quiet", "-c", str(root / "constraints.txt")]
    began = time.perf_counter()
    if not (venv / "bin" / "python").exists():
        # Its log is in the venv's folder: venv accepts a folder that exists.
        made = Step("virtualenv", [python, "-m", "venv", str(venv)], logs / "venv.log")
        print(made.start().finish())
    package = Step("tardy package", [*pip, "-e", str(root)], logs / "package.log")
    print(package.start().finish())
    beside = Step("extras' packages", [*pip, *extras(root / "pyproject.toml")], logs / "extras.log")
    beside.start()
    try:
        install = [bin_python, "-m", "tardy.runtime.jars", "install"]
        jars = Step("Delta jars", install, logs / "jars.log")
        print(jars.start().finish())
        archive = [bin_python, "-m", "tardy.runtime.jvm", "archive"]
        print(Step("JVM class archive", archive, logs / "archive.log").start().finish())
        print(beside.finish())
    finally:
        beside.stop()
    print(_fit(f"setup: done in {time.perf_counter() - began:.1f} s (logs: {logs})"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=".venv", help="the virtualenv's folder")
    parser.add_argument("--python", default=sys.executable, help="the Python that makes it")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    try:
        setup(root, (root / args.venv).resolve(), args.python)
    except StepFailed as failed:
        return failed.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
