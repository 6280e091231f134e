"""pykafka's streaming source and sink against `nullbroker serve`: micro-batches over a
growing source topic read every offset once, across restarts from the checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamReader

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from spark_tests.conftest import delete_records, log_offsets
from spark_tests.support.streams import BatchLog, contiguous, into_log, run_until_done, wait_until
from tests.support.broker_counts import produced_from_metrics

PARTITIONS = 2
# The growing topic gains 20 records/s: less than one micro-batch of at most 50 per second of
# wall-clock time, however slow the machine is while the query restarts.
TICKS_RATE = 10  # records/s per partition
MAX_OFFSETS = 50
FADING_RATE = 200
BOUNDED = 3_000


@pytest.fixture(scope="module")
def broker(spark: SparkSession, nullbroker_module_factory: StartBroker) -> RunningBroker:
    # Started after Spark is up, so the growing topics grow while the tests run.
    return nullbroker_module_factory(
        "--partitions",
        str(PARTITIONS),
        "--source",
        f"ticks:partitions={PARTITIONS},rate={TICKS_RATE},size=16",
        "--source",
        f"clicks:partitions={PARTITIONS},records={BOUNDED},size=32",
        "--source",
        f"fading:partitions=1,rate={FADING_RATE},size=8",
    )


def read_stream(spark: SparkSession, broker: RunningBroker, **options: str) -> DataStreamReader:
    reader = spark.readStream.format("pykafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader


def test_micro_batches_read_a_growing_topic_once_across_restarts(
    spark: SparkSession, broker: RunningBroker, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "checkpoint"
    log = BatchLog()

    def stream() -> DataFrame:
        return read_stream(
            spark,
            broker,
            subscribe="ticks",
            startingOffsets="earliest",
            maxOffsetsPerTrigger=str(MAX_OFFSETS),
        ).load()

    def log_ends() -> dict[int, int]:
        return log_offsets(broker.bootstrap, "ticks", PARTITIONS, "latest")

    def has_grown_past(ends: dict[int, int]) -> Callable[[], bool]:
        return lambda: all(log_ends()[p] > ends.get(p, 0) for p in range(PARTITIONS))

    # 1: available now, with enough records for several micro-batches.
    wait_until(lambda: sum(log_ends().values()) > MAX_OFFSETS, "the topic to grow")
    run_until_done(into_log(stream(), log, checkpoint, availableNow=True))
    first_run = len(log.batches)
    assert first_run >= 2
    # 2: a processing-time trigger from the checkpoint, stopped while the topic grows,
    # possibly in the middle of a micro-batch.
    wait_until(has_grown_past(log.end_offsets()), "new records")
    query = into_log(stream(), log, checkpoint, processingTime="200 milliseconds")
    try:
        wait_until(lambda: len(log.batches) >= first_run + 2, "two more micro-batches")
    finally:
        query.stop()
    # 3: available now again: it reads at least what existed when it started.
    wait_until(has_grown_past(log.end_offsets()), "new records")
    existing = log_ends()
    run_until_done(into_log(stream(), log, checkpoint, availableNow=True))

    read_to = log.end_offsets()
    assert all(read_to[p] >= existing[p] for p in range(PARTITIONS))
    assert log.positions() == contiguous({p: range(read_to[p]) for p in range(PARTITIONS)})
    assert sorted(log.batches) == list(range(len(log.batches)))
    # A partition's share of the limit rounds up only when it is below one offset.
    assert all(len(rows) <= MAX_OFFSETS + PARTITIONS for rows in log.batches.values())


def test_streaming_write_copies_every_record_to_its_partition(
    spark: SparkSession, broker: RunningBroker, tmp_path: Path
) -> None:
    frame = read_stream(
        spark, broker, subscribe="clicks", startingOffsets="earliest", maxOffsetsPerTrigger="2500"
    ).load()
    query = (
        frame.select("key", "value", "partition")
        .writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", "copied")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    run_until_done(query)

    produced = produced_from_metrics(broker.scrape())
    copied = {p: counts.records for (topic, p), counts in produced.items() if topic == "copied"}
    assert copied == dict.fromkeys(range(PARTITIONS), BOUNDED)


def test_records_deleted_under_a_query_fail_it_or_are_skipped(
    spark: SparkSession, broker: RunningBroker, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "checkpoint"
    log = BatchLog()

    def stream(**options: str) -> DataFrame:
        return read_stream(spark, broker, subscribe="fading", **options).load()

    def log_end() -> int:
        return log_offsets(broker.bootstrap, "fading", 1, "latest")[0]

    wait_until(lambda: log_end() > 0, "the topic to grow")
    run_until_done(into_log(stream(startingOffsets="earliest"), log, checkpoint, availableNow=True))
    read_up_to = log.end_offsets()[0]
    assert log.positions() == contiguous({0: range(read_up_to)})
    wait_until(lambda: log_end() >= read_up_to + 100, "new records")
    log_start = delete_records(broker.bootstrap, "fading", 0, read_up_to + 50)

    failing = into_log(stream(), log, checkpoint, availableNow=True)
    with pytest.raises(PySparkException, match=rf"offsets \[{read_up_to}, {log_start}\).*fail"):
        run_until_done(failing)
    run_until_done(into_log(stream(failOnDataLoss="false"), log, checkpoint, availableNow=True))

    read_to = log.end_offsets()[0]
    assert read_to > log_start
    assert log.positions() == contiguous({0: range(read_up_to)}) + contiguous(
        {0: range(log_start, read_to)}
    )


def test_ending_offsets_are_refused_in_streaming_queries(
    spark: SparkSession, broker: RunningBroker
) -> None:
    frame = read_stream(spark, broker, subscribe="clicks", endingOffsets="latest").load()
    with pytest.raises(PySparkException, match="option 'endingOffsets' is not valid for streaming"):
        run_until_done(frame.writeStream.format("noop").start())
