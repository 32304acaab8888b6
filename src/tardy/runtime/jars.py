"""Install Delta Lake's jars next to PySpark's own, once, from Maven Central.

PyPI carries no package with Delta's jars (delta-spark is Python only), so set-up resolves
``io.delta:delta-spark_<spark>_<scala>`` and its transitive artifacts with Spark's own Ivy
resolver, then copies the artifacts that PySpark does not already ship into
``pyspark/jars``. From then on every SparkSession of this virtualenv, the ``sqlmesh`` CLI's
included, has Delta on its classpath with no network and no ``spark.jars.packages``.

Run: ``python -m tardy.runtime.jars install`` (idempotent) or
``python -m tardy.runtime.jars check``.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from importlib import metadata
from pathlib import Path

DELTA_VERSION = metadata.version("delta-spark")
SCALA_VERSION = "2.13"


def spark_major_minor() -> str:
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def delta_coordinate() -> str:
    return f"io.delta:delta-spark_{spark_major_minor()}_{SCALA_VERSION}:{DELTA_VERSION}"


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _artifact_name(jar: str) -> str:
    """`org.apache.parquet_parquet-column-1.16.0.jar` -> `parquet-column` (Ivy's naming)."""
    name = jar.split("_", 1)[1] if "_" in jar.split("-", 1)[0] else jar
    return re.sub(r"-\d[\w.\-]*\.jar$", "", name)


def delta_jar() -> Path:
    return (
        pyspark_jars_dir()
        / f"io.delta_delta-spark_{spark_major_minor()}_{SCALA_VERSION}-{DELTA_VERSION}.jar"
    )


def is_installed() -> bool:
    return delta_jar().is_file()


def install() -> list[Path]:
    """Resolve Delta with Spark's resolver and copy what PySpark lacks. Returns copied jars."""
    if is_installed():
        return []
    from pyspark.sql import SparkSession

    target = pyspark_jars_dir()
    shipped = {_artifact_name(p.name) for p in target.glob("*.jar")}
    with tempfile.TemporaryDirectory(prefix="tardy-ivy-") as ivy:
        spark = (
            SparkSession.builder.master("local[1]")
            .appName("tardy-jars")
            .config("spark.jars.packages", delta_coordinate())
            .config("spark.jars.ivy", ivy)
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        spark.stop()
        resolved = sorted((Path(ivy) / "jars").glob("*.jar"))
        if not any(p.name == delta_jar().name for p in resolved):
            raise RuntimeError(f"Spark's resolver did not fetch {delta_coordinate()}")
        copied = []
        for jar in resolved:
            if _artifact_name(jar.name) in shipped:
                continue  # PySpark ships its own (newer) build of this artifact
            shutil.copy2(jar, target / jar.name)
            copied.append(target / jar.name)
    return copied


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "check"
    if command == "install":
        copied = install()
        state = f"copied {len(copied)} jars" if copied else "already installed"
        print(f"{state}, {delta_coordinate()} (in {pyspark_jars_dir()})")
        return 0
    if command == "check":
        print(f"{delta_coordinate()}: {'installed' if is_installed() else 'missing'}")
        return 0 if is_installed() else 1
    print(f"usage: python -m tardy.runtime.jars [install|check], not {command!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
