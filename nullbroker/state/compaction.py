"""Log compaction of a retained partition (`--retain` on a topic with cleanup.policy=compact):
when the ring must let go of bytes, it first cleans what it holds as Kafka's log cleaner does,
keeping the latest record of each key (tombstones too), and drops a batch whole only when the
latest records of its keys alone no longer fit. Reading the topic from its start then yields
what Kafka's cleaned log would: at least the latest value of every key, at its offset, in
order.

As Kafka's cleaner, it leaves the newest batch (Kafka's active segment) alone, keeps a
cleaned batch's offsets (its base offset and last offset delta stay, its records keep their
deltas) and producer fields, writes what it keeps uncompressed (or keeps the batch as it was
when that is smaller), and keeps control batches. Unlike it, tombstones are kept however old
(Kafka drops them delete.retention.ms, a day by default, after cleaning), and a record with
no key is dropped by the first cleaning (Kafka refuses it when produced).
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections import deque

from codec.compression import inflated
from codec.record_batch import HEADER_BYTES, read_batch_header, record_spans, with_records

log = logging.getLogger("nullbroker")

CONTROL = 0x20


class Compaction:
    """The latest offset of each key a partition holds, and the batches cleaned so far."""

    __slots__ = ("kept_offsets", "latest", "name", "warned")

    def __init__(self, name: str) -> None:
        self.name = name
        """The partition, as the warning names it ("orders-3")."""
        self.latest: dict[bytes | None, int] = {}
        self.kept_offsets: dict[int, list[int]] = {}
        """The offsets a cleaned batch still holds, by its base offset: what a Fetch of it
        counts as records."""
        self.warned = False

    def reindex(self, bases: deque[int], ends: deque[int], batches: deque[bytearray]) -> None:
        """Learn the keys and cleaned batches of what a ring holds already."""
        self.latest.clear()
        self.kept_offsets.clear()
        for base, end, batch in zip(bases, ends, batches, strict=True):
            self.index(batch, base)
            header = read_batch_header(batch)
            if not header.attributes & CONTROL and header.record_count < end - base:
                payload = inflated(header.compression, memoryview(batch)[HEADER_BYTES:])
                self.kept_offsets[base] = [
                    base + span.offset_delta for span in record_spans(payload, header.record_count)
                ]

    def index(self, batch: bytes | bytearray, base_offset: int) -> None:
        """Take the keys of a batch just appended: each is now at its newest offset."""
        header = read_batch_header(batch)
        if header.attributes & CONTROL:
            return
        payload = inflated(header.compression, memoryview(batch)[HEADER_BYTES:])
        latest = self.latest
        for span in record_spans(payload, header.record_count):
            latest[span.key] = base_offset + span.offset_delta

    def clean(self, bases: deque[int], ends: deque[int], batches: deque[bytearray]) -> int:
        """Clean every batch but the newest, in place; the bytes held after it."""
        held = 0
        kept_bases: deque[int] = deque()
        kept_ends: deque[int] = deque()
        kept_batches: deque[bytearray] = deque()
        last = len(batches) - 1
        for position, (base, end, batch) in enumerate(zip(bases, ends, batches, strict=True)):
            cleaned = batch if position == last else self._cleaned(base, batch)
            if cleaned is None:
                continue
            kept_bases.append(base)
            kept_ends.append(end)
            kept_batches.append(cleaned)
            held += len(cleaned)
        bases.clear(), ends.clear(), batches.clear()  # type: ignore[func-returns-value]
        bases.extend(kept_bases)
        ends.extend(kept_ends)
        batches.extend(kept_batches)
        return held

    def _cleaned(self, base: int, batch: bytearray) -> bytearray | None:
        """The batch with only the records still the latest of their keys: itself when all
        are (or when rewriting them would not make it smaller), None when none is."""
        header = read_batch_header(batch)
        if header.attributes & CONTROL:
            return batch
        payload = inflated(header.compression, memoryview(batch)[HEADER_BYTES:])
        spans = record_spans(payload, header.record_count)
        latest = self.latest
        kept = [
            span
            for span in spans
            if span.key is not None and latest.get(span.key) == base + span.offset_delta
        ]
        if len(kept) == len(spans):
            return batch
        if not kept:
            self.kept_offsets.pop(base, None)
            return None
        view = memoryview(payload)
        records = bytearray().join(view[span.start : span.end] for span in kept)
        self.kept_offsets[base] = [base + span.offset_delta for span in kept]
        rebuilt = with_records(batch, records, len(kept))
        return rebuilt if len(rebuilt) < len(batch) else batch

    def records_from(self, base: int, end: int, offset: int) -> int:
        """How many records a batch (cleaned or not) holds at or after `offset`."""
        kept = self.kept_offsets.get(base)
        if kept is None:
            return end - max(base, offset)
        return len(kept) - bisect_left(kept, offset)

    def dropping(self, base: int, batch: bytearray) -> int:
        """A batch leaves the ring for want of room: the keys whose latest record it held
        are lost, said once; how many (the caller counts them)."""
        header = read_batch_header(batch)
        self.kept_offsets.pop(base, None)
        if header.attributes & CONTROL:
            return 0
        payload = inflated(header.compression, memoryview(batch)[HEADER_BYTES:])
        lost = 0
        for span in record_spans(payload, header.record_count):
            if self.latest.get(span.key) == base + span.offset_delta:
                del self.latest[span.key]
                lost += 1
        if lost and not self.warned:
            self.warned = True
            log.warning(
                "%s: the latest values of its keys need more than --retain holds: the oldest "
                "keys are dropped (counted; said once)",
                self.name,
            )
        return lost
