"""kafka-python against `nullbroker serve`: every send acknowledged, offsets and counts exact."""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Any

import pytest

with warnings.catch_warnings():
    # kafka-python loads its protocol schemas, on import, with importlib.resources calls
    # that Python deprecates: the library's business, not this test's.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer

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


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"acks": "all", "enable_idempotence": True}, id="idempotent-acks-all"),
        pytest.param(
            {"acks": 1, "enable_idempotence": False, "compression_type": "gzip"}, id="acks-1-gzip"
        ),
    ],
)
def test_producer_sends_are_acknowledged_with_contiguous_offsets_and_counted_exactly(
    nullbroker_factory: StartBroker, settings: dict[str, Any]
) -> None:
    broker = nullbroker_factory("--partitions", str(PARTITIONS))
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        linger_ms=5,
        max_block_ms=int(TIMEOUT * 1000),
        request_timeout_ms=int(TIMEOUT * 1000),
        **settings,
    )
    values = random_values(RECORDS)
    sent: dict[int, int] = defaultdict(int)
    futures = []
    try:
        for i, value in enumerate(values):
            partition = i % PARTITIONS
            futures.append(
                producer.send("clicks", value=value, key=f"user-{i}".encode(), partition=partition)
            )
            sent[partition] += 1
        producer.flush(timeout=TIMEOUT)
        # get() raises the send's error, if any: every record must have been acknowledged.
        delivered = [future.get(timeout=TIMEOUT) for future in futures]
    finally:
        producer.close(timeout=TIMEOUT)

    offsets: dict[int, list[int]] = defaultdict(list)
    for metadata in delivered:
        assert metadata.topic == "clicks"
        offsets[metadata.partition].append(metadata.offset)
    assert {partition: len(found) for partition, found in offsets.items()} == sent
    assert_contiguous_from_zero(offsets)

    families = broker.scrape()
    summary = broker.stop()
    assert_produced_exactly(
        summary, families, {("clicks", p): n for p, n in sent.items()}, VALUE_SIZE
    )
    assert summary["errors"] == {}
    assert summary["connections_closed_on_error"] == {}
    assert ("InitProducerId" in summary["requests"]) == settings["enable_idempotence"]
