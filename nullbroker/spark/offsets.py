"""Offset arithmetic of Spark's Kafka source, free of any client: offset ranges (one Spark task
each), their splitting for `minPartitions`, the `maxOffsetsPerTrigger` rate limit, and the JSON
form of offsets in a streaming checkpoint (`{"topic": {"0": 23}}`, as Spark writes it)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from .options import PartitionKey

PartitionOffsets = dict[PartitionKey, int]


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Offsets [start, end) of one topic-partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def offsets_to_json(offsets: Mapping[PartitionKey, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON, topics and partitions in order: Spark compares offsets as
    JSON text to tell whether a micro-batch has new data, so equal offsets must print equally."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in data.items()
        for partition, offset in partitions.items()
    }


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: drop empty ranges and, when there are fewer than
    `min_partitions`, split the large ones in proportion to their size, so every offset still
    falls in exactly one range."""
    non_empty = [offset_range for offset_range in ranges if offset_range.size > 0]
    if min_partitions is None or len(non_empty) >= min_partitions:
        return non_empty
    total = sum(offset_range.size for offset_range in non_empty)
    # Ranges too small to split are left out of the proportions of the ones that are split.
    unsplit = [r for r in non_empty if _part_count(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in unsplit)
    split_min_partitions = max(min_partitions - len(unsplit), 1)
    result: list[OffsetRange] = []
    for offset_range in non_empty:
        parts = (
            1
            if offset_range in unsplit
            else _part_count(offset_range.size, split_total, split_min_partitions)
        )
        remaining = offset_range.size
        start = offset_range.start
        for part in range(parts):
            # The last part takes what integer division left over.
            this_part = remaining // (parts - part)
            remaining -= this_part
            end = min(start + this_part, offset_range.end)
            if end > start:
                result.append(OffsetRange(offset_range.topic, offset_range.partition, start, end))
            start = end
    return result


def rate_limit(
    limit: int,
    start: Mapping[PartitionKey, int],
    latest: Mapping[PartitionKey, int],
    earliest_of_new: Mapping[PartitionKey, int],
) -> PartitionOffsets:
    """Spark's maxOffsetsPerTrigger: share `limit` offsets among the partitions in proportion
    to how far each is behind `latest`, never starving a small one (a share below one offset
    rounds up). Partitions missing from `start` begin at `earliest_of_new`."""
    sizes: dict[PartitionKey, int] = {}
    for key, end in latest.items():
        begin = start.get(key, earliest_of_new.get(key))
        if begin is not None and end - begin > 0:
            sizes[key] = end - begin
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    limited: PartitionOffsets = {}
    for key, end in latest.items():
        if key not in sizes:
            limited[key] = end
            continue
        begin = start.get(key, earliest_of_new.get(key, 0))
        share = limit * (sizes[key] / total)
        offsets = math.ceil(share) if share < 1 else math.floor(share)
        limited[key] = min(end, begin + offsets)
    return limited


def _part_count(size: int, total: int, min_partitions: int) -> int:
    # Scala's Math.round: halves round up.
    return max(math.floor(size / total * min_partitions + 0.5), 1)
