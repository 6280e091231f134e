"""The Nexmark queries (spark_tests/jobs/nexmark.py) through Spark's own Kafka connector
over a `format=nexmark` source topic, each result equal to the answer computed in plain
Python from the generator (spark_tests/support/nexmark_answers.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from spark_tests.jobs import nexmark
from spark_tests.support import nexmark_answers

PARTITIONS = 2
PER_PARTITION = 10_000
RATE = 500.0  # events/s of event time: 40 s, several windows for q5 and q7


pytestmark = pytest.mark.usefixtures("kafka_connector")


@pytest.fixture(scope="module")
def broker(nullbroker_module_factory: StartBroker) -> RunningBroker:
    flag = nexmark.source_flag(PARTITIONS * PER_PARTITION, PARTITIONS, RATE)
    return nullbroker_module_factory("--source", flag)


@pytest.fixture(scope="module")
def events(spark: SparkSession, broker: RunningBroker) -> DataFrame:
    return nexmark.read_events(spark, broker.bootstrap).cache()


@pytest.fixture(scope="module")
def expected_events(spark: SparkSession, broker: RunningBroker) -> list[dict[str, Any]]:
    # The topic's start is the first record's Kafka timestamp (not parsed from its value).
    first = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("assign", json.dumps({nexmark.TOPIC: [0]}))
        .option("endingOffsets", json.dumps({nexmark.TOPIC: {"0": 1}}))
        .load()
        .select(F.col("timestamp").cast("double"))
        .first()
    )
    assert first is not None
    start_ms = round(first[0] * 1000)
    return nexmark_answers.events(PARTITIONS, PER_PARTITION, RATE, start_ms)


def test_every_event_parses_and_no_column_of_its_kind_is_null(events: DataFrame) -> None:
    assert events.count() == PARTITIONS * PER_PARTITION
    kinds = {row.event_type: row["count"] for row in events.groupBy("event_type").count().collect()}
    total = PARTITIONS * PER_PARTITION
    assert kinds == {0: total // 50, 1: 3 * total // 50, 2: 46 * total // 50}
    for kind, column in enumerate(("person", "auction", "bid")):
        of_kind = events.where(F.col("event_type") == kind).select(f"{column}.*")
        nulls = of_kind.select([F.sum(F.col(c).isNull().cast("int")) for c in of_kind.columns])
        assert set(nulls.first() or ()) == {0}, column


@pytest.mark.parametrize("query", sorted(nexmark.QUERIES))
def test_a_query_gives_the_answer_computed_from_the_generator(
    events: DataFrame, expected_events: list[dict[str, Any]], query: str
) -> None:
    rows = nexmark.QUERIES[query](events).collect()
    expected = nexmark_answers.ANSWERS[query](expected_events)

    assert expected, "the data must give the query something to find"
    assert sorted(tuple(row) for row in rows) == expected
