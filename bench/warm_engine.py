"""Issue 13, point 4: fresh CLI processes on the demo's data home, `local` against `connect`.

Builds the demo's data home twice from the same simulation: `tardy demo` on the embedded
`local` gateway, and `tardy --gateway connect demo` against a local cluster started here
(`python -m tardy.cluster up`, its own home, default ports unless the TARDY_*_PORT variables
say otherwise). Then times `tardy status`, `tardy detect` and a `sqlmesh run` with nothing to
do, each as a fresh process, ``--repeat`` times per gateway, and compares the two demo
homes' content hashes (`tardy fingerprint`). Prints a Markdown table and writes JSON.

    .venv/bin/python bench/warm_engine.py --out /tmp/warm.json [--keep-cluster]

Run it alone on the machine: it measures wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tardy.simulate import SimulationConfig

ROOT = Path(__file__).resolve().parent.parent
SQLMESH = str(Path(sys.executable).parent / "sqlmesh")
TARDY = (sys.executable, "-m", "tardy.cli")
COMMANDS = {
    "tardy status": (*TARDY, "status"),
    "tardy detect": (*TARDY, "detect"),
    # The demo built every day through its simulated clock: nothing left to run.
    "sqlmesh run (nothing to do)": (SQLMESH, "run", "--end", str(SimulationConfig().last_day)),
}
CLEARED = ("TARDY_GATEWAY", "TARDY_SPARK_", "TARDY_PG_", "TARDY_WAREHOUSE", "TARDY_METASTORE_")


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
    return {**env, "TARDY_HOME": str(home), **extra}


def run(env: dict[str, str], *argv: str) -> tuple[float, str]:
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("warm-engine.json"))
    parser.add_argument("--keep-cluster", action="store_true")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="tardy-warm-"))
    work.chmod(0o711)  # PostgreSQL runs as user postgres
    cluster_env = environment(work / "cluster-home")
    seconds, exports = run(cluster_env, sys.executable, "-m", "tardy.cluster", "up")
    shared = dict(line.removeprefix("export ").split("=", 1) for line in exports.splitlines())
    homes = {
        "local": environment(work / "local", TARDY_GATEWAY="local"),
        "connect": environment(work / "connect", **shared, TARDY_GATEWAY="connect"),
    }
    result: dict[str, object] = {"cluster_up_s": round(seconds, 1), "demo_s": {}, "runs": {}}
    try:
        for gateway, env in homes.items():
            seconds, _ = run(env, *TARDY, "demo", "--json")
            result["demo_s"][gateway] = round(seconds, 1)  # type: ignore[index]
            print(f"demo on {gateway}: {seconds:.1f} s", file=sys.stderr, flush=True)
        prints = {
            g: json.loads(run(env, *TARDY, "fingerprint", "--json")[1]) for g, env in homes.items()
        }
        result["same_content_hashes"] = prints["local"] == prints["connect"]
        result["models"] = len(prints["local"])
        for name, argv in COMMANDS.items():
            for gateway, env in homes.items():
                times = [run(env, *argv)[0] for _ in range(args.repeat)]
                result["runs"][f"{name} | {gateway}"] = [round(s, 2) for s in times]  # type: ignore[index]
                print(f"{name} on {gateway}: {times}", file=sys.stderr, flush=True)
    finally:
        if not args.keep_cluster:
            run(cluster_env, sys.executable, "-m", "tardy.cluster", "down")
    args.out.write_text(json.dumps(result, indent=2))
    runs: dict[str, list[float]] = result["runs"]  # type: ignore[assignment]
    print("| command (fresh process) | `local` | `connect` |\n|---|---|---|")
    for name in COMMANDS:
        cells = [
            f"{statistics.median(runs[f'{name} | {g}']):.1f} s "
            f"({', '.join(f'{s:.1f}' for s in runs[f'{name} | {g}'])})"
            for g in homes
        ]
        print(f"| {name} | {' | '.join(cells)} |")
    print(f"same content hashes for {result['models']} models: {result['same_content_hashes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
