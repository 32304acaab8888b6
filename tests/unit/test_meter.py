"""The cost meter times each statement and keeps the slowest, with a label a reader can place.

In-process, a slow join and a fast query in two steps: the oracle is the test's own clock
around each call (a statement's own seconds lie within the call that ran it) and the tables
the test wrote. Over Connect, the labels of real plan messages (the timing path itself runs
in ``test_on_cluster``'s ``connect`` story).
"""

from __future__ import annotations

import time
import typing as t

SCHEMA = "meter_test"


def test_each_statement_is_timed_and_the_slowest_are_kept_with_their_step(spark: t.Any) -> None:
    from tardy.engine.meter import SLOWEST, Meter

    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    spark.sql(f"CREATE OR REPLACE TABLE {SCHEMA}.numbers USING delta AS SELECT id FROM range(1500)")
    meter = Meter(spark)
    with meter.step("fast"):
        spark.sql("SELECT 1").collect()
    join = (
        f"SELECT count(*) FROM {SCHEMA}.numbers a JOIN {SCHEMA}.numbers b "
        "ON a.id % 7 = b.id % 7 AND a.id + b.id > 10"
    )
    with meter.step("slow"):
        started = time.perf_counter()
        joined = spark.sql(join).collect()[0][0]
        wall = time.perf_counter() - started
        for _ in range(SLOWEST):  # more fast statements than the meter keeps
            spark.sql("SELECT 2").collect()
    assert joined > 300_000  # the join did the work it was written to do

    assert meter.statements == {"fast": 1, "slow": 1 + SLOWEST}
    assert len(meter.slowest) == SLOWEST
    first = meter.slowest[0]
    assert first.step == "slow"
    assert f"{SCHEMA}.numbers" in first.statement, first
    # Its own seconds lie within the call that ran it (the JVM's clock, in ms): an upper
    # bound from the test's clock, no bound from below (no test asserts a duration).
    assert 0 < first.seconds <= wall + 0.01, (first, wall)
    assert [x.seconds for x in meter.slowest] == sorted(
        (x.seconds for x in meter.slowest), reverse=True
    )
    for step in ("fast", "slow"):
        assert 0 < meter.statement_seconds[step] <= meter.seconds[step] + 0.01
    assert meter.statement_seconds["slow"] >= first.seconds
    measured = meter.as_dict()
    assert measured["slowest"][0]["step"] == "slow"
    assert measured["slowest"][0]["statement"] == first.statement


def test_connect_plans_are_labelled_by_their_sql_or_their_operation() -> None:
    import pyspark.sql.connect.proto as pb2

    from tardy.engine.meter import LABEL, plan_label

    command = pb2.Plan(
        command=pb2.Command(sql_command=pb2.SqlCommand(sql='INSERT INTO t\n  SELECT "x"'))
    )
    assert plan_label(command) == 'INSERT INTO t SELECT "x"'
    nested = pb2.SqlCommand(input=pb2.Relation(sql=pb2.SQL(query="SELECT * FROM a")))
    assert plan_label(pb2.Plan(command=pb2.Command(sql_command=nested))) == "SELECT * FROM a"
    read = pb2.Read(named_table=pb2.Read.NamedTable(unparsed_identifier="silver.sales"))
    assert plan_label(pb2.Plan(root=pb2.Relation(read=read))) == "read silver.sales"
    long = pb2.Plan(root=pb2.Relation(sql=pb2.SQL(query="SELECT " + "x, " * 100 + "y")))
    assert len(plan_label(long)) == LABEL
