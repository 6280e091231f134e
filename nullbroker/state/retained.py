"""The retention tail (`--retain BYTES`): a produced partition's newest batches, kept as
received and served back by Fetch with their real offsets.

A batch is stored with its base offset and partition leader epoch set (producers send 0 and
-1), so it is served as Kafka serves it; its CRC-32C covers neither, so the batch stays
valid. When the batches
held pass `capacity` bytes the oldest go, and the partition's log start offset moves to the
first one kept, as Kafka's retention moves it; the newest batch is always kept, even if it
alone is larger. Memory: at most `capacity` bytes (or one batch) per partition, counted in
`nullbroker_retained_bytes`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque

from codec.compression import inflated
from codec.framing import Buffer
from codec.record_batch import (
    HEADER_BYTES,
    batch_leader_epoch,
    batch_timestamps,
    read_batch_header,
    rebased,
    record_timestamps,
)

from ..stats import PartitionCounters
from .compaction import Compaction

Found = tuple[int, int, int]
"""A ListOffsets answer from the batches: (offset, timestamp, leader epoch)."""


class RetainedBatches:
    __slots__ = ("_bases", "_batches", "_ends", "capacity", "compaction", "counters")

    def __init__(self, capacity: int, counters: PartitionCounters) -> None:
        self.capacity = capacity
        self.counters = counters
        """The partition's produced counters; `retained_bytes` is kept up to date."""
        self._bases: deque[int] = deque()
        self._ends: deque[int] = deque()
        self._batches: deque[bytearray] = deque()
        self.compaction: Compaction | None = None
        """Set while the topic's cleanup.policy compacts (Topic.compacts): what must go is
        cleaned first (nullbroker.state.compaction)."""

    def append(
        self, base_offset: int, record_count: int, records: Buffer, leader_epoch: int = 0
    ) -> int:
        """Keep a batch just given offsets and the leader's epoch, as Kafka stamps it
        (copied: `records` is a view of the request); the log start offset after dropping
        what no longer fits."""
        batch = rebased(records, base_offset, leader_epoch)
        self._bases.append(base_offset)
        self._ends.append(base_offset + record_count)
        self._batches.append(batch)
        held = self.counters.retained_bytes + len(batch)
        compaction = self.compaction
        if compaction is not None:
            compaction.index(batch, base_offset)
            if held > self.capacity:
                held = compaction.clean(self._bases, self._ends, self._batches)
        while held > self.capacity and len(self._batches) > 1:
            base = self._bases.popleft()
            self._ends.popleft()
            dropped = self._batches.popleft()
            if compaction is not None:
                self.counters.compaction_dropped += compaction.dropping(base, dropped)
            held -= len(dropped)
        self.counters.retained_bytes = held
        return self._bases[0]

    def first_offset(self, otherwise: int) -> int:
        """The base offset of the oldest batch held (`otherwise` if none is): the records
        before it are gone from the ring."""
        return self._bases[0] if self._bases else otherwise

    def drop_below(self, log_start: int) -> None:
        """Let go of the batches wholly below a new log start (DeleteRecords): no Fetch can
        read them. The batch holding `log_start` stays, as Kafka serves it."""
        held = self.counters.retained_bytes
        while self._ends and self._ends[0] <= log_start:
            self._bases.popleft()
            self._ends.popleft()
            held -= len(self._batches.popleft())
        self.counters.retained_bytes = held

    def clear(self) -> None:
        self._bases.clear()
        self._ends.clear()
        self._batches.clear()
        self.counters.retained_bytes = 0
        if self.compaction is not None:
            self.compaction = Compaction(self.compaction.name)

    def compact(self, name: str | None) -> None:
        """Compact from now on, naming the partition `name` in what it logs, or stop (None):
        a topic's cleanup.policy came to include compact, or ceased to."""
        if name is None:
            self.compaction = None
        elif self.compaction is None:
            self.compaction = Compaction(name)
            self.compaction.reindex(self._bases, self._ends, self._batches)

    def take(self) -> list[tuple[int, int, bytearray]]:
        """Every batch held, as (base offset, end offset, batch), leaving none: the
        partition's leader is moving to another process (`--processes`)."""
        held = list(zip(self._bases, self._ends, self._batches, strict=True))
        self.clear()
        return held

    def put(self, held: list[tuple[int, int, bytearray]]) -> None:
        """Hold what `take` gave, in place of anything held."""
        self.clear()
        for base, end, batch in held:
            self._bases.append(base)
            self._ends.append(end)
            self._batches.append(batch)
        self.counters.retained_bytes = sum(len(batch) for _, _, batch in held)
        if self.compaction is not None:  # what it knew stayed with the process it came from
            self.compaction.reindex(self._bases, self._ends, self._batches)

    def read(
        self,
        offset: int,
        limit: int,
        first: bool,
        end: int | None = None,
    ) -> tuple[list[Buffer], int, int]:
        """Whole batches from the one holding `offset`, within `limit` bytes (the first of a
        response even if larger, as Kafka sends it), the records in them at or after
        `offset`, and their size; none from `end` on (a read_committed Fetch's last stable
        offset)."""
        parts: list[Buffer] = []
        compaction = self.compaction
        index = max(bisect_right(self._bases, offset) - 1, 0)
        size = count = 0
        for position in range(index, len(self._batches)):
            if self._ends[position] <= offset:
                continue
            base = self._bases[position]
            if end is not None and base >= end:
                break
            batch = self._batches[position]
            if size + len(batch) > limit and (parts or not first):
                break
            parts.append(batch)
            size += len(batch)
            if compaction is None:
                count += self._ends[position] - max(base, offset)
            else:  # a cleaned batch holds fewer records than offsets
                count += compaction.records_from(base, self._ends[position], offset)
        return parts, count, size

    def offset_for_timestamp(self, target: int, start: int) -> Found | None:
        """The first record at or after offset `start` whose timestamp is `target` or later,
        as Kafka's LogSegment.findOffsetByTimestamp finds it: the first batch whose max
        timestamp reaches it (from the headers), and in that batch only, the records."""
        for position, batch in enumerate(self._batches):
            if self._ends[position] <= start or batch_timestamps(batch)[1] < target:
                continue
            for offset, timestamp in _records(batch, self._bases[position]):
                if offset >= start and timestamp >= target:
                    return offset, timestamp, batch_leader_epoch(batch)
        return None

    def max_timestamp(self) -> Found | None:
        """The record of the largest timestamp held (the first batch that has it, its first
        record that has it), as Kafka answers ListOffsets' MAX_TIMESTAMP (-3)."""
        best: bytearray | None = None
        best_base = best_timestamp = 0
        for base, batch in zip(self._bases, self._batches, strict=True):
            timestamp = batch_timestamps(batch)[1]
            if best is None or timestamp > best_timestamp:
                best, best_base, best_timestamp = batch, base, timestamp
        if best is None:
            return None
        for offset, timestamp in _records(best, best_base):
            if timestamp == best_timestamp:
                return offset, timestamp, batch_leader_epoch(best)
        return best_base, best_timestamp, batch_leader_epoch(best)


def _records(batch: bytearray, base_offset: int) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of a held batch, inflated if compressed."""
    header = read_batch_header(batch)
    base_timestamp = batch_timestamps(batch)[0]
    payload = inflated(header.compression, memoryview(batch)[HEADER_BYTES:])
    return [
        (base_offset + delta, timestamp)
        for delta, timestamp in record_timestamps(payload, header.record_count, base_timestamp)
    ]
