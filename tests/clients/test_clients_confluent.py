"""confluent-kafka (librdkafka) against `nullbroker serve`: producers, admin, ListOffsets."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from nullbroker.app.pytest_plugin import StartBroker
from tests.support.broker_counts import (
    VALUE_SIZE,
    assert_contiguous_from_zero,
    assert_produced_exactly,
    metric_total,
    random_values,
)

pytestmark = pytest.mark.clients

PARTITIONS = 3
RECORDS = 6_000
FLUSH_TIMEOUT = 30.0
ADMIN_TIMEOUT = 10.0
# Small batches (Java's default size), so each partition gets many batches and offsets
# must chain across them, not only within one.
BATCHING = {"linger.ms": 5, "batch.size": 16_384}


class Deliveries:
    """What the delivery reports said: errors, and offsets per partition in report order."""

    def __init__(self) -> None:
        self.errors: list[KafkaError] = []
        self.offsets: dict[int, list[int]] = defaultdict(list)
        self.count = 0

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        self.count += 1
        if error is not None:
            self.errors.append(error)
        else:
            self.offsets[message.partition()].append(message.offset())


def produce(
    producer: Producer, topic: str, count: int, partitions: int
) -> tuple[Deliveries, dict[int, int]]:
    """Send `count` keyed records round-robin over explicit partitions; flush; return the
    delivery reports and how many records went to each partition."""
    values = random_values(count)
    deliveries = Deliveries()
    sent: dict[int, int] = defaultdict(int)
    for i in range(count):
        partition = i % partitions
        producer.produce(
            topic,
            value=values[i],
            key=f"key-{i}".encode(),
            partition=partition,
            on_delivery=deliveries,
        )
        sent[partition] += 1
        producer.poll(0)
    assert producer.flush(FLUSH_TIMEOUT) == 0, "records still undelivered after the flush timeout"
    return deliveries, dict(sent)


def expected(topic: str, sent: Mapping[int, int]) -> dict[tuple[str, int], int]:
    return {(topic, partition): n for partition, n in sent.items()}


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4", "zstd", "snappy"])
def test_idempotent_acks_all_producer_gets_contiguous_offsets_and_exact_counts(
    nullbroker_factory: StartBroker, compression: str
) -> None:
    broker = nullbroker_factory("--partitions", str(PARTITIONS))
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": compression,
            **BATCHING,
        }
    )
    deliveries, sent = produce(producer, "events", RECORDS, PARTITIONS)
    producer.close()

    assert deliveries.count == RECORDS
    assert deliveries.errors == []
    # Idempotence keeps order per partition, so the reports come in offset order.
    for partition, offsets in deliveries.offsets.items():
        assert offsets == list(range(sent[partition])), f"partition {partition}"
    families = broker.scrape()
    summary = broker.stop()
    assert_produced_exactly(summary, families, expected("events", sent), VALUE_SIZE)
    for partition, counts in summary["produced"]["topics"]["events"]["partitions"].items():
        assert counts["batches"] > 1, f"partition {partition} got one batch: offsets unchained"
    # One producer id for the whole run: the idempotent path was taken.
    assert summary["requests"]["InitProducerId"] == 1
    assert summary["errors"] == {}
    assert summary["connections_closed_on_error"] == {}


def test_acks_0_producer_records_are_all_counted_though_the_broker_never_answers(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", str(PARTITIONS))
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": False,
            "acks": 0,
            **BATCHING,
        }
    )
    deliveries, sent = produce(producer, "fire-and-forget", RECORDS, PARTITIONS)
    producer.close()

    # With acks=0 a delivery report only means "written to the socket": no offsets exist.
    assert deliveries.count == RECORDS
    assert deliveries.errors == []
    # The client is done once the bytes are in the socket; wait (bounded) for the broker
    # to have read them all, then the counts must be exact.
    families = broker.scrape_until(
        lambda families: metric_total(families, "nullbroker_produced_records_total") >= RECORDS
    )
    summary = broker.stop()
    assert_produced_exactly(summary, families, expected("fire-and-forget", sent), VALUE_SIZE)
    assert "InitProducerId" not in summary["requests"]
    assert summary["errors"] == {}


def test_admin_client_creates_grows_describes_and_deletes_topics(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", str(PARTITIONS))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    created = admin.create_topics(
        [
            NewTopic("orders", num_partitions=2, config={"retention.ms": "60000"}),
            NewTopic("audit"),
        ],
        request_timeout=ADMIN_TIMEOUT,
    )
    for future in created.values():
        assert future.result(timeout=ADMIN_TIMEOUT) is None
    topics = admin.list_topics(timeout=ADMIN_TIMEOUT).topics
    assert len(topics["orders"].partitions) == 2
    # A topic created without a count gets --partitions.
    assert len(topics["audit"].partitions) == PARTITIONS

    again = admin.create_topics([NewTopic("orders", num_partitions=2)])["orders"]
    with pytest.raises(KafkaException) as already:
        again.result(timeout=ADMIN_TIMEOUT)
    assert already.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    grown = admin.create_partitions([NewPartitions("orders", 4)], request_timeout=ADMIN_TIMEOUT)
    assert grown["orders"].result(timeout=ADMIN_TIMEOUT) is None
    assert len(admin.list_topics(timeout=ADMIN_TIMEOUT).topics["orders"].partitions) == 4

    resource = ConfigResource(ResourceType.TOPIC, "orders")
    configs = admin.describe_configs([resource])[resource].result(timeout=ADMIN_TIMEOUT)
    assert configs["retention.ms"].value == "60000"
    assert configs["cleanup.policy"].value == "delete"

    cluster = admin.describe_cluster(request_timeout=ADMIN_TIMEOUT).result(timeout=ADMIN_TIMEOUT)
    host, port = broker.bootstrap.rsplit(":", 1)
    assert [(node.host, node.port) for node in cluster.nodes] == [(host, int(port))]
    assert cluster.controller is not None and cluster.controller.id == cluster.nodes[0].id
    assert cluster.cluster_id

    deleted = admin.delete_topics(["orders"], request_timeout=ADMIN_TIMEOUT)
    assert deleted["orders"].result(timeout=ADMIN_TIMEOUT) is None
    assert set(admin.list_topics(timeout=ADMIN_TIMEOUT).topics) == {"audit"}
    del admin  # destroys the librdkafka handle, closing its connections

    summary = broker.stop()
    # librdkafka answers describe_cluster from Metadata, so DescribeCluster is not among them.
    for api in ("CreateTopics", "CreatePartitions", "DescribeConfigs", "DeleteTopics"):
        assert summary["requests"].get(api, 0) >= 1, api
    assert summary["errors"] == {"topic_already_exists": 1}
    assert summary["produced"]["records"] == 0


def test_watermark_offsets_report_the_records_produced_per_partition(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", str(PARTITIONS))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("metered", num_partitions=2)])["metered"].result(
        timeout=ADMIN_TIMEOUT
    )
    # Partitions added later start empty at offset 0 like the first ones.
    admin.create_partitions([NewPartitions("metered", 4)])["metered"].result(timeout=ADMIN_TIMEOUT)
    del admin
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            **BATCHING,
        }
    )
    deliveries, sent = produce(producer, "metered", 2_000, 4)
    producer.close()
    assert deliveries.errors == []
    assert_contiguous_from_zero(deliveries.offsets)

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "watermarks",
            "enable.auto.commit": False,
        }
    )
    try:
        for partition in range(4):
            low, high = consumer.get_watermark_offsets(
                TopicPartition("metered", partition), timeout=ADMIN_TIMEOUT, cached=False
            )
            assert (low, high) == (0, sent[partition]), f"partition {partition}"
    finally:
        consumer.close()

    families = broker.scrape()
    summary = broker.stop()
    assert summary["requests"]["ListOffsets"] >= 1
    assert_produced_exactly(summary, families, expected("metered", sent), VALUE_SIZE)


def test_without_auto_create_unknown_topic_fails_and_known_topics_keep_working(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", str(PARTITIONS), "--no-auto-create")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("known")])["known"].result(timeout=ADMIN_TIMEOUT)
    del admin
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            # librdkafka waits this long for a topic to appear before failing its records.
            "topic.metadata.propagation.max.ms": 1000,
            **BATCHING,
        }
    )
    unknown = Deliveries()
    producer.produce("no-such-topic", value=b"x" * VALUE_SIZE, key=b"k", on_delivery=unknown)
    deliveries, sent = produce(producer, "known", 900, PARTITIONS)
    producer.close()

    assert unknown.count == 1
    assert [error.code() for error in unknown.errors] == [KafkaError.UNKNOWN_TOPIC_OR_PART]
    assert deliveries.errors == []
    assert_contiguous_from_zero(deliveries.offsets)

    families = broker.scrape()
    summary = broker.stop()
    assert summary["errors"]["unknown_topic_or_partition"] >= 1
    assert "no-such-topic" not in summary["produced"]["topics"]
    assert_produced_exactly(summary, families, expected("known", sent), VALUE_SIZE)
