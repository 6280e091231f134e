"""Spark's batch readers against synthetic source topics of `nullbroker serve`: every record
that exists is read exactly once, with the contents its offset implies. What both readers
must do — Spark's own connector (format "kafka") and pykafka — is asked of each (`reader`);
the rest is pykafka's (the connector's own is in test_kafka_connector.py)."""

from __future__ import annotations

import json

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import Row, SparkSession

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.sources.synthetic import RecordShape, key_pattern, value_pattern
from spark_tests.conftest import delete_records, log_offsets
from spark_tests.support.batch_reads import every_offset, positions, read
from tests.support.broker_counts import fetched_from_metrics

PARTITIONS = 4
RECORDS = 2_500
VALUE_SIZE = 64
KEY_SIZE = 6
HEADERS = 2
SHAPE = RecordShape(size=VALUE_SIZE, key_size=KEY_SIZE, headers=HEADERS)
TRIMMED_RECORDS = 1_000


@pytest.fixture(scope="module")
def broker(nullbroker_module_factory: StartBroker) -> RunningBroker:
    return nullbroker_module_factory(
        "--source",
        f"clicks:partitions={PARTITIONS},records={RECORDS},size={VALUE_SIZE},"
        f"key-size={KEY_SIZE},headers={HEADERS}",
        "--source",
        "other:partitions=1,records=10,size=8",
        "--source",
        f"trimmed:partitions=1,records={TRIMMED_RECORDS},size=8",
    )


@pytest.fixture(params=["pykafka", "kafka"])
def reader(request: pytest.FixtureRequest) -> str:
    """Each of Spark's readers in turn, the connector's skipped where it is missing."""
    if request.param == "kafka":
        request.getfixturevalue("kafka_connector")
    return str(request.param)


def test_a_batch_read_returns_every_record_once_as_the_broker_made_it(
    spark: SparkSession, broker: RunningBroker, reader: str
) -> None:
    rows = read(spark, broker, reader, subscribe="clicks", includeHeaders="true").collect()

    assert positions(rows) == every_offset("clicks", {p: range(RECORDS) for p in range(4)})
    for row in rows:
        index = row.offset % SHAPE.batch_records
        assert row.value == value_pattern(index, VALUE_SIZE)
        assert row.key == key_pattern(index, KEY_SIZE)
        assert row.headers == [Row(key=f"h{h}", value=str(index).encode()) for h in range(2)]
        assert row.timestampType == 0  # CreateTime
    fetched = fetched_from_metrics(broker.scrape())
    # The connector's consumers fetch whole batches and may read one past a task's range,
    # never less than it returned.
    assert all(fetched[("clicks", p)] >= RECORDS for p in range(PARTITIONS))


