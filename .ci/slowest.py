"""Print the slowest tests of a run from pytest's JUnit XML (``--junitxml``): each test's
time, setup included (pytest's ``--durations`` lists setup and call apart)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

COUNT = 15


def main(path: Path) -> None:
    if not path.exists():
        print(f"no test report at {path}")
        return
    cases = [
        (float(case.get("time") or 0.0), f"{case.get('classname')}::{case.get('name')}")
        for case in ET.parse(path).iter("testcase")
    ]
    print(f"--- the {COUNT} slowest of {len(cases)} tests (setup + call + teardown) ---")
    for seconds, test in sorted(cases, reverse=True)[:COUNT]:
        print(f"{seconds:8.1f} s  {test}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
