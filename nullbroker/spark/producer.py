"""One Spark task's write: a confluent-kafka Producer sends every row of the task's Arrow
batches, flushes, and fails the task if any record was not delivered."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer

from .errors import PyKafkaColumnError
from .options import WriteOptions
from .schema import WriteColumns

PARTITION_BY_KEY = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner decides
# How long to let librdkafka drain its queue when it is full before trying again.
QUEUE_FULL_WAIT_S = 0.005


class DeliveryError(RuntimeError):
    """Records of a write task were not delivered; the task fails so Spark retries it."""


class _Deliveries:
    """Counts failed deliveries; with delivery.report.only.error librdkafka calls back only
    for those, so successful records cost no Python call."""

    def __init__(self) -> None:
        self.failed = 0
        self.first: str | None = None

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            return
        self.failed += 1
        if self.first is None:
            self.first = f"{message.topic()}-{message.partition()}: {error.str()}"


def produce_batches(
    batches: Iterable[pa.RecordBatch], options: WriteOptions, columns: WriteColumns
) -> int:
    """Send every row; returns how many were delivered or raises DeliveryError."""
    deliveries = _Deliveries()
    producer = Producer(
        {**options.producer_config, "delivery.report.only.error": True, "on_delivery": deliveries}
    )
    sent = 0
    for batch in batches:
        sent += _produce_batch(producer, batch, options.topic, columns)
        if deliveries.failed:
            break
    # flush() returns once every record is delivered or has failed (message.timeout.ms).
    while producer.flush(1.0):
        pass
    if deliveries.failed:
        raise DeliveryError(
            f"pykafka: {deliveries.failed} of {sent} records were not delivered; "
            f"the first: {deliveries.first}"
        )
    return sent


def _produce_batch(
    producer: Producer, batch: pa.RecordBatch, topic: str | None, columns: WriteColumns
) -> int:
    rows = batch.num_rows
    values = batch.column(columns.value).to_pylist()
    keys = _column(batch, columns.key, None)
    topics = _column(batch, columns.topic, topic)
    partitions = (
        batch.column(columns.partition).fill_null(PARTITION_BY_KEY).to_pylist()
        if columns.partition is not None
        else repeat(PARTITION_BY_KEY, rows)
    )
    headers = _headers(batch, columns.headers)
    produce = producer.produce
    for row_topic, value, key, partition, row_headers in zip(
        topics, values, keys, partitions, headers, strict=True
    ):
        if row_topic is None:
            raise PyKafkaColumnError(
                "pykafka: a row has a null 'topic'; set one, or use the option 'topic'"
            )
        while True:
            try:
                # A headers keyword, even None, costs a fifth of a produce() call.
                if row_headers is None:
                    produce(row_topic, value, key, partition)
                else:
                    produce(row_topic, value, key, partition, headers=row_headers)
                break
            except BufferError:
                producer.poll(QUEUE_FULL_WAIT_S)
    return rows


def _column(batch: pa.RecordBatch, position: int | None, constant: Any) -> Iterator[Any]:
    if position is None:
        return repeat(constant, batch.num_rows)
    return iter(batch.column(position).to_pylist())


def _headers(batch: pa.RecordBatch, position: int | None) -> Iterator[Any]:
    if position is None:
        return repeat(None, batch.num_rows)
    return (
        None if row is None else [(header["key"], header["value"]) for header in row]
        for row in batch.column(position).to_pylist()
    )
