"""A cluster in one process (`--brokers N`): every node in Metadata at its own port, each
partition led by one node and refused with NOT_LEADER_OR_FOLLOWER by the others, groups
coordinated by one node; and real producers and consumers, which spread over every node,
counted exactly."""

from __future__ import annotations

import datetime
import time
import zlib
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kio.schema.errors import ErrorCode

from codec import ApiKey
from codec.apis import kafka_name
from nullbroker.app.configuration import checked
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.broker import Broker
from nullbroker.cluster.nodes import Cluster
from nullbroker.sessions import Endpoint, Session
from nullbroker.settings import Config, ConfigError
from tests.support.broker_counts import (
    PROCESSES,
    metric_total,
    produced_from_metrics,
    samples,
)
from tests.support.kafka_tools import requires_kafka_tools, run_tool
from tests.support.kio_calls import (
    answered,
    decode_response,
    dispatch_of,
    record_batch,
    request_frame,
    types,
)

PORTS = {0: 19092, 1: 19093, 2: 19094}


def cluster_broker(size: int = 3) -> Broker:
    broker = Broker(Config(brokers=size, partitions=6))
    broker.cluster.ports.update({node: PORTS[node] for node in range(size)})
    return broker


def session(node: int) -> Session:
    return Session("127.0.0.1:50000", Endpoint("127.0.0.1", PORTS[node]), node_id=node)


def ask(broker: Broker, node: int, api_key: int, version: int, **fields: Any) -> Any:
    body = types(api_key, version)
    request = getattr(body, f"{kafka_name(ApiKey(api_key))}Request")(**fields)
    frame = request_frame(api_key, version, request)
    return decode_response(
        api_key, version, answered(dispatch_of(broker).answer(frame, session(node)))
    )[1]


def metadata(broker: Broker, node: int, topic: str) -> Any:
    request_types = types(ApiKey.METADATA, 12)
    return ask(
        broker, node, ApiKey.METADATA, 12,
        topics=(request_types.MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=True, include_topic_authorized_operations=False,
    )  # fmt: skip


def test_partitions_are_led_round_the_nodes_from_a_hash_of_the_topic() -> None:
    cluster = Cluster(3)
    first = zlib.crc32(b"orders") % 3
    assert [cluster.leader("orders", p) for p in range(4)] == [(first + p) % 3 for p in range(4)]
    assert set(cluster.leaders("orders", 6)) == {0, 1, 2}
    # As Kafka: the leader of the partition of __consumer_offsets holding the group,
    # abs("group-a".hashCode()) % 50 = 293427347 % 50 (Java's, checked) = 47.
    assert cluster.coordinator("group-a") == cluster.leader("__consumer_offsets", 47)
    assert Cluster(1).leaders("orders", 4) == (0, 0, 0, 0)
    assert Cluster(1).leader_epoch("orders", 0) == 0 and cluster.leader_epoch("orders", 0) == 0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"brokers": 0}, "brokers: must be from 1 to 64, got 0"),
        ({"brokers": 65}, "brokers: must be from 1 to 64, got 65"),
        ({"brokers": 3, "listen": "127.0.0.1:65534"}, "3 brokers need 3 consecutive ports"),
    ],
)
def test_a_cluster_size_that_cannot_be_served_is_refused(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        checked(Config(**settings))


def test_metadata_from_any_node_lists_every_node_and_each_partitions_leader() -> None:
    broker = cluster_broker()
    metadata(broker, 0, "orders")  # made, and answered unknown, as Kafka answers it
    for node in range(3):
        answer = metadata(broker, node, "orders")
        assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [
            (n, "127.0.0.1", PORTS[n]) for n in range(3)
        ]
        (topic,) = answer.topics
        assert [p.leader_id for p in topic.partitions] == list(broker.cluster.leaders("orders", 6))
        assert all(p.replica_nodes == (p.leader_id,) for p in topic.partitions)
        assert all(p.leader_epoch == 0 for p in topic.partitions)
    described = ask(
        broker, 1, ApiKey.DESCRIBE_CLUSTER, 1,
        include_cluster_authorized_operations=False, endpoint_type=1,
    )  # fmt: skip
    assert [(b.broker_id, b.port) for b in described.brokers] == [(n, PORTS[n]) for n in range(3)]


def test_only_the_leader_takes_a_partitions_records_and_serves_them() -> None:
    broker = cluster_broker()
    metadata(broker, 0, "orders")  # created, 6 partitions
    leader = broker.cluster.leader("orders", 2)
    produce_types = types(ApiKey.PRODUCE, 9)
    for node in range(3):
        answer = ask(
            broker, node, ApiKey.PRODUCE, 9,
            transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=1),
            topic_data=(produce_types.TopicProduceData(
                name="orders",
                partition_data=(produce_types.PartitionProduceData(
                    index=2, records=record_batch(5)),),
            ),),
        )  # fmt: skip
        (partition,) = answer.responses[0].partition_responses
        expected = ErrorCode.none if node == leader else ErrorCode.not_leader_or_follower
        assert partition.error_code == expected
    assert broker.topics.get("orders").partitions[2].log_end_offset == 5  # counted once

    list_types = types(ApiKey.LIST_OFFSETS, 7)
    for node in range(3):
        answer = ask(
            broker, node, ApiKey.LIST_OFFSETS, 7, replica_id=-1, isolation_level=0,
            topics=(list_types.ListOffsetsTopic(name="orders", partitions=(
                list_types.ListOffsetsPartition(
                    partition_index=2, current_leader_epoch=-1, timestamp=-1),)),),
        )  # fmt: skip
        (partition,) = answer.topics[0].partitions
        if node == leader:
            assert (partition.error_code, partition.offset) == (ErrorCode.none, 5)
        else:
            assert partition.error_code == ErrorCode.not_leader_or_follower


