"""Print, last in CI's output, where each failing test failed and the first lines of its error.

CI's log is read from its head and tail; a long test's traceback (its source, then a JVM stack
trace) would push the failing line and the exception's own message out of both. Reads the
JUnit XML pytest wrote (``--junitxml``); prints nothing when every test passed.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

LOCATION = re.compile(r"^(tests/\S+\.py|src/\S+\.py):(\d+): ", re.MULTILINE)
MESSAGE_LINES = 12


def main(path: Path) -> None:
    if not path.exists():
        print(f"no test report at {path}")
        return
    for case in ET.parse(path).iter("testcase"):
        for problem in (*case.iter("failure"), *case.iter("error")):
            test = f"{case.get('classname')}::{case.get('name')}"
            print(f"--- {problem.tag}: {test}")
            text = problem.text or ""
            for match in LOCATION.finditer(text):
                print(f"  at {match.group(1)}:{match.group(2)}")
            message = (problem.get("message") or "").splitlines()
            for line in message[:MESSAGE_LINES]:
                print(f"  | {line[:300]}")
            if len(message) > MESSAGE_LINES:
                print(f"  | ... ({len(message) - MESSAGE_LINES} more lines)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
