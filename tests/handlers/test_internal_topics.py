"""Kafka's internal topics, __consumer_offsets and __transaction_state, as Kafka 4.1.1 shows
them (checked against it): absent until a client first asks FindCoordinator for a group (or
a transactional id), then in Metadata with is_internal and offsets.topic.num.partitions (50)
partitions; their own configs; refused to producers; the leader of the partition holding a
group coordinates it. nullbroker keeps no offset records, so a consumer reads an empty log,
and nothing about them enters the accounts."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from codec import ApiKey
from nullbroker.broker import Broker
from nullbroker.cluster.nodes import internal_partition_for, java_string_hash
from nullbroker.settings import Config
from tests.handlers.test_config_documentation import TOPIC_RESOURCE, config_entries
from tests.handlers.test_fetch import fetch
from tests.handlers.test_handlers import produce
from tests.processes.test_cluster import ask, cluster_broker
from tests.support.kio_calls import call, record_batch, types

OFFSETS = "__consumer_offsets"
TRANSACTIONS = "__transaction_state"
GROUP_KEY, TRANSACTION_KEY = 0, 1
DYNAMIC_TOPIC_CONFIG = 1


def all_topics(broker: Broker) -> dict[str, Any]:
    response = call(
        broker, ApiKey.METADATA, 12,
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    )  # fmt: skip
    return {topic.name: topic for topic in response.topics}


def named_topic(broker: Broker, name: str, allow_auto_create: bool) -> Any:
    wanted = types(ApiKey.METADATA, 12).MetadataRequestTopic(topic_id=None, name=name)
    response = call(
        broker, ApiKey.METADATA, 12,
        topics=(wanted,), allow_auto_topic_creation=allow_auto_create,
        include_topic_authorized_operations=False,
    )  # fmt: skip
    (topic,) = response.topics
    return topic


def find_coordinator(broker: Broker, key_type: int, *keys: str) -> Any:
    response = call(broker, ApiKey.FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=keys)
    return response.coordinators


def test_java_string_hash_and_the_partition_kafka_picks_for_a_key() -> None:
    # Java's String.hashCode(), checked with Java: UTF-16 code units, a surrogate pair
    # counted as two; "polygenelubricants" hashes to Integer.MIN_VALUE, whose Utils.abs is 0.
    assert java_string_hash("group-a") == 293427347
    assert java_string_hash("é€😀") == 16752006
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert internal_partition_for("group-a", 50) == 47
    assert internal_partition_for("polygenelubricants", 50) == 0
    assert internal_partition_for("readers", 50) == 28


def test_no_internal_topic_exists_before_the_first_find_coordinator() -> None:
    broker = Broker(Config())
    produce(broker, "orders", 0, record_batch(1))
    assert list(all_topics(broker)) == ["orders"]
    # As Kafka: unknown, yet reported internal by its name alone.
    offsets = named_topic(broker, OFFSETS, allow_auto_create=False)
    assert (offsets.error_code, offsets.is_internal) == (ErrorCode.unknown_topic_or_partition, True)
    assert all_topics(broker)["orders"].is_internal is False


@pytest.mark.parametrize(
    ("key_type", "internal"), [(GROUP_KEY, OFFSETS), (TRANSACTION_KEY, TRANSACTIONS)]
)
def test_the_first_find_coordinator_makes_its_internal_topic(key_type: int, internal: str) -> None:
    broker = Broker(Config())
    (coordinator,) = find_coordinator(broker, key_type, "some-key")
    assert coordinator.error_code is ErrorCode.none
    topics = all_topics(broker)
    assert list(topics) == [internal]
    assert topics[internal].is_internal is True
    assert [p.partition_index for p in topics[internal].partitions] == list(range(50))
    find_coordinator(broker, key_type, "another-key")
    assert len(broker.topics) == 1, "made once"


def test_a_metadata_request_that_may_create_topics_makes_an_internal_one() -> None:
    broker = Broker(Config(offsets_topic_partitions=7))
    # As Kafka: the request that makes it is told it is unknown (and internal, by name).
    offsets = named_topic(broker, OFFSETS, allow_auto_create=True)
    assert (offsets.error_code, offsets.is_internal) == (ErrorCode.unknown_topic_or_partition, True)
    offsets = named_topic(broker, OFFSETS, allow_auto_create=True)
    assert (offsets.error_code, offsets.is_internal) == (ErrorCode.none, True)
    assert len(offsets.partitions) == 7


@pytest.mark.parametrize(
    ("key_type", "internal", "own"),
    [
        (GROUP_KEY, OFFSETS, {"cleanup.policy": "compact", "compression.type": "producer",
                              "segment.bytes": "104857600"}),
        (TRANSACTION_KEY, TRANSACTIONS, {"cleanup.policy": "compact",
                                         "compression.type": "uncompressed",
                                         "min.insync.replicas": "1",
                                         "segment.bytes": "104857600",
                                         "unclean.leader.election.enable": "false"}),
    ],
)  # fmt: skip
def test_describe_configs_shows_the_configs_kafka_gives_its_internal_topics(
    key_type: int, internal: str, own: dict[str, str]
) -> None:
    broker = Broker(Config())
    find_coordinator(broker, key_type, "k")
    configs = config_entries(broker, TOPIC_RESOURCE, internal)
    set_for_topic = {
        name: entry.value
        for name, entry in configs.items()
        if entry.config_source == DYNAMIC_TOPIC_CONFIG
    }
    assert set_for_topic == own


def produce_by_id(broker: Broker, topic_id: Any) -> Any:
    t = types(0, 13)
    data = t.TopicProduceData(
        topic_id=topic_id,
        partition_data=(t.PartitionProduceData(index=0, records=record_batch(1)),),
    )
    response = call(
        broker, 0, 13, transactional_id=None, acks=-1,
        timeout=datetime.timedelta(seconds=5), topic_data=(data,),
    )  # fmt: skip
    return response.responses[0].partition_responses[0]


def test_producers_are_refused_an_internal_topic_and_nothing_is_counted() -> None:
    broker = Broker(Config())
    # Before it exists: refused, and not made (Kafka never makes one for a producer).
    refused = produce(broker, OFFSETS, 0, record_batch(3))
    assert refused.responses[0].partition_responses[0].error_code is (
        ErrorCode.invalid_topic_exception
    )
    assert broker.topics.get(OFFSETS) is None
    find_coordinator(broker, GROUP_KEY, "g")
    # Once it exists, by name (the C lane's path) and by id: refused as Kafka refuses it.
    refused = produce(broker, OFFSETS, 0, record_batch(3))
    assert refused.responses[0].partition_responses[0].error_code is (
        ErrorCode.invalid_topic_exception
    )
    offsets = broker.topics.get(OFFSETS)
    assert offsets is not None
    assert produce_by_id(broker, offsets.id).error_code is ErrorCode.invalid_topic_exception
    assert [p.log_end_offset for p in offsets.partitions] == [0] * 50
    assert all(topic != OFFSETS for topic, _ in broker.stats.produced)


def test_a_consumer_reads_an_internal_topic_as_an_empty_log_counted_nowhere() -> None:
    broker = Broker(Config())
    find_coordinator(broker, GROUP_KEY, "g")
    offsets = broker.topics.get(OFFSETS)
    assert offsets is not None
    response = fetch(broker, 16, [(offsets.id, [(p, 0, 1 << 20) for p in range(50)])])
    partitions = response.responses[0].partitions
    assert {(p.error_code, p.high_watermark, p.records) for p in partitions} == {
        (ErrorCode.none, 0, b"")
    }
    assert all(topic != OFFSETS for topic, _ in broker.stats.fetched)


@pytest.mark.parametrize(
    ("key_type", "internal"), [(GROUP_KEY, OFFSETS), (TRANSACTION_KEY, TRANSACTIONS)]
)
def test_on_a_cluster_a_key_is_coordinated_by_the_leader_of_its_internal_partition(
    key_type: int, internal: str
) -> None:
    broker = cluster_broker(3)
    keys = tuple(f"key-{n}" for n in range(30))
    answer = ask(broker, 1, ApiKey.FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=keys)
    wanted = types(ApiKey.METADATA, 12).MetadataRequestTopic(topic_id=None, name=internal)
    (topic,) = ask(
        broker, 1, ApiKey.METADATA, 12,
        topics=(wanted,), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    ).topics  # fmt: skip
    leaders = {p.partition_index: p.leader_id for p in topic.partitions}
    coordinators = {c.key: c.node_id for c in answer.coordinators}
    assert coordinators == {key: leaders[internal_partition_for(key, 50)] for key in keys}
    assert set(coordinators.values()) == {0, 1, 2}