def test_find_coordinator_names_the_node_the_key_hashes_to() -> None:
    broker = cluster_broker()
    answer = ask(
        broker, 2, ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("group-a", "group-b")
    )
    for coordinator in answer.coordinators:
        node = broker.cluster.coordinator(coordinator.key)
        assert (coordinator.node_id, coordinator.port) == (node, PORTS[node])


def test_one_node_answers_as_before_clusters() -> None:
    dispatch = dispatch_of(Broker(Config()))
    body = types(ApiKey.METADATA, 12).MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )
    session = Session("127.0.0.1:1", Endpoint("127.0.0.1", 9092))
    answer = answered(dispatch.answer(request_frame(ApiKey.METADATA, 12, body), session))
    body = decode_response(ApiKey.METADATA, 12, answer)[1]
    assert [(b.node_id, b.port) for b in body.brokers] == [(0, 9092)]


def node_ports(broker: RunningBroker) -> list[int]:
    """The ports of the broker's nodes, by node id."""
    return [int(address.rsplit(":", 1)[1]) for address in broker.nodes]


@pytest.mark.clients
@PROCESSES
def test_an_idempotent_producer_reaches_every_node_and_is_counted_exactly(
    nullbroker_factory: StartBroker,
    processes: str,
) -> None:
    broker = nullbroker_factory("--brokers", "3", "--processes", processes, "--partitions", "6")
    ports = node_ports(broker)
    assert ports[0] == int(broker.bootstrap.rsplit(":", 1)[1]) and len(set(ports)) == 3
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5,
    })  # fmt: skip
    records = 6000
    for index in range(records):
        producer.produce("spread", key=str(index).encode(), value=b"x" * 100)
        producer.poll(0)
    assert producer.flush(30) == 0

    families = list(broker.scrape())
    produced = produced_from_metrics(families)
    assert sum(counts.records for counts in produced.values()) == records
    assert {partition for _, partition in produced} == set(range(6))
    connections = {
        dict(labels)["node"] for labels in samples(families, "nullbroker_node_connections_total")
    }
    assert connections == {"0", "1", "2"}
    assert metric_total(families, "nullbroker_errors_total") == 0


def group_consumer(
    broker: RunningBroker, group: str, topic: str, protocol: str = "classic"
) -> Consumer:
    """A consumer in `group` of `protocol` (classic, or KIP-848's consumer), subscribed to
    `topic`, reading from the start, committing only when told."""
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": protocol,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip
    consumer.subscribe([topic])
    return consumer


