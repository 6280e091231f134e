"""One Spark task's read: a confluent-kafka Consumer assigned to one topic-partition at the
range's start (no group, no commits) reads until the range's end and hands Spark Arrow record
batches. Missing offsets are data loss, reported as failOnDataLoss says."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import chain

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from .errors import report_data_loss
from .offsets import OffsetRange
from .options import ReadOptions
from .schema import arrow_schema

# Rows per Arrow batch: Spark's default spark.sql.execution.arrow.maxRecordsPerBatch.
BATCH_ROWS = 10_000
# How long one consume() call may wait. It returns early once it has all the messages asked
# for, and the task asks for no more than its range holds, so this only bounds the wait for
# a stalled partition between checks of the partition's offsets.
CONSUME_WAIT_S = 1.0
WATERMARK_TIMEOUT_S = 30.0
_OUT_OF_RANGE = (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)
_US = pa.timestamp("us", tz="UTC")


def read_range(offset_range: OffsetRange, options: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Every record of `offset_range` once, in offset order, as Arrow batches."""
    if offset_range.size <= 0:
        return
    consumer = Consumer(options.consumer_config(offset_range.size))
    try:
        batches = _RangeReader(consumer, offset_range, options).batches()
        while True:
            # consume() makes one Message object per record, which the cyclic collector
            # tracks and walks again and again while a batch fills, though none can be in a
            # cycle: 0.3-1.0 µs a record, 15-35% of a task's reading. Paused while reading
            # only, not while Spark has the batch.
            with cyclic_gc_paused():
                batch = next(batches, None)
            if batch is None:
                return
            yield batch
    finally:
        consumer.close()


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block, then as it was (reference counting
    frees what the block drops either way)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _RangeReader:
    def __init__(self, consumer: Consumer, offset_range: OffsetRange, options: ReadOptions):
        self.consumer = consumer
        self.range = offset_range
        self.options = options
        self.schema = arrow_schema(options.include_headers)
        self.next_offset = offset_range.start

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Arrow batches of BATCH_ROWS records (the last one smaller); the messages of a
        batch are released before it is handed on."""
        self._assign(self.next_offset)
        pending: list[Message] = []
        idle_since = time.monotonic()
        while self.next_offset < self.range.end:
            wanted = min(self.range.end - self.next_offset, BATCH_ROWS - len(pending))
            messages = self.consumer.consume(wanted, CONSUME_WAIT_S)
            if not messages:
                self._check_stalled(idle_since)
                continue
            before = len(pending)
            pending.extend(self._records(messages))
            messages.clear()  # a new list from every consume(): ours to empty
            if len(pending) > before:
                idle_since = time.monotonic()
            if len(pending) >= BATCH_ROWS:
                batch, pending = self._batch(pending), []
                yield batch
        if pending:
            yield self._batch(pending)

    def _records(self, messages: Sequence[Message]) -> list[Message]:
        """The records in `messages` up to the range's end, advancing `next_offset`; errors and
        gaps are handled (or raised) here."""
        if self._all_wanted(messages):
            self.next_offset += len(messages)
            return list(messages)
        records: list[Message] = []
        for message in messages:
            error = message.error()
            if error is not None:
                self._on_error(error)
                continue
            offset = message.offset()
            if offset < self.next_offset:
                continue  # fetched again after a re-assign
            if offset > self.next_offset:
                self._on_gap(offset)
            if offset >= self.range.end:
                break
            records.append(message)
            self.next_offset = offset + 1
        return records

    def _all_wanted(self, messages: Sequence[Message]) -> bool:
        """The common case, checked without a Python step per record beyond error(): records
        only, contiguous from `next_offset`, all before the range's end."""
        if not messages or any(message.error() is not None for message in messages):
            return False
        first, last = messages[0].offset(), messages[-1].offset()
        return (
            first == self.next_offset
            and last - first == len(messages) - 1
            and last < self.range.end
        )

    def _on_error(self, error: KafkaError) -> None:
        if error.code() in _OUT_OF_RANGE:
            low, high = self._watermarks()
            if self.next_offset < low:
                self._lost(min(low, self.range.end), f"the log now starts at {low}")
            elif self.next_offset >= high:
                self._lost(self.range.end, f"the log now ends at {high}")
            if self.next_offset < self.range.end:
                self._assign(self.next_offset)
        elif not error.retriable():
            raise KafkaException(error)

    def _on_gap(self, offset: int) -> None:
        self._lost(min(offset, self.range.end), f"the next record has offset {offset}")

    def _check_stalled(self, idle_since: float) -> None:
        """Nothing came: if the offsets still wanted no longer exist that is data loss;
        otherwise give up after kafkaConsumer.pollTimeoutMs without a record."""
        low, high = self._watermarks()
        if self.next_offset >= high:
            self._lost(self.range.end, f"the log now ends at {high}")
        elif self.next_offset < low:
            self._lost(min(low, self.range.end), f"the log now starts at {low}")
            if self.next_offset < self.range.end:
                self._assign(self.next_offset)
        elif (time.monotonic() - idle_since) * 1000 >= self.options.poll_timeout_ms:
            raise TimeoutError(
                f"pykafka: no record of {self._name()} at offset {self.next_offset} came within "
                f"{self.options.poll_timeout_ms} ms (option 'kafkaConsumer.pollTimeoutMs')"
            )

    def _lost(self, resume_at: int, why: str) -> None:
        report_data_loss(
            self.options.fail_on_data_loss,
            f"offsets [{self.next_offset}, {resume_at}) of {self._name()} cannot be read ({why})",
        )
        self.next_offset = resume_at

    def _assign(self, offset: int) -> None:
        self.consumer.assign([TopicPartition(self.range.topic, self.range.partition, offset)])

    def _watermarks(self) -> tuple[int, int]:
        partition = TopicPartition(self.range.topic, self.range.partition)
        low, high = self.consumer.get_watermark_offsets(
            partition, timeout=WATERMARK_TIMEOUT_S, cached=False
        )
        return low, high

    def _name(self) -> str:
        return f"{self.range.topic}-{self.range.partition}"

    def _batch(self, records: list[Message]) -> pa.RecordBatch:
        return to_record_batch(
            records, self.range.topic, self.range.partition, self.schema, self.options
        )


def to_record_batch(
    records: list[Message],
    topic: str,
    partition: int,
    schema: pa.Schema,
    options: ReadOptions,
) -> pa.RecordBatch:
    """Messages of one partition as a batch of Spark's Kafka schema: a column at a time, so
    the per-record work is one method call per column that varies."""
    count = len(records)
    first, last = records[0].offset(), records[-1].offset()
    # A partition's offsets only grow: `count` of them spanning `count` offsets are contiguous.
    if last - first == count - 1:
        offsets = pa.array(np.arange(first, last + 1, dtype=np.int64))
    else:
        offsets = pa.array([record.offset() for record in records], pa.int64())
    # (type, ms) pairs, flattened into one int64 array as numpy reads them.
    stamps = np.fromiter(
        chain.from_iterable(record.timestamp() for record in records), np.int64, 2 * count
    ).reshape(count, 2)
    columns = [
        pa.array([record.key() for record in records], pa.binary()),
        pa.array([record.value() for record in records], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        offsets,
        pa.array(stamps[:, 1] * 1000).view(_US),
        # librdkafka numbers the types from 1 (create time); Kafka's Java client, and so
        # Spark, from 0.
        pa.array((stamps[:, 0] - 1).astype(np.int32)),
    ]
    if options.include_headers:
        headers_type = schema.field("headers").type
        columns.append(pa.array([record.headers() for record in records], headers_type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
