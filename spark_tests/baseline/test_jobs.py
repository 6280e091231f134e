"""The baseline jobs of spark_tests/jobs, run small against one `nullbroker serve` for the
module: whatever a job reports, the broker counted the same, and reading back finds every
record once. Each job also runs through memrows (its no-network twin) and, when Spark's
JVM Kafka connector is on the classpath, through format("kafka")."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from pyspark.sql import DataFrame, SparkSession

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.sources.synthetic import RecordShape, key_pattern, value_pattern
from spark_tests.conftest import log_offsets, produced_records
from spark_tests.jobs import generate_to_kafka, pipeline, source_to_noop, streaming_read
from spark_tests.jobs.connector import Connector
from spark_tests.jobs.session import jvm_kafka_missing_reason, register_formats
from spark_tests.jobs.settings import KEY_SIZE, JobSettings, TopicShape
from spark_tests.support.streams import BatchLog
from tests.support.broker_counts import fetched_from_metrics

RECORDS = 20_000
PARTITIONS = 4
SIZE = 100
MAX_OFFSETS = 2_500  # eight micro-batches of 625 records from each partition
PER_PARTITION = RECORDS // PARTITIONS
SHAPE = RecordShape(size=SIZE, key_size=KEY_SIZE)
# One source topic per test that reads, so each topic's fetch counters are that test's own.
READ_TOPICS = ("noop-source", "pipeline-events", "stream-source", "kafka-source")

Position = tuple[int, int]  # (partition, offset)


@pytest.fixture(scope="module")
def broker(spark: SparkSession, nullbroker_module_factory: StartBroker) -> RunningBroker:
    register_formats(spark)
    sources = [TopicShape(name, PARTITIONS, PER_PARTITION, SIZE) for name in READ_TOPICS]
    return nullbroker_module_factory(
        *(flag for s in sources for flag in ("--source", s.source_flag()))
    )


def settings(broker: RunningBroker, format: str = "pykafka") -> JobSettings:
    return JobSettings(RECORDS, SIZE, PARTITIONS, format, broker.bootstrap)


def fetched(broker: RunningBroker, topic: str) -> int:
    return sum(
        records
        for (name, _), records in fetched_from_metrics(broker.scrape()).items()
        if name == topic
    )


def every_position(partitions: int = PARTITIONS, records: int = PER_PARTITION) -> list[Position]:
    return [(partition, offset) for partition in range(partitions) for offset in range(records)]


def rows_of(frame: DataFrame) -> list[tuple[int, int, bytes, bytes, int]]:
    """What identifies a record's content, timestamps aside (memrows starts its own clock)."""
    columns = frame.select("partition", "offset", "key", "value", "timestampType").collect()
    return sorted((r.partition, r.offset, r.key, r.value, r.timestampType) for r in columns)


def test_generate_to_kafka_gives_every_partition_its_share_exactly(
    spark: SparkSession, broker: RunningBroker
) -> None:
    result = generate_to_kafka.run(spark, settings(broker), topic="generated")

    assert result.rows == RECORDS
    assert produced_records(broker, "generated") == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
    latest = log_offsets(broker.bootstrap, "generated", PARTITIONS, "latest")
    assert latest == dict.fromkeys(range(PARTITIONS), PER_PARTITION)


def test_generate_to_memrows_receives_every_generated_row(spark: SparkSession) -> None:
    result = generate_to_kafka.run(spark, JobSettings(RECORDS, SIZE, PARTITIONS, "memory"))

    assert result.rows == RECORDS
    assert result.format == "memory"


def test_generated_rows_have_the_asked_key_value_and_partition(spark: SparkSession) -> None:
    rows = generate_to_kafka.generated_rows(spark, JobSettings(8, SIZE, PARTITIONS)).collect()

    assert [row.key for row in rows] == [str(i).zfill(KEY_SIZE).encode() for i in range(8)]
    assert {len(row.value) for row in rows} == {SIZE}
    assert [row.partition for row in rows] == [i % PARTITIONS for i in range(8)]


def test_source_to_noop_reads_every_record_once(spark: SparkSession, broker: RunningBroker) -> None:
    job_settings = settings(broker)
    result = source_to_noop.run(spark, job_settings, topic="noop-source")

    assert result.rows == RECORDS
    # The job asked for each partition's whole log: not one record more was served.
    assert fetched(broker, "noop-source") == RECORDS
    read_back = Connector.for_settings(job_settings).read(spark, job_settings.topic("noop-source"))
    assert sorted((r.partition, r.offset) for r in read_back.collect()) == every_position()


@pytest.mark.parametrize("twin", ["memory", "range"])
def test_each_no_network_twin_makes_the_rows_the_broker_serves(
    spark: SparkSession, broker: RunningBroker, twin: str
) -> None:
    """A twin (memrows for pykafka, range for Spark's connector) is a fair baseline only if
    it makes the same rows as the broker serves."""
    topic = settings(broker).topic("noop-source")
    from_kafka = Connector("pykafka", broker.bootstrap).read(spark, topic)
    from_twin = Connector(twin, None).read(spark, topic)

    twin_rows = rows_of(from_twin)
    assert twin_rows == rows_of(from_kafka)
    assert twin_rows[1] == (0, 1, key_pattern(1, KEY_SIZE), value_pattern(1, SIZE), 0)
    # The same columns and types (range's are nullable where Spark's functions make them so).
    assert [(f.name, f.dataType) for f in from_twin.schema] == [
        (f.name, f.dataType) for f in from_kafka.schema
    ]


@pytest.mark.parametrize("format", ["memory", "range"])
def test_source_to_noop_without_a_broker_counts_every_row(spark: SparkSession, format: str) -> None:
    result = source_to_noop.run(spark, JobSettings(RECORDS, SIZE, PARTITIONS, format))

    assert result.rows == RECORDS


