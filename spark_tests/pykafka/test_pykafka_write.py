"""pykafka's batch sink against `nullbroker serve`: what Spark writes, the broker counts,
record for record and partition for partition."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.spark.producer import PARTITION_BY_KEY, _produce_batch
from nullbroker.spark.schema import WriteColumns
from spark_tests.conftest import produced_records
from spark_tests.support.partitioner import java_partition, murmur2

PARTITIONS = 4
ROWS = 200_000
VALUE_SIZE = 100


@pytest.fixture(scope="module")
def broker(nullbroker_module_factory: StartBroker) -> RunningBroker:
    # --verify-crc: every batch the producers send must be well formed, not only counted.
    return nullbroker_module_factory(
        "--partitions", str(PARTITIONS), "--verify-crc", "--source", "readonly:records=10"
    )


def test_murmur2_matches_kafkas_test_vectors() -> None:
    # From Kafka's UtilsTest.testMurmur2.
    vectors = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    assert {key: murmur2(key) for key in vectors} == vectors


def rows_with_keys_and_headers(spark: SparkSession, rows: int) -> DataFrame:
    """`rows` rows: key "key-<id>", a VALUE_SIZE-byte value and two headers."""
    return spark.range(rows).selectExpr(
        "id",
        "concat('key-', cast(id as string)) as key",
        f"cast(rpad(cast(id as string), {VALUE_SIZE}, '.') as binary) as value",
        "array(named_struct('key', 'id', 'value', cast(cast(id as string) as binary)),"
        "      named_struct('key', 'origin', 'value', cast('spark' as binary))) as headers",
    )


def write(frame: DataFrame, broker: RunningBroker, **options: str) -> None:
    writer = frame.write.format("pykafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.mode("append").save()


def test_batch_write_puts_every_row_on_its_partition_column(
    spark: SparkSession, broker: RunningBroker
) -> None:
    frame = rows_with_keys_and_headers(spark, ROWS).selectExpr(
        "key", "value", "headers", f"cast(id % {PARTITIONS} as int) as partition"
    )
    write(frame, broker, topic="explicit")

    assert produced_records(broker, "explicit") == dict.fromkeys(
        range(PARTITIONS), ROWS // PARTITIONS
    )


class RecordingProducer(Producer):
    """A real producer that also notes the arguments of each produce() call."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def produce(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((args, kwargs))
        super().produce(*args, **kwargs)


def test_each_row_is_sent_with_its_own_headers_and_no_others(broker: RunningBroker) -> None:
    """Headers go with the rows that have them (an empty list included), and rows without
    any are produced without the keyword (cheaper) rather than with headers=None."""
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([b"a", b"b", b"c"], pa.binary()),
            pa.array([[{"key": "trace", "value": b"1"}], None, []], pa.list_(header)),
        ],
        names=["value", "headers"],
    )
    columns = WriteColumns(topic=None, key=None, value=0, partition=None, headers=1)
    producer = RecordingProducer({"bootstrap.servers": broker.bootstrap})

    assert _produce_batch(producer, batch, "spied", columns) == 3
    assert producer.flush(30.0) == 0

    row = ("spied", None, PARTITION_BY_KEY)
    assert [(args[:1] + args[2:], kwargs) for args, kwargs in producer.calls] == [
        (row, {"headers": [("trace", b"1")]}),
        (row, {}),
        (row, {"headers": []}),
    ]
    assert [args[1] for args, _ in producer.calls] == [b"a", b"b", b"c"]
    assert sum(produced_records(broker, "spied").values()) == 3


def test_batch_write_hashes_keys_as_kafkas_default_partitioner(
    spark: SparkSession, broker: RunningBroker
) -> None:
    # A topic column instead of the option, and no partition column: murmur2 of the key.
    frame = rows_with_keys_and_headers(spark, ROWS).selectExpr(
        "'hashed' as topic", "key", "value", "headers"
    )
    write(frame, broker)

    expected = Counter(java_partition(f"key-{i}".encode(), PARTITIONS) for i in range(ROWS))
    assert produced_records(broker, "hashed") == dict(expected)
    assert sum(expected.values()) == ROWS


def test_null_partition_means_the_key_decides(spark: SparkSession, broker: RunningBroker) -> None:
    frame = spark.range(1000).selectExpr(
        "cast(id as string) as key",
        "cast(id as string) as value",
        "cast(null as int) as partition",
    )
    write(frame, broker, topic="null-partition")

    expected = Counter(java_partition(str(i).encode(), PARTITIONS) for i in range(1000))
    assert produced_records(broker, "null-partition") == dict(expected)


def test_a_failed_delivery_fails_the_write(spark: SparkSession, broker: RunningBroker) -> None:
    # A source topic is read-only: the broker answers POLICY_VIOLATION to every Produce.
    frame = spark.range(100).selectExpr("cast(id as string) as value")

    with pytest.raises(PySparkException, match="were not delivered"):
        write(frame, broker, topic="readonly")


@pytest.mark.parametrize(
    ("columns", "options", "named"),
    [
        (["cast(id as string) as key"], {"topic": "t"}, "column 'value' is required"),
        (["cast(id as string) as value"], {}, "option 'topic' is required"),
        (["id as value"], {"topic": "t"}, "column 'value' must be string or binary"),
        (["id as key", "'v' as value"], {"topic": "t"}, "column 'key' must be string or binary"),
        (["'v' as value", "id as partition"], {"topic": "t"}, "column 'partition' must be int"),
        (["'v' as value", "1 as topic"], {}, "column 'topic' must be string"),
        (["'v' as value", "array('h') as headers"], {"topic": "t"}, "column 'headers' must be"),
    ],
)
def test_a_write_names_the_column_or_option_that_is_wrong(
    spark: SparkSession,
    broker: RunningBroker,
    columns: list[str],
    options: dict[str, str],
    named: str,
) -> None:
    frame = spark.range(3).selectExpr(*columns)
    with pytest.raises(PySparkException, match=named):
        write(frame, broker, **options)


def test_overwrite_is_refused(spark: SparkSession, broker: RunningBroker) -> None:
    frame = spark.range(3).selectExpr("cast(id as string) as value")
    writer = frame.write.format("pykafka").option("kafka.bootstrap.servers", broker.bootstrap)
    with pytest.raises(PySparkException, match="save mode 'overwrite' is not supported"):
        writer.option("topic", "t").mode("overwrite").save()


def test_a_write_without_bootstrap_servers_names_the_option(spark: SparkSession) -> None:
    frame = spark.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(PySparkException, match=r"option 'kafka\.bootstrap\.servers' is required"):
        frame.write.format("pykafka").option("topic", "t").mode("append").save()
