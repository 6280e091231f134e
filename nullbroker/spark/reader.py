"""Batch reads (`spark.read.format("pykafka")`): offsets resolved once on the driver, one
Spark task per offset range."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from .cluster import Cluster
from .consumer import read_range
from .errors import option_error
from .offsets import OffsetRange, split_ranges
from .options import ReadOptions


class PyKafkaBatchReader(DataSourceReader):
    """Reads from `startingOffsets` (default earliest) to `endingOffsets` (default latest),
    both resolved when the query is planned, as Spark's Kafka relation does."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.starting, self.ending = options.batch_bounds()

    def partitions(self) -> list[InputPartition]:
        cluster = Cluster(self.options.client_config)
        subscribed = cluster.partitions(self.options.subscription)
        start = cluster.resolve(self.starting.for_partitions(subscribed))
        end = cluster.resolve(self.ending.for_partitions(subscribed))
        ranges = []
        for key in subscribed:
            if start[key] > end[key]:
                topic, partition = key
                raise option_error(
                    "startingOffsets",
                    f"gives {start[key]} for {topic}-{partition}, after its end {end[key]} "
                    "(option 'endingOffsets')",
                )
            ranges.append(OffsetRange(key[0], key[1], start[key], end[key]))
        return list(split_ranges(ranges, self.options.min_partitions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Spark plans one InputPartition(None) when there is nothing to read.
        if not isinstance(partition, OffsetRange):
            return iter(())
        return read_range(partition, self.options)
