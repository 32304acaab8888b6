"""Print each test module's CPU-seconds in a run beside its budget in docs/testing.md.

The run's figures are the JSON lines ``tests/conftest.py`` appends to ``$TARDY_TEST_CPU`` (one
per module and worker: its worker's CPU, its JVM and reaped children included); the budget is
the table between ``<!-- budget`` and ``<!-- /budget -->`` in docs/testing.md. A report, not
a gate: it exits 0 whatever it finds (speed targets are never assertions here)."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "testing.md"


def budget() -> dict[str, float]:
    text = DOC.read_text()
    if "<!-- budget" not in text:
        return {}
    table = text.split("<!-- budget", 1)[1].split("<!-- /budget -->", 1)[0]
    found = {}
    for line in table.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[1].replace(",", "").replace(".", "").isdigit():
            found[cells[0]] = float(cells[1].replace(",", ""))
    return found


def main(path: Path) -> None:
    if not path.exists():
        print(f"no CPU record at {path}")
        return
    measured: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    for line in path.read_text().splitlines():
        row = json.loads(line)
        measured[row["module"]] += row["cpu_seconds"]
        wall[row["module"]] += row["wall_seconds"]
    limits = budget()
    total = sum(measured.values())
    print(f"--- CPU-seconds per test module ({total:.0f} in all; budget: docs/testing.md) ---")
    over = []
    for module, seconds in sorted(measured.items(), key=lambda m: -m[1]):
        limit = limits.get(module)
        mark = ""
        if limit is not None and seconds > limit:
            mark, over = "  OVER", [*over, module]
        shown = "-" if limit is None else f"{limit:.0f}"
        print(f"{seconds:7.0f}  (budget {shown:>5}, wall {wall[module]:5.0f} s)  {module}{mark}")
    if over:
        print(f"over budget: {', '.join(over)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
