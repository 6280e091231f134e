"""`memrows`: the in-memory twin of the pykafka source and sink, for the protocol-overhead
ratio. It plans exactly as pykafka does (one Spark task per topic-partition offset range,
Arrow batches of the same size) and yields the same rows a nullbroker source topic serves,
but builds them from memory: no client, no socket, no broker.

Read options: `topic`, `partitions`, `records` (per partition), `size` (value bytes),
`keySize`, `startMs` (the timestamp of offset 0), `maxOffsetsPerTrigger` (streaming).
Write options: `topic` (ignored, as nothing is sent) and `reportPath`, where the driver
writes `{"rows": N, "value_bytes": B}` once the write commits, so a caller can check counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from nullbroker.spark.consumer import BATCH_ROWS
from nullbroker.spark.offsets import (
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)
from nullbroker.spark.options import PartitionKey, lower_keys
from nullbroker.spark.schema import arrow_schema, read_schema, write_columns

from .settings import record_cycle

NAME = "memrows"
_US = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class MemoryTopic:
    """The rows of a bounded nullbroker source topic (`records` per partition, no rate)."""

    topic: str
    partitions: int
    records: int
    size: int
    key_size: int
    start_ms: int

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> MemoryTopic:
        lowered = lower_keys(options)
        return cls(
            topic=lowered.get("topic", NAME),
            partitions=int(lowered.get("partitions", "1")),
            records=int(lowered.get("records", "0")),
            size=int(lowered.get("size", "100")),
            key_size=int(lowered.get("keysize", "0")),
            start_ms=int(lowered.get("startms", "0")),
        )

    def ends(self) -> dict[PartitionKey, int]:
        return {(self.topic, partition): self.records for partition in range(self.partitions)}

    def ranges(
        self, start: Mapping[PartitionKey, int], end: Mapping[PartitionKey, int]
    ) -> list[OffsetRange]:
        return [
            OffsetRange(topic, partition, start.get((topic, partition), 0), until)
            for (topic, partition), until in sorted(end.items())
        ]

    def batches(self, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
        """The rows of `offset_range` in Arrow batches of pykafka's size. Keys and values
        repeat with the index in the broker's batch layout, so they are gathered (a copy in
        C++) from one cycle of them: what the rows cost to exist in memory, and no more."""
        cycle_keys, cycle_values, cycle = _cycle(self.size, self.key_size)
        schema = arrow_schema(False)
        for first in range(offset_range.start, offset_range.end, BATCH_ROWS):
            offsets = np.arange(first, min(first + BATCH_ROWS, offset_range.end), dtype=np.int64)
            count = len(offsets)
            # Without a rate the broker stamps 1 ms per offset from its start (NOMINAL_RATE).
            micros = (offsets + self.start_ms) * 1000
            positions = pa.array(offsets % cycle)
            columns = [
                cycle_keys.take(positions),
                cycle_values.take(positions),
                pa.repeat(pa.scalar(offset_range.topic, pa.string()), count),
                pa.repeat(pa.scalar(offset_range.partition, pa.int32()), count),
                pa.array(offsets, pa.int64()),
                pa.array(micros, pa.int64()).view(_US),
                pa.repeat(pa.scalar(0, pa.int32()), count),  # CreateTime
            ]
            yield pa.RecordBatch.from_arrays(columns, schema=schema)


@cache
def _cycle(size: int, key_size: int) -> tuple[pa.Array, pa.Array, int]:
    """Keys and values of the indices 0 … batch_records-1 of nullbroker's record layout."""
    rows = record_cycle(size, key_size)
    keys = pa.array([key for key, _ in rows], pa.binary())
    values = pa.array([value for _, value in rows], pa.binary())
    return keys, values, len(rows)


class MemRowsReader(DataSourceReader):
    def __init__(self, topic: MemoryTopic) -> None:
        self.topic = topic

    def partitions(self) -> list[InputPartition]:
        return list(split_ranges(self.topic.ranges({}, self.topic.ends()), None))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            return iter(())
        return self.topic.batches(partition)


class MemRowsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches from offset 0 to `records`, limited by `maxOffsetsPerTrigger` as
    pykafka's (and Spark's) Kafka source limits them."""

    def __init__(self, topic: MemoryTopic, max_offsets: int | None) -> None:
        self.topic = topic
        self.max_offsets = max_offsets

    def initialOffset(self) -> dict[str, dict[str, int]]:
        return offsets_to_json(dict.fromkeys(self.topic.ends(), 0))

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable() if self.max_offsets is None else ReadMaxRows(self.max_offsets)

    def prepareForTriggerAvailableNow(self) -> None:
        """Nothing to pin: the topic is bounded, its end never moves."""

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict[str, dict[str, int]]:
        latest = self.topic.ends()
        if not isinstance(limit, ReadMaxRows):
            return offsets_to_json(latest)
        return offsets_to_json(rate_limit(limit.max_rows, offsets_from_json(start), latest, {}))

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        ranges = self.topic.ranges(offsets_from_json(start), offsets_from_json(end))
        return list(split_ranges(ranges, None))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        return self.topic.batches(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the checkpoint holds the offsets."""


@dataclass(frozen=True)
class MemoryWriteReport(WriterCommitMessage):
    rows: int
    value_bytes: int


class MemRowsWriter(DataSourceArrowWriter):
    """The sink's twin: takes the rows a Kafka write would send and keeps only their count
    and value bytes (read from Arrow's offsets, no Python step per row)."""

    def __init__(self, value_column: int, report_path: str | None) -> None:
        self.value_column = value_column
        self.report_path = report_path

    def write(self, iterator: Iterator[pa.RecordBatch]) -> MemoryWriteReport:
        rows = value_bytes = 0
        for batch in iterator:
            rows += batch.num_rows
            value_bytes += pc.sum(pc.binary_length(batch.column(self.value_column))).as_py() or 0
        return MemoryWriteReport(rows, value_bytes)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        reports = [message for message in messages if isinstance(message, MemoryWriteReport)]
        if self.report_path is not None:
            total = {
                "rows": sum(report.rows for report in reports),
                "value_bytes": sum(report.value_bytes for report in reports),
            }
            Path(self.report_path).write_text(json.dumps(total))


class MemRowsDataSource(DataSource):
    """`format("memrows")`: the pykafka schema and planning, rows from memory."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return read_schema(False)

    def reader(self, schema: StructType) -> MemRowsReader:
        return MemRowsReader(MemoryTopic.from_options(self.options))

    def streamReader(self, schema: StructType) -> MemRowsStreamReader:
        limit = lower_keys(self.options).get("maxoffsetspertrigger")
        return MemRowsStreamReader(
            MemoryTopic.from_options(self.options), None if limit is None else int(limit)
        )

    def writer(self, schema: StructType, overwrite: bool) -> MemRowsWriter:
        options = lower_keys(self.options)
        columns = write_columns(schema, options.get("topic"))
        return MemRowsWriter(columns.value, options.get("reportpath"))
