"""The Spark driver starts from the class archive ``make setup`` built (``tardy.runtime.jvm``)."""

from __future__ import annotations

import subprocess
import typing as t

import pytest

from tardy.runtime import jvm


def test_the_driver_starts_with_the_class_archive_and_the_small_data_profile(
    spark: t.Any,
) -> None:
    """This worker's own driver (its JVM, started by the project's settings)."""
    assert jvm.ARCHIVE.is_file(), f"{jvm.ARCHIVE} is missing: run `make setup`"
    java = spark._jvm.java.lang
    arguments = list(java.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={jvm.ARCHIVE}" in arguments, arguments
    assert jvm.tuning(), "the test suite runs the small-data profile (conftest)"
    assert set(jvm.tuning().split()) <= set(arguments), arguments


# Long tier: a JVM of its own. Its fast guard: the test above (the archive is used).
@pytest.mark.long
def test_the_class_archive_maps_the_drivers_classpath(spark: t.Any) -> None:
    # The JVM ignores an archive silently when it does not match the classpath (jars replaced
    # since it was built); with -Xshare:on it refuses to start instead. Under the driver's
    # JIT and collector options (the test suite runs the small-data profile: conftest).
    java = spark._jvm.java.lang
    home = java.System.getProperty("java.home")
    done = subprocess.run(
        [
            f"{home}/bin/java",
            "-Xshare:on",
            f"-XX:SharedArchiveFile={jvm.ARCHIVE}",
            *jvm.tuning().split(),
            "-cp",
            java.System.getProperty("java.class.path"),
            "-version",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sharing" in done.stderr