def test_streaming_from_range_stops_after_the_topics_micro_batches(spark: SparkSession) -> None:
    """range's rate source never runs dry: the job stops it once the micro-batches that
    hold the topic's every record are done, and counts only those."""
    log = BatchLog()
    job_settings = JobSettings(RECORDS, SIZE, PARTITIONS, "range")
    result = streaming_read.run(spark, job_settings, max_offsets=MAX_OFFSETS, on_batch=log)

    expected = RECORDS // MAX_OFFSETS
    assert result.rows == RECORDS and result.details["micro_batches"] == expected
    first = [position for batch in range(expected) for position in log.batches[batch]]
    assert sorted(first) == every_position()
    assert all(len(log.batches[batch]) == MAX_OFFSETS for batch in range(expected))


def expected_categories() -> Counter[str]:
    """Each source record's category is the first letter of its value: A + index mod 26."""
    return Counter(
        chr(ord("A") + (offset % SHAPE.batch_records) % 26) for _, offset in every_position()
    )


def test_pipeline_reads_every_event_and_writes_one_record_per_category(
    spark: SparkSession, broker: RunningBroker
) -> None:
    result = pipeline.run(spark, settings(broker), topic="pipeline-events", output_topic="aggs")

    categories = expected_categories()
    assert result.rows == RECORDS
    assert result.details["output_rows"] == len(categories) == 26
    assert fetched(broker, "pipeline-events") == RECORDS
    assert produced_records(broker, "aggs") == {0: len(categories)}


def test_the_pipelines_aggregates_count_every_event_by_category(
    spark: SparkSession, broker: RunningBroker
) -> None:
    topic = settings(broker).topic("pipeline-events")
    events = Connector("pykafka", broker.bootstrap).read(spark, topic)

    aggregates = pipeline.aggregated(pipeline.parsed(events)).collect()

    assert {row.category: row.events for row in aggregates} == expected_categories()
    assert {row.bytes for row in aggregates} == {SIZE * n for n in expected_categories().values()}
    # Keys are the batch index, so there are batch_records users; the count is approximate.
    for row in aggregates:
        assert row.users <= SHAPE.batch_records * 1.05


def test_pipeline_through_memrows_counts_every_event(spark: SparkSession) -> None:
    result = pipeline.run(spark, JobSettings(RECORDS, SIZE, PARTITIONS, "memory"))

    assert result.rows == RECORDS
    assert result.details["output_rows"] == 26


@pytest.mark.parametrize("format", ["kafka", "pykafka", "memory"])
def test_streaming_read_processes_every_offset_once_in_micro_batches(
    spark: SparkSession, broker: RunningBroker, format: str
) -> None:
    if format == "kafka" and (reason := jvm_kafka_missing_reason(spark)):
        pytest.skip(reason)
    log = BatchLog()
    result = streaming_read.run(
        spark,
        settings(broker, format),
        topic="stream-source",
        max_offsets=MAX_OFFSETS,
        on_batch=log,
    )

    assert log.positions() == every_position()
    assert result.rows == RECORDS
    assert all(len(rows) <= MAX_OFFSETS for rows in log.batches.values())
    assert result.details["micro_batches"] == len(log.batches) == RECORDS // MAX_OFFSETS
    assert [b["rows"] for b in result.details["batches"]] == [
        len(log.batches[batch]) for batch in sorted(log.batches)
    ]


def test_streaming_read_reports_each_micro_batchs_latency(
    spark: SparkSession, broker: RunningBroker
) -> None:
    result = streaming_read.run(
        spark, settings(broker), topic="stream-source", max_offsets=MAX_OFFSETS
    )

    batches = result.details["batches"]
    assert [b["batch"] for b in batches] == list(range(RECORDS // MAX_OFFSETS))
    assert sum(b["rows"] for b in batches) == result.rows == RECORDS
    assert all(b["ms"] > 0 for b in batches)
    assert result.details["batch_ms_max"] == max(b["ms"] for b in batches)


@pytest.fixture
def jvm_kafka(spark: SparkSession) -> None:
    reason = jvm_kafka_missing_reason(spark)
    if reason:
        pytest.skip(reason)


@pytest.mark.usefixtures("jvm_kafka")
@pytest.mark.parametrize(
    "job", [generate_to_kafka, source_to_noop, pipeline, streaming_read], ids=lambda j: j.NAME
)
def test_each_job_runs_through_sparks_jvm_kafka_connector(
    spark: SparkSession, broker: RunningBroker, job: object
) -> None:
    job_settings = settings(broker, "kafka")
    if job is generate_to_kafka:
        result = generate_to_kafka.run(spark, job_settings, topic="kafka-generated")
        assert produced_records(broker, "kafka-generated") == dict.fromkeys(range(4), PER_PARTITION)
    elif job is pipeline:
        result = pipeline.run(spark, job_settings, topic="kafka-source", output_topic="kafka-aggs")
        assert produced_records(broker, "kafka-aggs") == {0: 26}
    else:
        result = job.run(spark, job_settings, topic="kafka-source")  # type: ignore[attr-defined]
    assert result.rows == RECORDS


def test_settings_refuse_records_that_do_not_split_over_the_partitions() -> None:
    with pytest.raises(ValueError, match="split evenly"):
        JobSettings(10, SIZE, 4)
    with pytest.raises(ValueError, match="format must be one of"):
        replace(JobSettings(8, SIZE, 4), format="parquet")


def test_a_kafka_format_without_a_bootstrap_server_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a bootstrap server"):
        Connector.for_settings(JobSettings(8, SIZE, 4))
