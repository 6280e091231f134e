"""A compacted topic (cleanup.policy=compact) whose history outgrows `--retain`: a consumer
reading it from the start gets the latest value of every key, as from Apache Kafka 4.4.0 given
the same records; the same run against both (nullbroker.state.compaction)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from nullbroker.app.pytest_plugin import StartBroker
from perf.kafka_broker import KafkaBroker

pytestmark = pytest.mark.clients

KEYS, ROUNDS = 400, 80
"""400 keys written once, then the first half of them ROUNDS - 1 times more: 32,000 records,
about 1 MB of history, where the latest values of the keys take about 15 KB; the keys of
the second half were written only at the start, which --retain alone would have let go."""
WRITTEN = KEYS + (ROUNDS - 1) * (KEYS // 2)
RETAIN = 64 * 1024
READ_SECONDS = 180
"""How long a read of the whole topic may take at most (a group join, then 32,000 records)."""


def written(bootstrap: str, topic: str) -> dict[bytes, bytes]:
    """Create the compacted topic, write its keys (KEYS), and return each key's latest
    value."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics(
        [NewTopic(topic, 1, 1, config={"cleanup.policy": "compact", "segment.bytes": "1048576"})]
    )
    created[topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4096})
    latest: dict[bytes, bytes] = {}
    for round_ in range(ROUNDS):
        for key in range(KEYS if round_ == 0 else KEYS // 2):
            name, value = b"key-%04d" % key, b"value-%04d-%03d" % (key, round_)
            producer.produce(topic, key=name, value=value)
            latest[name] = value
        producer.poll(0)
    assert producer.flush(60) == 0
    return latest


def read_from_start(bootstrap: str, topic: str) -> tuple[dict[bytes, bytes], list[int]]:
    """Every record from the start to the end, as a consumer with no group sees it: each
    key's last value read, and the offsets read."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    values: dict[bytes, bytes] = {}
    offsets: list[int] = []
    try:
        deadline = time.monotonic() + READ_SECONDS
        while time.monotonic() < deadline:
            message = consumer.poll(0.05)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(message.error())
            values[message.key()] = message.value()
            offsets.append(message.offset())
        else:
            raise AssertionError("the end of the topic was never reached")
    finally:
        consumer.close()
    return values, offsets


@pytest.mark.parametrize("against", ["nullbroker", "kafka-4.4.0"])
def test_a_compacted_topic_read_from_its_start_has_the_latest_value_of_every_key(
    against: str, nullbroker_factory: StartBroker, request: pytest.FixtureRequest
) -> None:
    if against == "nullbroker":
        broker = nullbroker_factory("--retain", str(RETAIN))
        bootstrap = broker.bootstrap
    else:
        kafka: KafkaBroker = request.getfixturevalue("kafka")
        bootstrap = kafka.bootstrap
    topic = f"compacted-{against}"
    latest = written(bootstrap, topic)
    values, offsets = read_from_start(bootstrap, topic)
    assert values == latest
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert offsets[-1] == WRITTEN - 1  # the offsets are those written
    if against == "nullbroker":
        assert len(offsets) < WRITTEN  # the ring held less than the history...
        produced = broker.stop()["produced"]["topics"][topic]["partitions"]["0"]
        assert produced["records"] == WRITTEN  # ...all of which was counted
