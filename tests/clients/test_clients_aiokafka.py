"""aiokafka against `nullbroker serve`: every send acknowledged, offsets and counts exact.

aiokafka needs an asyncio loop, so the test is a plain function that runs one with
asyncio.run (pytest-trio's trio_mode only takes over `async def` tests).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata

from nullbroker.app.pytest_plugin import StartBroker
from tests.support.broker_counts import (
    VALUE_SIZE,
    assert_contiguous_from_zero,
    assert_produced_exactly,
    random_values,
)

pytestmark = pytest.mark.clients

PARTITIONS = 3
RECORDS = 5_000
TIMEOUT = 30.0


async def send_all(
    bootstrap: str, topic: str, values: list[bytes], partitions: int
) -> list[RecordMetadata]:
    """Send keyed records round-robin over explicit partitions and await every ack."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        request_timeout_ms=int(TIMEOUT * 1000),
    )
    await asyncio.wait_for(producer.start(), TIMEOUT)
    try:
        pending = [
            await producer.send(topic, value=value, key=f"k{i}".encode(), partition=i % partitions)
            for i, value in enumerate(values)
        ]
        return await asyncio.wait_for(asyncio.gather(*pending), TIMEOUT)
    finally:
        await asyncio.wait_for(producer.stop(), TIMEOUT)


def test_idempotent_producer_sends_are_acknowledged_with_contiguous_offsets_and_counted_exactly(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", str(PARTITIONS))
    delivered = asyncio.run(
        send_all(broker.bootstrap, "payments", random_values(RECORDS), PARTITIONS)
    )

    assert len(delivered) == RECORDS
    offsets: dict[int, list[int]] = defaultdict(list)
    for metadata in delivered:
        assert metadata.topic == "payments"
        offsets[metadata.partition].append(metadata.offset)
    sent = {p: len(range(p, RECORDS, PARTITIONS)) for p in range(PARTITIONS)}
    assert {partition: len(found) for partition, found in offsets.items()} == sent
    assert_contiguous_from_zero(offsets)

    families = broker.scrape()
    summary = broker.stop()
    assert_produced_exactly(
        summary, families, {("payments", p): n for p, n in sent.items()}, VALUE_SIZE
    )
    assert summary["requests"]["InitProducerId"] == 1
    assert summary["errors"] == {}
    assert summary["connections_closed_on_error"] == {}
