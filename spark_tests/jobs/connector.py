"""Where a job reads and writes rows: Kafka through pykafka or Spark's JVM connector (the same
options), or their no-network twins: memrows, the same rows from and to memory through a
Python data source, and range, the same rows built in the JVM."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pyspark.sql import DataFrame, DataFrameReader, DataFrameWriter, SparkSession
from pyspark.sql.streaming import DataStreamReader

from . import range_source
from .memory_source import NAME as MEMROWS
from .settings import JobSettings, TopicShape

Reader = TypeVar("Reader", DataFrameReader, DataStreamReader)
Options = TypeVar("Options", DataFrameReader, DataStreamReader, DataFrameWriter)


@dataclass(frozen=True)
class Connector:
    format: str
    bootstrap: str | None
    kafka_options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def for_settings(cls, settings: JobSettings) -> Connector:
        if settings.networked and not settings.bootstrap:
            raise ValueError(f"format {settings.format!r} needs a bootstrap server")
        return cls(settings.format, settings.bootstrap, settings.kafka_options)

    @property
    def endless(self) -> bool:
        """Whether a stream from it runs on past the topic's end (range's rate source)."""
        return self.format == "range"

    @property
    def spark_format(self) -> str:
        return MEMROWS if self.format == "memory" else self.format

    def read(self, spark: SparkSession, topic: TopicShape) -> DataFrame:
        """Offsets [earliest, records) of each partition: exactly the rows `topic` names,
        even from a topic that holds more."""
        if self.format == "range":
            return range_source.read(spark, topic)
        reader = spark.read.format(self.spark_format)
        if self.format == "memory":
            return _memory_options(reader, topic).load()
        ends = {topic.name: {str(p): topic.records for p in range(topic.partitions)}}
        return (
            self._kafka_options(reader)
            .option("assign", _assignment(topic))
            .option("startingOffsets", "earliest")
            .option("endingOffsets", json.dumps(ends))
            .load()
        )

    def read_stream(self, spark: SparkSession, topic: TopicShape, max_offsets: int) -> DataFrame:
        """Micro-batches of at most `max_offsets` rows from the start of every partition
        (range: of exactly `max_offsets` rows, without end)."""
        if self.format == "range":
            return range_source.read_stream(spark, topic, max_offsets)
        reader = spark.readStream.format(self.spark_format).option(
            "maxOffsetsPerTrigger", str(max_offsets)
        )
        if self.format == "memory":
            return _memory_options(reader, topic).load()
        return (
            self._kafka_options(reader)
            .option("assign", _assignment(topic))
            .option("startingOffsets", "earliest")
            .load()
        )

    def write(self, frame: DataFrame, topic: str, report: Path | None = None) -> None:
        """Append `frame` (key, value and optionally partition columns) to `topic`; memrows
        writes its counts to `report`; range writes to noop."""
        if self.format == "range":
            range_source.write(frame)
            return
        writer = frame.write.format(self.spark_format).mode("append").option("topic", topic)
        if self.format == "memory":
            if report is not None:
                writer = writer.option("reportPath", str(report))
        else:
            writer = self._kafka_options(writer)
        writer.save()

    def _kafka_options(self, reader_or_writer: Options) -> Options:
        options = {"bootstrap.servers": self.bootstrap, **dict(self.kafka_options)}
        for name, value in options.items():
            reader_or_writer = reader_or_writer.option(f"kafka.{name}", value)
        return reader_or_writer


def _assignment(topic: TopicShape) -> str:
    return json.dumps({topic.name: list(range(topic.partitions))})


def _memory_options(reader: Reader, topic: TopicShape) -> Reader:
    return (
        reader.option("topic", topic.name)
        .option("partitions", str(topic.partitions))
        .option("records", str(topic.records))
        .option("size", str(topic.size))
        .option("keySize", str(topic.key_size))
        # As a broker started now would stamp them: 1 ms per offset from its start.
        .option("startMs", str(int(time.time() * 1000)))
    )
