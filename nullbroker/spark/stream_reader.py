"""Streaming reads (`spark.readStream.format("pykafka")`): the driver plans micro-batches from
partition offsets, kept as Spark's Kafka offset JSON in the query's checkpoint."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from .cluster import Cluster
from .consumer import read_range
from .errors import report_data_loss
from .offsets import (
    OffsetRange,
    PartitionOffsets,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)
from .options import ReadOptions

OffsetJson = dict[str, dict[str, int]]


class PyKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Spark's KafkaMicroBatchStream: a new query starts at `startingOffsets` (default latest),
    a micro-batch ends at the latest offsets or fewer with `maxOffsetsPerTrigger`, partitions
    added later are read from their start, and `trigger(availableNow=True)` stops at the
    offsets that were latest when the query started."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.starting = options.streaming_start()
        self._cluster: Cluster | None = None
        self._available_now: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Tasks get a copy of the reader for read(); the driver's client stays behind.
        return {**self.__dict__, "_cluster": None}

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.options.client_config)
        return self._cluster

    def initialOffset(self) -> OffsetJson:
        subscribed = self.cluster.partitions(self.options.subscription)
        return offsets_to_json(self.cluster.resolve(self.starting.for_partitions(subscribed)))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._latest_now()

    def latestOffset(self, start: OffsetJson, limit: ReadLimit) -> OffsetJson:
        latest = self._available_now if self._available_now is not None else self._latest_now()
        self._latest = latest
        if not isinstance(limit, ReadMaxRows):
            return offsets_to_json(latest)
        begin = offsets_from_json(start)
        new_partitions = [key for key in latest if key not in begin]
        earliest_of_new = self.cluster.earliest(new_partitions)
        return offsets_to_json(rate_limit(limit.max_rows, begin, latest, earliest_of_new))

    def reportLatestOffset(self) -> OffsetJson | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: OffsetJson, end: OffsetJson) -> list[InputPartition]:
        begin, until = offsets_from_json(start), offsets_from_json(end)
        fail = self.options.fail_on_data_loss
        deleted = sorted(set(begin) - set(until))
        if deleted:
            names = ", ".join(f"{topic}-{partition}" for topic, partition in deleted)
            report_data_loss(fail, f"partitions {names} are gone")
        new_partitions = [key for key in until if key not in begin]
        earliest_of_new = self.cluster.earliest(new_partitions)
        for (topic, partition), offset in sorted(earliest_of_new.items()):
            if offset != 0:
                report_data_loss(
                    fail, f"added partition {topic}-{partition} starts at {offset}, not 0"
                )
        ranges = []
        for key, end_offset in sorted(until.items()):
            start_offset = begin.get(key, earliest_of_new.get(key, 0))
            if end_offset < start_offset:
                topic, partition = key
                report_data_loss(
                    fail,
                    f"the offset of {topic}-{partition} went back from {start_offset} "
                    f"to {end_offset}",
                )
                continue
            ranges.append(OffsetRange(key[0], key[1], start_offset, end_offset))
        return list(split_ranges(ranges, self.options.min_partitions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        return read_range(partition, self.options)

    def commit(self, end: OffsetJson) -> None:
        """Nothing to do: the checkpoint holds the offsets; Kafka is never told."""

    def stop(self) -> None:
        self._cluster = None

    def _latest_now(self) -> PartitionOffsets:
        return self.cluster.latest(self.cluster.partitions(self.options.subscription))
