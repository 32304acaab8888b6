"""The cluster's Spark Connect server: submitted to the standalone master with Delta, the local
gateway's session settings and a Hive metastore in the cluster's PostgreSQL, whose JDBC driver
Spark's own resolver fetches once.

It answers only the cluster's owner: it is started with a token (``spark.connect.authenticate.
token``, docs/facts.md, fact 26) kept in ``cluster/connect-token`` (0600), and its properties,
the token and PostgreSQL's password among them, reach ``spark-submit`` in a 0600 properties
file (``run/connect.conf``), never on its command line. A client's URL carries the token
(``client_url``); one without it is refused.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from tardy.cluster.settings import (
    CONNECT_CLASS,
    HOST,
    POSTGRES_USER,
    ClusterError,
    Component,
    Settings,
)
from tardy.cluster.spark import spark_env, spark_home, start_spark
from tardy.runtime import jvm
from tardy.runtime.private import secret, write_properties

POSTGRES_JDBC = "org.postgresql:postgresql:42.7.14"

# Session settings the `local` gateway gives its own driver (project.yaml), given here to the
# Connect server: a Connect client cannot set `partitionOverwriteMode` (SQLMesh tries through
# `sparkContext`), and untuned shuffle and Delta snapshot partitions triple a small write.
SESSION_SETTINGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.sources.default": "delta",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.databricks.delta.schema.autoMerge.enabled": "false",
}


def token(settings: Settings) -> str:
    """The secret a Connect client presents: generated once, kept in a 0600 file."""
    return secret(settings.connect_token_file)


def client_url(settings: Settings) -> str:
    """The Connect URL a client of this cluster uses, the token in it."""
    return f"{settings.remote_url}/;token={token(settings)}"


def connect_conf(settings: Settings, password: str, driver_jar: Path) -> dict[str, str]:
    """The Connect server's configuration: the master, Delta, the local gateway's session
    settings, a Hive metastore whose database is the cluster's PostgreSQL, and the token."""
    return {
        "spark.app.name": "tardy-connect",
        "spark.connect.authenticate.token": token(settings),
        "spark.connect.grpc.binding.address": HOST,
        "spark.connect.grpc.binding.port": str(settings.connect_port),
        "spark.driver.host": HOST,
        "spark.driver.bindAddress": HOST,
        "spark.driver.memory": settings.driver_memory,
        "spark.driver.extraClassPath": str(driver_jar),
        "spark.driver.extraJavaOptions": f"-Duser.timezone=UTC {jvm.tuning()}".strip(),
        "spark.executor.extraJavaOptions": f"-Duser.timezone=UTC {jvm.tuning()}".strip(),
        "spark.executor.memory": settings.executor_memory,
        "spark.executor.cores": "1",
        "spark.cores.max": str(max(settings.workers, 1)),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": str(settings.warehouse),
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": settings.metastore_url,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "spark.hadoop.javax.jdo.option.ConnectionUserName": POSTGRES_USER,
        "spark.hadoop.javax.jdo.option.ConnectionPassword": password,
        # The metastore's tables are created in the empty database as first used (the
        # schematool's scripts are not in Spark's jars). Without foreign keys: DataNucleus
        # adds them on a second connection while the first holds the referenced table in an
        # open transaction (the first CREATE TABLE hung on `ALTER TABLE "TBL_PRIVS" ADD
        # CONSTRAINT ... REFERENCES "TBLS"`, PostgreSQL sees no deadlock).
        # (autoCreateAll would switch constraints back on.)
        "spark.hadoop.datanucleus.schema.autoCreateAll": "false",
        "spark.hadoop.datanucleus.schema.autoCreateTables": "true",
        "spark.hadoop.datanucleus.schema.autoCreateColumns": "true",
        "spark.hadoop.datanucleus.schema.autoCreateConstraints": "false",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        **SESSION_SETTINGS,
    }


def start_connect(settings: Settings, component: Component, password: str) -> None:
    driver_jar = postgres_jdbc_jar(settings)
    write_properties(settings.connect_conf_file, connect_conf(settings, password, driver_jar))
    argv = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        settings.master_url,
        "--properties-file",
        str(settings.connect_conf_file),
        "--class",
        CONNECT_CLASS,
        "spark-internal",
    ]
    start_spark(settings, component, argv, timeout=180)


def jar_name(coordinate: str) -> str:
    group, artifact, version = coordinate.split(":")
    return f"{group}_{artifact}-{version}.jar"


def postgres_jdbc_jar(settings: Settings) -> Path:
    path = settings.jars / jar_name(POSTGRES_JDBC)
    if not path.is_file():
        raise ClusterError(f"{path} missing: `python -m tardy.cluster up` fetches it")
    return path


def fetch_postgres_jdbc(settings: Settings) -> Path:
    """PostgreSQL's JDBC driver from Maven Central, resolved by Spark's own Ivy resolver (as
    ``tardy.runtime.jars`` fetches Delta), into ``cluster/jars/``. Idempotent; the JVM that resolves
    it writes to ``logs/fetch-jdbc.log``."""
    target = settings.jars / jar_name(POSTGRES_JDBC)
    if target.is_file():
        return target
    settings.jars.mkdir(parents=True, exist_ok=True)
    log = settings.logs / "fetch-jdbc.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tardy-ivy-") as ivy:
        # An empty Python application: spark-submit resolves --packages before running it.
        noop = Path(ivy) / "noop.py"
        noop.write_text("")
        argv = [
            str(spark_home() / "bin" / "spark-submit"),
            "--master",
            "local[1]",
            "--conf",
            f"spark.jars.ivy={ivy}",
            "--packages",
            POSTGRES_JDBC,
            str(noop),
        ]
        with log.open("ab") as out:
            subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=spark_env(settings))
        fetched = Path(ivy) / "jars" / target.name
        if not fetched.is_file():
            raise ClusterError(f"Spark's resolver did not fetch {POSTGRES_JDBC}; log {log}")
        shutil.copy2(fetched, target)
    return target
