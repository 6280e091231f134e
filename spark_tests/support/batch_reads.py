"""Reading a topic in one batch with either of Spark's readers, and the offsets a read
returned, for the tests that hold them to the same account."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame, Row, SparkSession

from nullbroker.app.launcher import RunningBroker


def read(
    spark: SparkSession, broker: RunningBroker, source_format: str = "pykafka", **options: str
) -> DataFrame:
    """The topics `options` name, read with `source_format`: "kafka" (Spark's own
    connector) or "pykafka" (nullbroker.spark's)."""
    reader = spark.read.format(source_format).option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def positions(rows: Iterable[Row]) -> list[tuple[str, int, int]]:
    return sorted((row.topic, row.partition, row.offset) for row in rows)


def every_offset(topic: str, ranges: dict[int, range]) -> list[tuple[str, int, int]]:
    return [(topic, partition, offset) for partition, r in ranges.items() for offset in r]
