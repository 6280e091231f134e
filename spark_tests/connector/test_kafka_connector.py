"""Spark's own Kafka connector (format("kafka"), spark-sql-kafka-0-10) against `nullbroker
serve`, with jobs written as they are for Kafka: the connector's AdminClient plans offsets,
its KafkaConsumers assign, seek and poll, its KafkaProducers write. Every count is checked
by the broker's metrics and by reading back; a failure here is a broker bug. What both of
Spark's readers must do in a batch read is in test_batch_read.py, asked of each."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.sources.synthetic import RecordShape
from spark_tests.conftest import (
    ADMIN_TIMEOUT_S,
    log_offsets,
    produced_records,
)
from spark_tests.support import batch_reads
from spark_tests.support.partitioner import java_partition
from spark_tests.support.streams import BatchLog, contiguous, into_log, run_until_done, wait_until

PARTITIONS = 4
RECORDS = 2_500
VALUE_SIZE = 64
KEY_SIZE = 6
SHAPE = RecordShape(size=VALUE_SIZE, key_size=KEY_SIZE, headers=2)
STREAM_RECORDS = 1_000
MAX_OFFSETS = 200
WRITE_ROWS = 20_000


pytestmark = pytest.mark.usefixtures("kafka_connector")


@pytest.fixture(scope="module")
def broker(nullbroker_module_factory: StartBroker) -> RunningBroker:
    # --verify-crc: every batch the connector's producers send must be well formed.
    return nullbroker_module_factory(
        "--partitions",
        str(PARTITIONS),
        "--verify-crc",
        "--source",
        f"clicks:partitions={PARTITIONS},records={RECORDS},size={VALUE_SIZE},"
        f"key-size={KEY_SIZE},headers=2",
        "--source",
        "other:partitions=1,records=10,size=8",
        "--source",
        f"stream:partitions=2,records={STREAM_RECORDS},size=16",
        "--source",
        f"grouped:partitions=2,records={RECORDS},size=8",
    )


def read(spark: SparkSession, broker: RunningBroker, **options: str) -> DataFrame:
    return batch_reads.read(spark, broker, "kafka", **options)


def counts_by_partition(frame: DataFrame) -> dict[int, int]:
    return {row.partition: row["count"] for row in frame.groupBy("partition").count().collect()}


def rows_with_keys_and_headers(spark: SparkSession, rows: int) -> DataFrame:
    return spark.range(rows).selectExpr(
        "concat('key-', cast(id as string)) as key",
        "cast(rpad(cast(id as string), 100, '.') as binary) as value",
        "array(named_struct('key', 'id', 'value', cast(cast(id as string) as binary)),"
        "      named_struct('key', 'origin', 'value', cast('spark' as binary))) as headers",
    )


def test_a_batch_write_with_the_default_save_mode_puts_each_key_where_kafka_would(
    spark: SparkSession, broker: RunningBroker
) -> None:
    # As a job for Kafka is written: no .mode(); keys and headers on every row.
    (
        rows_with_keys_and_headers(spark, WRITE_ROWS)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", "written")
        .save()
    )

    expected = Counter(java_partition(f"key-{i}".encode(), PARTITIONS) for i in range(WRITE_ROWS))
    assert produced_records(broker, "written") == dict(expected)
    assert log_offsets(broker.bootstrap, "written", PARTITIONS, "latest") == dict(expected)
    # Reading back: every offset the broker gave the writes, once.
    back = read(spark, broker, subscribe="written")
    assert counts_by_partition(back) == dict(expected)


def test_a_topic_column_and_a_partition_column_place_each_row(
    spark: SparkSession, broker: RunningBroker
) -> None:
    frame = spark.range(1_000).selectExpr(
        "'placed' as topic",
        "cast(id as string) as value",
        f"cast(id % {PARTITIONS} as int) as partition",
    )
    frame.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).save()

    assert produced_records(broker, "placed") == dict.fromkeys(range(PARTITIONS), 250)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"


def read_stream(spark: SparkSession, broker: RunningBroker, **options: str) -> DataFrame:
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_micro_batches_keep_to_max_offsets_and_resume_from_the_checkpoint(
    spark: SparkSession, broker: RunningBroker, checkpoint: Path
) -> None:
    log = BatchLog()

    def stream() -> DataFrame:
        return read_stream(
            spark,
            broker,
            subscribe="stream",
            startingOffsets="earliest",
            maxOffsetsPerTrigger=str(MAX_OFFSETS),
        )

    # 1: stopped after two micro-batches, possibly in the middle of the next.
    query = into_log(stream(), log, checkpoint, processingTime="100 milliseconds")
    try:
        wait_until(lambda: len(log.batches) >= 2, "two micro-batches")
    finally:
        query.stop()
    first_run = len(log.batches)
    assert first_run < 2 * STREAM_RECORDS // MAX_OFFSETS
    # 2: from the checkpoint to the end.
    run_until_done(into_log(stream(), log, checkpoint, availableNow=True))

    assert log.positions() == contiguous({p: range(STREAM_RECORDS) for p in range(2)})
    assert sorted(log.batches) == list(range(len(log.batches)))
    assert all(len(rows) <= MAX_OFFSETS for rows in log.batches.values())
    assert len(log.batches) == 2 * STREAM_RECORDS // MAX_OFFSETS


def test_a_streaming_write_copies_every_record_to_its_partition(
    spark: SparkSession, broker: RunningBroker, checkpoint: Path
) -> None:
    frame = read_stream(
        spark,
        broker,
        subscribe="clicks",
        startingOffsets="earliest",
        maxOffsetsPerTrigger="4000",
        includeHeaders="true",
    )
    query = (
        frame.select("key", "value", "headers", "partition")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", "copied")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    run_until_done(query)

    assert produced_records(broker, "copied") == dict.fromkeys(range(PARTITIONS), RECORDS)


@pytest.fixture
def admin(broker: RunningBroker) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": broker.bootstrap})


def test_a_fixed_group_id_reads_exactly_and_commits_nothing(
    spark: SparkSession, broker: RunningBroker, admin: AdminClient
) -> None:
    frame = read(spark, broker, subscribe="grouped", **{"kafka.group.id": "spark-fixed"})

    assert counts_by_partition(frame) == {0: RECORDS, 1: RECORDS}
    # The connector assigns and seeks; offsets stay in Spark, never in the group.
    from confluent_kafka import ConsumerGroupTopicPartitions

    request = [ConsumerGroupTopicPartitions("spark-fixed", [TopicPartition("grouped", 0)])]
    (future,) = admin.list_consumer_group_offsets(request, request_timeout=ADMIN_TIMEOUT_S).values()
    (committed,) = future.result().topic_partitions
    assert committed.offset < 0  # OFFSET_INVALID: nothing committed


def test_json_from_a_payload_file_topic_parses_with_from_json_and_never_null(
    spark: SparkSession, nullbroker_module_factory: StartBroker, tmp_path: Path
) -> None:
    """A pipeline's first step, parsing, sees real JSON: every value of a payload-file topic
    parses, and each is the file's line for its offset."""
    lines = [
        json.dumps({"user": f"u{n % 5}", "amount": n, "tag": "t" * (n % 30)}) for n in range(41)
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    records = 3_000
    broker = nullbroker_module_factory(
        "--source", f"json-events:partitions=2,records={records},payload-file={path}"
    )  # fmt: skip
    parsed = read(spark, broker, subscribe="json-events").select(
        "offset",
        F.from_json(F.col("value").cast("string"), "user string, amount int, tag string").alias(
            "event"
        ),
    )

    rows = parsed.collect()
    assert len(rows) == 2 * records
    for row in rows:
        expected = json.loads(lines[row.offset % len(lines)])
        assert row.event is not None and row.event.asDict() == expected


# Every column type from_json and from_avro map: strings, numbers, booleans, enums, arrays,
# maps, nested records and a nullable union.
EVENT_JSON_SCHEMA = {
    "type": "object",
    "required": ["user", "amount", "score", "paid", "tags", "at"],
    "properties": {
        "user": {"type": "string", "format": "email"},
        "amount": {"type": "integer", "minimum": 1, "maximum": 500},
        "score": {"type": "number"},
        "paid": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "at": {"type": "string", "format": "date-time"},
    },
}
EVENT_AVRO_SCHEMA = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "amount", "type": "int"},
        {"name": "score", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "where", "type": {"type": "record", "name": "Where",
                                   "fields": [{"name": "city", "type": "string"}]}},
        {"name": "note", "type": ["null", "string"]},
    ],
}  # fmt: skip