def read_until(consumer: Consumer, count: int, seen: set[tuple[int, int]]) -> None:
    """Poll until `seen` holds `count` (partition, offset) pairs, for a minute at most."""
    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            assert message is None or message.error().code() == KafkaError._PARTITION_EOF
            continue
        seen.add((message.partition(), message.offset()))


GROUP_PROTOCOLS = pytest.mark.parametrize("protocol", ["classic", "consumer"])
"""A group consumer of each protocol: the classic one, and KIP-848's, served by the worker of
its coordinator on several processes as on one."""


@pytest.mark.clients
@PROCESSES
@GROUP_PROTOCOLS
def test_a_group_consumer_reads_every_partition_through_its_leader(
    nullbroker_factory: StartBroker,
    processes: str,
    protocol: str,
) -> None:
    broker = nullbroker_factory(
        "--brokers", "3", "--processes", processes, "--group-initial-rebalance-delay-ms", "0",
        "--source", "clicks:partitions=6,records=500,size=20",
    )  # fmt: skip
    consumer = group_consumer(broker, "readers", "clicks", protocol)
    seen: set[tuple[int, int]] = set()
    try:
        read_until(consumer, 3000, seen)
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("clicks", p) for p in range(6)], 10)
    finally:
        consumer.close()
    assert seen == {(p, o) for p in range(6) for o in range(500)}
    assert [tp.offset for tp in committed] == [500] * 6


@pytest.mark.clients
@requires_kafka_tools
@PROCESSES
def test_kafka_producer_perf_test_against_three_nodes_is_counted_exactly(
    nullbroker_factory: StartBroker,
    processes: str,
) -> None:
    broker = nullbroker_factory("--brokers", "3", "--processes", processes, "--partitions", "6")
    output = run_tool(
        "kafka-producer-perf-test",
        "--topic", "perf", "--num-records", "20000", "--record-size", "100",
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}",
    )  # fmt: skip
    assert output.strip().splitlines()[-1].startswith("20000 records sent"), output
    families = list(broker.scrape())
    assert sum(counts.records for counts in produced_from_metrics(families).values()) == 20000
    connections = {
        dict(labels)["node"] for labels in samples(families, "nullbroker_node_connections_total")
    }
    assert connections == {"0", "1", "2"}


def test_group_requests_to_a_node_that_does_not_coordinate_get_not_coordinator() -> None:
    broker = cluster_broker()
    coordinator = broker.cluster.coordinator("group-a")
    other = (coordinator + 1) % 3
    heartbeat = types(12, 4).HeartbeatRequest(
        group_id="group-a", generation_id=1, member_id="m", group_instance_id=None
    )
    for node, expected in ((other, ErrorCode.not_coordinator), (coordinator, None)):
        frame = request_frame(12, 4, heartbeat)
        answer = decode_response(12, 4, answered(dispatch_of(broker).answer(frame, session(node))))[
            1
        ]
        if expected is not None:
            assert answer.error_code == expected
        else:  # the coordinator does not know the member: a group error, not NOT_COORDINATOR
            assert answer.error_code not in (ErrorCode.not_coordinator, ErrorCode.none)


@pytest.mark.clients
@requires_kafka_tools
@PROCESSES
def test_kafka_consumer_groups_lists_and_describes_a_group_once_on_three_nodes(
    nullbroker_factory: StartBroker,
    processes: str,
) -> None:
    broker = nullbroker_factory(
        "--brokers", "3", "--processes", processes, "--group-initial-rebalance-delay-ms", "0",
        "--source", "clicks:partitions=6,records=100,size=20",
    )  # fmt: skip
    for group in ("alpha", "beta", "gamma"):
        consumer = group_consumer(broker, group, "clicks")
        try:
            read_until(consumer, 600, set())
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
    listed = run_tool("kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--list")
    assert sorted(listed.split()) == ["alpha", "beta", "gamma"]
    described = run_tool(
        "kafka-consumer-groups", "--bootstrap-server", broker.bootstrap,
        "--describe", "--group", "beta",
    )  # fmt: skip
    rows = [line.split() for line in described.splitlines() if line.startswith("beta ")]
    assert sorted((row[1], int(row[2]), int(row[3])) for row in rows) == [
        ("clicks", p, 100) for p in range(6)
    ]