def test_the_schema_is_sparks_kafka_schema(spark: SparkSession, broker: RunningBroker) -> None:
    plain = read(spark, broker, subscribe="clicks")
    with_headers = read(spark, broker, subscribe="clicks", includeHeaders="true")

    expected = (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    assert plain.schema.simpleString() == expected
    assert with_headers.schema.simpleString() == (
        expected[:-1] + ",headers:array<struct<key:string,value:binary>>>"
    )


def test_timestamps_rise_with_offsets(spark: SparkSession, broker: RunningBroker) -> None:
    rows = (
        read(spark, broker, assign=json.dumps({"clicks": [2]}))
        .select("offset", "timestamp")
        .collect()
    )

    timestamps = [row.timestamp for row in sorted(rows, key=lambda row: row.offset)]
    assert len(timestamps) == RECORDS
    assert timestamps == sorted(timestamps)


def test_offset_json_ranges_return_exactly_those_offsets(
    spark: SparkSession, broker: RunningBroker, reader: str
) -> None:
    starting = {"clicks": {"0": 10, "1": -2, "2": 100, "3": 2000}}
    ending = {"clicks": {"0": 20, "1": 5, "2": -1, "3": 2000}}
    frame = read(
        spark,
        broker,
        reader,
        subscribe="clicks",
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
    )

    expected = {0: range(10, 20), 1: range(0, 5), 2: range(100, RECORDS), 3: range(0)}
    assert positions(frame.collect()) == every_offset("clicks", expected)


@pytest.mark.parametrize(("min_partitions", "tasks"), [(3, 4), (10, 12), (16, 16)])
def test_min_partitions_splits_ranges_and_still_reads_each_offset_once(
    spark: SparkSession, broker: RunningBroker, min_partitions: int, tasks: int
) -> None:
    frame = read(spark, broker, subscribe="clicks", minPartitions=str(min_partitions))

    # Spark's KafkaOffsetRangeCalculator: 4 equal ranges and 10 wanted make 3 parts each
    # (2.5 rounded half up), never fewer tasks than the topic's partitions.
    assert frame.rdd.getNumPartitions() == tasks
    rows = frame.select("topic", "partition", "offset").collect()
    assert positions(rows) == every_offset("clicks", {p: range(RECORDS) for p in range(4)})


def test_assign_reads_only_the_partitions_named(
    spark: SparkSession, broker: RunningBroker, reader: str
) -> None:
    frame = read(spark, broker, reader, assign=json.dumps({"clicks": [1, 3]}))

    counts = {row.partition: row["count"] for row in frame.groupBy("partition").count().collect()}
    assert counts == {1: RECORDS, 3: RECORDS}


@pytest.mark.parametrize(
    ("pattern", "topics"),
    [
        ("^cl.*", {"clicks"}),
        ("^c.*|oth", {"clicks", "other"}),
        ("lick", {"clicks"}),
        ("^lick", set()),
    ],
)
def test_subscribe_pattern_is_found_anywhere_in_a_topic_name_unless_anchored(
    spark: SparkSession, broker: RunningBroker, reader: str, pattern: str, topics: set[str]
) -> None:
    frame = read(spark, broker, reader, subscribePattern=pattern)

    assert {row.topic for row in frame.select("topic").distinct().collect()} == topics


def test_several_topics_read_together(spark: SparkSession, broker: RunningBroker) -> None:
    frame = read(spark, broker, subscribe="clicks, other")

    counts = {row.topic: row["count"] for row in frame.groupBy("topic").count().collect()}
    assert counts == {"clicks": PARTITIONS * RECORDS, "other": 10}


def test_a_topic_that_does_not_exist_reads_as_empty(
    spark: SparkSession, broker: RunningBroker
) -> None:
    assert read(spark, broker, subscribe="absent").count() == 0


DATA_LOSS = {
    "pykafka": (PySparkException, r"offsets \[10, 100\) of trimmed-0.*failOnDataLoss"),
    # The connector's KafkaIllegalStateException reaches Python as py4j's error, unconverted.
    "kafka": (Py4JJavaError, r"(?s)failOnDataLoss.*offset \[10, 1000\) .*trimmed-0"),
}
"""How each reader fails a read that starts below the log start, unless told not to."""


def test_data_loss_below_the_log_start_fails_or_is_skipped(
    spark: SparkSession, broker: RunningBroker, reader: str
) -> None:
    # The second reader finds the records already deleted: the log start stays 100.
    assert delete_records(broker.bootstrap, "trimmed", 0, 100) == 100
    starting = json.dumps({"trimmed": {"0": 10}})
    error, message = DATA_LOSS[reader]

    with pytest.raises(error, match=message):
        read(spark, broker, reader, subscribe="trimmed", startingOffsets=starting).collect()

    rows = read(
        spark, broker, reader, subscribe="trimmed", startingOffsets=starting, failOnDataLoss="false"
    ).collect()
    assert positions(rows) == every_offset("trimmed", {0: range(100, TRIMMED_RECORDS)})
    # earliest is the log start: nothing is missing.
    earliest = read(spark, broker, reader, subscribe="trimmed").collect()
    assert positions(earliest) == every_offset("trimmed", {0: range(100, TRIMMED_RECORDS)})


def test_an_end_beyond_the_log_end_fails_or_is_skipped(
    spark: SparkSession, broker: RunningBroker
) -> None:
    assert log_offsets(broker.bootstrap, "other", 1, "latest") == {0: 10}
    ending = json.dumps({"other": {"0": 50}})

    with pytest.raises(PySparkException, match=r"offsets \[10, 50\) of other-0.*failOnDataLoss"):
        read(spark, broker, subscribe="other", endingOffsets=ending).collect()

    rows = read(
        spark, broker, subscribe="other", endingOffsets=ending, failOnDataLoss="false"
    ).collect()
    assert positions(rows) == every_offset("other", {0: range(10)})


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"startingOffsets": "latest"}, "option 'startingOffsets' can't be latest"),
        ({"endingOffsets": '{"other":{"0":-2}}'}, "option 'endingOffsets' can't be earliest"),
        ({"startingOffsets": '{"clicks":{"0":1}}'}, "option 'startingOffsets' must give an"),
        (
            {"startingOffsets": '{"other":{"0":9}}', "endingOffsets": '{"other":{"0":5}}'},
            "option 'startingOffsets' gives 9 for other-0, after its end 5",
        ),
    ],
)
def test_batch_offset_errors_name_the_option(
    spark: SparkSession, broker: RunningBroker, options: dict[str, str], named: str
) -> None:
    with pytest.raises(PySparkException, match=named):
        read(spark, broker, subscribe="other", **options).collect()


def test_a_custom_schema_is_refused(spark: SparkSession, broker: RunningBroker) -> None:
    reader = spark.read.format("pykafka").schema("value binary")
    reader = reader.option("kafka.bootstrap.servers", broker.bootstrap)
    with pytest.raises(PySparkException, match="fixed schema"):
        reader.option("subscribe", "other").load().collect()