def test_a_json_schema_topic_parses_with_from_json_and_never_null(
    spark: SparkSession, nullbroker_module_factory: StartBroker, tmp_path: Path
) -> None:
    """A format=json source: every value parses with the schema's columns, none null, each
    equal to the generated document for its offset."""
    from nullbroker.sources.json_values import POOL_VALUES, pool

    path = tmp_path / "event.json"
    path.write_text(json.dumps(EVENT_JSON_SCHEMA))
    records = 2_000
    broker = nullbroker_module_factory(
        "--source", f"json-schema:partitions=2,records={records},format=json,schema={path}"
    )  # fmt: skip
    columns = "user string, amount int, score double, paid boolean, tags array<string>, at string"
    rows = (
        read(spark, broker, subscribe="json-schema")
        .select("offset", F.from_json(F.col("value").cast("string"), columns).alias("event"))
        .collect()
    )
    values = pool(EVENT_JSON_SCHEMA)
    assert len(rows) == 2 * records
    for row in rows:
        assert row.event is not None
        event = row.event.asDict()
        assert all(event[name] is not None for name in EVENT_JSON_SCHEMA["required"])
        assert event == json.loads(values[row.offset % POOL_VALUES])


def test_an_avro_topic_parses_with_from_avro_and_never_null(
    spark: SparkSession, nullbroker_module_factory: StartBroker, tmp_path: Path
) -> None:
    """A format=avro source: Spark's own from_avro (spark-avro) decodes every value, equal
    to what fastavro decodes for its offset."""
    import io

    import fastavro
    from pyspark.sql.avro.functions import from_avro

    from nullbroker.sources.avro_values import POOL_VALUES, pool

    schema_text = json.dumps(EVENT_AVRO_SCHEMA)
    path = tmp_path / "event.avsc"
    path.write_text(schema_text)
    records = 2_000
    broker = nullbroker_module_factory(
        "--source", f"avro-events:partitions=2,records={records},format=avro,schema={path}"
    )  # fmt: skip
    rows = (
        read(spark, broker, subscribe="avro-events")
        .select("offset", from_avro(F.col("value"), schema_text).alias("event"))
        .collect()
    )
    parsed = fastavro.parse_schema(EVENT_AVRO_SCHEMA)
    values = pool(EVENT_AVRO_SCHEMA)
    assert len(rows) == 2 * records
    for row in rows:
        assert row.event is not None
        expected = fastavro.schemaless_reader(io.BytesIO(values[row.offset % POOL_VALUES]), parsed)
        assert row.event.asDict(recursive=True) == expected
