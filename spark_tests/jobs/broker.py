"""The jobs' dealings with the broker itself: what the broker of `--start-broker` (started
by nullbroker.start, jobs/cli.py) counted, `--against kafka` (Apache Kafka 4.4.0,
perf.kafka_broker's one KRaft node, sent the records of the source topics nullbroker
declares), creating the topics a write needs, and checking that a read's source topic holds
the records asked for."""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from nullbroker.spark.cluster import Cluster
from perf.kafka_broker import HEAP, KAFKA_VERSION, KafkaBroker

from .settings import TopicShape, record_cycle

ADMIN_TIMEOUT_S = 30.0
FILL_TIMEOUT_S = 600.0
FILL_PRODUCER = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "compression.type": "none",
}
"""Large batches: the fill is preparation, not measured, and should be over soon."""


@contextmanager
def started_kafka(partitions: int) -> Iterator[KafkaBroker]:
    """Apache Kafka on a free port of 127.0.0.1 (perf.kafka_broker: one KRaft node, `java
    -Xmx1g`, its log in a temporary folder on local disk, `partitions` per auto-created
    topic, Kafka's defaults otherwise); what its topics hold is printed to stderr at the
    block's end, before it stops."""
    with (
        tempfile.TemporaryDirectory(prefix="spark-kafka-") as folder,
        KafkaBroker(Path(folder), properties={"num.partitions": str(partitions)}) as kafka,
    ):
        print(
            f"started Apache Kafka {KAFKA_VERSION} (one KRaft node, {HEAP}) on {kafka.bootstrap}",
            file=sys.stderr,
        )
        yield kafka
        print(kafka_counts(kafka.bootstrap), file=sys.stderr)


def kafka_counts(bootstrap: str) -> str:
    """The records each topic (not Kafka's own) holds: the sum of its log-end offsets."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
    partitions = [
        (name, partition)
        for name, topic in sorted(topics.items())
        if not name.startswith("__")
        for partition in topic.partitions
    ]
    held: dict[str, int] = {}
    for (name, _), end in Cluster({"bootstrap.servers": bootstrap}).latest(partitions).items():
        held[name] = held.get(name, 0) + end
    listed = ", ".join(f"{name} {records:,}" for name, records in sorted(held.items()))
    return f"Kafka holds, by topic: {listed or 'nothing'}"


def fill_source(bootstrap: str, topic: TopicShape) -> None:
    """Send a broker that stores what it is sent (Kafka) the records nullbroker serves for
    `topic` (its source_flag): the same keys and values at the same offsets, exactly
    `topic.records` in each partition of a topic created for them."""
    ensure_topic(bootstrap, topic.name, topic.partitions)
    rows = record_cycle(topic.size, topic.key_size)
    producer = Producer({"bootstrap.servers": bootstrap, **FILL_PRODUCER})
    deadline = time.monotonic() + FILL_TIMEOUT_S
    for partition in range(topic.partitions):
        for offset in range(topic.records):
            key, value = rows[offset % len(rows)]
            _produce(producer, topic.name, partition, key, value, deadline)
    if producer.flush(max(deadline - time.monotonic(), 0.0)):
        raise SystemExit(f"Kafka did not take {topic.name}'s records in {FILL_TIMEOUT_S} s")
    held = Cluster({"bootstrap.servers": bootstrap}).latest(
        (topic.name, partition) for partition in range(topic.partitions)
    )
    if any(end != topic.records for end in held.values()):
        raise SystemExit(f"{topic.name} holds {held}, not {topic.records} in each partition")


def _produce(
    producer: Producer,
    topic: str,
    partition: int,
    key: bytes | None,
    value: bytes,
    deadline: float,
) -> None:
    """One record, waiting while the producer's queue is full."""
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, value, key, partition)
            return
        except BufferError:
            producer.poll(0.05)
    raise SystemExit(f"Kafka did not take {topic}'s records in {FILL_TIMEOUT_S} s")


def broker_counts(summary: dict[str, Any]) -> str:
    """The broker's totals, warm-up included: what it was sent and what it served (a
    consumer that fetches past the end of its range is served more than it reads)."""
    produced = summary["produced"]["records"]
    fetched = summary["fetched"]["records"]
    return f"the broker counted {produced:,.0f} records produced, {fetched:,.0f} fetched"


def ensure_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create `name` with `partitions` partitions unless it exists with at least that many:
    writes name their partition, so a topic auto-created with fewer would refuse them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.create_topics(
        [NewTopic(name, partitions)], request_timeout=ADMIN_TIMEOUT_S
    ).values()
    try:
        future.result()
        return
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    existing = len(admin.list_topics(name, timeout=ADMIN_TIMEOUT_S).topics[name].partitions)
    if existing < partitions:
        raise SystemExit(f"topic {name!r} has {existing} partitions, fewer than {partitions}")


def check_source(bootstrap: str, topic: TopicShape) -> None:
    """Stop with the broker flag to use when `topic` does not hold the records to read."""
    partitions = [(topic.name, partition) for partition in range(topic.partitions)]
    try:
        latest = Cluster({"bootstrap.servers": bootstrap}).latest(partitions)
    except RuntimeError as error:  # the topic or a partition is missing
        short, problem = list(range(topic.partitions)), str(error)
    else:
        short = [partition for (_, partition), end in latest.items() if end < topic.records]
        problem = f"partitions {short} hold fewer than {topic.records} records"
    if short:
        raise SystemExit(
            f"topic {topic.name!r} cannot be read as asked ({problem}); start the broker with "
            f"--source '{topic.source_flag()}' (or pass --start-broker)"
        )
