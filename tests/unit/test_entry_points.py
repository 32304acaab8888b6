"""The ``python -m tardy.…`` commands the README and the docs name run: each is a module (or a
package with ``__main__``) that runs when executed, so a move in the tree never strands one."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"python -m (tardy(?:\.\w+)*)")


def named() -> set[str]:
    texts = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").rglob("*.md"))]
    return {m for path in texts for m in COMMAND.findall(path.read_text())}


def test_every_named_command_is_a_runnable_module() -> None:
    commands = named()
    assert "tardy.homecopy" in commands  # the README's
    for name in sorted(commands):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, f"python -m {name}: no such module"
        if spec.submodule_search_locations:  # a package: its __main__ runs
            spec = importlib.util.find_spec(f"{name}.__main__")
            assert spec is not None and spec.origin is not None, f"python -m {name}: no __main__"
        runs = spec.origin.endswith("__main__.py") or "__main__" in Path(spec.origin).read_text()
        assert runs, f"python -m {name} runs nothing"


def test_the_readme_home_copy_command_answers() -> None:
    """``python -m tardy.homecopy`` without its two paths prints its usage, exit 2."""
    done = subprocess.run(
        [sys.executable, "-m", "tardy.homecopy"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "usage: python -m tardy.homecopy SRC DEST"
