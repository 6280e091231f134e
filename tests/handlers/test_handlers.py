"""Each API's behaviour, through Dispatch.answer: request bytes in, response bytes out."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from codec import ApiKey
from nullbroker.broker import Broker
from nullbroker.handlers import SERVED_KEYS
from nullbroker.settings import Config
from tests.support.kio_calls import SESSION, call, dispatch_of, record_batch, request_frame, types


def broker(**settings: Any) -> Broker:
    return Broker(Config(**settings))


def metadata(b: Broker, *names: str, version: int = 12, auto_create: bool = True) -> Any:
    t = types(ApiKey.METADATA, version)
    return call(
        b,
        ApiKey.METADATA,
        version,
        topics=tuple(t.MetadataRequestTopic(topic_id=None, name=name) for name in names),
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=False,
    )


def produce(
    b: Broker, topic: str, partition: int, batch: bytes, version: int = 10, acks: int = -1
) -> Any:
    t = types(ApiKey.PRODUCE, version)
    body = t.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            t.TopicProduceData(
                name=topic,
                partition_data=(t.PartitionProduceData(index=partition, records=batch),),
            ),
        ),
    )
    if acks == 0:
        return dispatch_of(b).answer(request_frame(ApiKey.PRODUCE, version, body), SESSION)
    return call(
        b,
        ApiKey.PRODUCE,
        version,
        transactional_id=None,
        acks=acks,
        timeout=body.timeout,
        topic_data=body.topic_data,
    )


def produced_partition(response: Any) -> Any:
    return response.responses[0].partition_responses[0]


def list_offsets(b: Broker, topic: str, partition: int, timestamp: int, version: int = 7) -> Any:
    t = types(ApiKey.LIST_OFFSETS, version)
    response = call(
        b,
        ApiKey.LIST_OFFSETS,
        version,
        replica_id=-1,
        isolation_level=0,
        topics=(
            t.ListOffsetsTopic(
                name=topic,
                partitions=(
                    t.ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=-1, timestamp=timestamp
                    ),
                ),
            ),
        ),
    )
    return response.topics[0].partitions[0]


# ApiVersions


def test_api_versions_advertises_exactly_the_keys_with_handlers() -> None:
    response = call(
        broker(), ApiKey.API_VERSIONS, 4, client_software_name="t", client_software_version="1"
    )
    assert response.error_code is ErrorCode.none
    assert {api.api_key for api in response.api_keys} == set(SERVED_KEYS)
    # Listed from v0 as Kafka 4 lists it (codec.ADVERTISED_MIN_VERSIONS); served from v3.
    produce_range = next(api for api in response.api_keys if api.api_key == ApiKey.PRODUCE)
    assert (produce_range.min_version, produce_range.max_version) == (0, 13)


@pytest.mark.parametrize("version", range(5))
def test_every_api_versions_version_gets_the_same_key_list(version: int) -> None:
    fields = {"client_software_name": "t", "client_software_version": "1"} if version >= 3 else {}
    response = call(broker(), ApiKey.API_VERSIONS, version, **fields)
    assert len(response.api_keys) == len(SERVED_KEYS)


# Metadata


def created(b: Broker, name: str) -> Any:
    """A topic auto-created by Metadata, as a client sees it: unknown in the answer to the
    request that makes it (as Kafka answers), known in the next."""
    (topic,) = metadata(b, name).topics
    assert topic.error_code is ErrorCode.unknown_topic_or_partition and not topic.partitions
    (topic,) = metadata(b, name).topics
    return topic


def test_metadata_auto_creates_a_topic_with_the_default_partition_count() -> None:
    b = broker(partitions=3)
    (unknown,) = metadata(b, "orders").topics
    assert (unknown.error_code, unknown.topic_id) == (ErrorCode.unknown_topic_or_partition, None)
    assert not b.stats.errors, "a topic being made is no refusal"
    response = metadata(b, "orders")
    (topic,) = response.topics
    assert topic.error_code is ErrorCode.none
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2]
    assert all(p.leader_id == 0 and p.replica_nodes == (0,) for p in topic.partitions)
    assert topic.topic_id != uuid.UUID(int=0)
    assert response.brokers[0].host == "127.0.0.1" and response.brokers[0].port == 9092


def test_topic_ids_are_stable_across_broker_restarts() -> None:
    first = created(broker(), "orders").topic_id
    again = created(broker(), "orders").topic_id
    assert first == again


def test_metadata_without_auto_create_reports_unknown_topics() -> None:
    b = broker(auto_create=False)
    (topic,) = metadata(b, "orders").topics
    assert topic.error_code is ErrorCode.unknown_topic_or_partition
    assert b.stats.errors["unknown_topic_or_partition"] == 1


def test_metadata_honours_the_clients_allow_auto_topic_creation_flag() -> None:
    b = broker()
    (topic,) = metadata(b, "orders", auto_create=False).topics
    assert topic.error_code is ErrorCode.unknown_topic_or_partition
    assert b.topics.get("orders") is None


def test_metadata_refuses_illegal_topic_names() -> None:
    (topic,) = metadata(broker(), "bad name!").topics
    assert topic.error_code is ErrorCode.invalid_topic_exception


def test_metadata_null_topics_lists_all_and_v0_empty_list_lists_all() -> None:
    b = broker()
    metadata(b, "a", "b")
    everything = call(
        b,
        ApiKey.METADATA,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    assert sorted(t.name for t in everything.topics) == ["a", "b"]
    assert sorted(t.name for t in call(b, ApiKey.METADATA, 0, topics=()).topics) == ["a", "b"]
    assert call(b, ApiKey.METADATA, 1, topics=()).topics == ()


def test_metadata_finds_a_topic_by_id() -> None:
    b = broker()
    topic_id = created(b, "orders").topic_id
    t = types(ApiKey.METADATA, 12)
    response = call(
        b,
        ApiKey.METADATA,
        12,
        topics=(t.MetadataRequestTopic(topic_id=topic_id, name=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    assert response.topics[0].name == "orders"


# Produce


def test_produce_gives_contiguous_base_offsets_per_partition_and_counts_exactly() -> None:
    b = broker(partitions=2)
    offsets = [
        produced_partition(produce(b, "t", 0, record_batch(n))).base_offset for n in (3, 5, 1)
    ]
    assert offsets == [0, 3, 8]
    assert produced_partition(produce(b, "t", 1, record_batch(4))).base_offset == 0
    counters = b.stats.produced[("t", 0)]
    assert (counters.records, counters.batches) == (9, 3)
    assert counters.bytes == sum(len(record_batch(n)) for n in (3, 5, 1))
    assert list_offsets(b, "t", 0, -1).offset == 9


def test_produce_with_acks_0_gets_no_response_but_is_counted() -> None:
    b = broker()
    assert produce(b, "t", 0, record_batch(2), acks=0) is None
    assert b.stats.produced[("t", 0)].records == 2


def test_idempotent_duplicate_gets_its_first_offset_and_is_counted_once() -> None:
    b = broker()
    produce(b, "t", 0, record_batch(2))
    first = record_batch(3, producer_id=1000, producer_epoch=0, base_sequence=0)
    assert produced_partition(produce(b, "t", 0, first)).base_offset == 2
    second = record_batch(2, producer_id=1000, producer_epoch=0, base_sequence=3)
    assert produced_partition(produce(b, "t", 0, second)).base_offset == 5
    retry = produced_partition(produce(b, "t", 0, first))
    assert (retry.error_code, retry.base_offset) == (ErrorCode.none, 2)
    assert b.stats.produced[("t", 0)].records == 7


def test_a_retry_of_any_of_the_last_five_batches_gets_that_batch_s_timestamp_as_in_kafka() -> None:
    """As Kafka 4.1.1 answers a duplicate (UnifiedLog, with the BatchMetadata it kept for each
    of a producer's last five batches on a partition): the first append's offset, and the
    batch's max timestamp as log_append_time, not the retry's; an older batch is forgotten."""
    b = broker()
    first = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    second = datetime.timedelta(seconds=1)

    def batch(number: int, when: datetime.datetime) -> bytes:
        return record_batch(
            2, producer_id=1000, producer_epoch=0, base_sequence=2 * number, when=when
        )

    for number in range(6):
        taken = produced_partition(produce(b, "t", 0, batch(number, first + number * second)))
        assert (taken.base_offset, taken.log_append_time) == (2 * number, None)
    for number in (5, 3, 1):
        retry = produced_partition(produce(b, "t", 0, batch(number, first + 99 * second)))
        assert (retry.error_code, retry.base_offset, retry.log_append_time) == (
            ErrorCode.none,
            2 * number,
            first + number * second,
        )
    forgotten = produced_partition(produce(b, "t", 0, batch(0, first)))
    assert forgotten.error_code is ErrorCode.out_of_order_sequence_number
    assert forgotten.log_append_time is None


def test_idempotent_sequence_gap_is_out_of_order_and_not_counted() -> None:
    b = broker()
    produce(b, "t", 0, record_batch(2, producer_id=7, producer_epoch=0, base_sequence=0))
    gap = produced_partition(
        produce(b, "t", 0, record_batch(1, producer_id=7, producer_epoch=0, base_sequence=5))
    )
    assert gap.error_code is ErrorCode.out_of_order_sequence_number
    assert b.stats.produced[("t", 0)].records == 2
    assert b.stats.errors["out_of_order_sequence_number"] == 1


def test_a_producer_new_to_a_partition_may_start_at_any_sequence_as_in_kafka() -> None:
    response = produce(
        broker(), "t", 0, record_batch(1, producer_id=9, producer_epoch=0, base_sequence=4)
    )
    assert produced_partition(response).error_code is ErrorCode.none


def test_an_older_epoch_is_fenced_and_a_newer_one_restarts_sequences() -> None:
    b = broker()
    produce(b, "t", 0, record_batch(1, producer_id=9, producer_epoch=1, base_sequence=0))
    old = produce(b, "t", 0, record_batch(1, producer_id=9, producer_epoch=0, base_sequence=1))
    assert produced_partition(old).error_code is ErrorCode.invalid_producer_epoch
    new = produce(b, "t", 0, record_batch(1, producer_id=9, producer_epoch=2, base_sequence=0))
    assert produced_partition(new).error_code is ErrorCode.none


def test_sequences_are_tracked_per_partition() -> None:
    b = broker(partitions=2)
    for partition in (0, 1):
        response = produce(
            b, "t", partition, record_batch(2, producer_id=3, producer_epoch=0, base_sequence=0)
        )
        assert produced_partition(response).error_code is ErrorCode.none


def test_produce_to_a_missing_partition_is_unknown_topic_or_partition() -> None:
    response = produce(broker(), "t", 5, record_batch(1))
    assert produced_partition(response).error_code is ErrorCode.unknown_topic_or_partition


def test_produce_v13_addresses_topics_by_id() -> None:
    b = broker()
    topic_id = created(b, "t").topic_id
    t = types(ApiKey.PRODUCE, 13)
    response = call(
        b,
        ApiKey.PRODUCE,
        13,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            t.TopicProduceData(
                topic_id=topic_id,
                partition_data=(t.PartitionProduceData(index=0, records=record_batch(4)),),
            ),
        ),
    )
    assert response.responses[0].topic_id == topic_id
    assert produced_partition(response).base_offset == 0
    assert b.stats.produced[("t", 0)].records == 4


@pytest.mark.parametrize("version", range(3, 13))
def test_every_produce_version_by_name_is_answered(version: int) -> None:
    b = broker()
    response = produce(b, "t", 0, record_batch(1), version=version)
    assert produced_partition(response).error_code is ErrorCode.none


# InitProducerId


def test_init_producer_id_hands_out_distinct_ids() -> None:
    b = broker()
    first = call(
        b,
        ApiKey.INIT_PRODUCER_ID,
        4,
        transactional_id=None,
        transaction_timeout=datetime.timedelta(minutes=1),
        producer_id=-1,
        producer_epoch=-1,
    )
    second = call(
        b,
        ApiKey.INIT_PRODUCER_ID,
        4,
        transactional_id=None,
        transaction_timeout=datetime.timedelta(minutes=1),
        producer_id=-1,
        producer_epoch=-1,
    )
    assert first.producer_id != second.producer_id
    assert first.producer_epoch == second.producer_epoch == 0


def test_a_transactional_id_keeps_its_producer_id_and_bumps_its_epoch() -> None:
    b = broker()
    first = call(
        b,
        ApiKey.INIT_PRODUCER_ID,
        0,
        transactional_id="tx",
        transaction_timeout=datetime.timedelta(minutes=1),
    )
    second = call(
        b,
        ApiKey.INIT_PRODUCER_ID,
        0,
        transactional_id="tx",
        transaction_timeout=datetime.timedelta(minutes=1),
    )
    assert second.producer_id == first.producer_id
    assert second.producer_epoch == first.producer_epoch + 1


# ListOffsets


def test_list_offsets_earliest_and_latest() -> None:
    b = broker()
    produce(b, "t", 0, record_batch(6))
    assert list_offsets(b, "t", 0, -2).offset == 0
    assert list_offsets(b, "t", 0, -1).offset == 6
    assert list_offsets(b, "missing", 0, -1).error_code is ErrorCode.unknown_topic_or_partition


def test_list_offsets_by_timestamp_finds_the_synthetic_record_fetch_serves() -> None:
    # Without a rate, synthetic records are 1 ms apart from the topic's creation.
    b = broker()
    produce(b, "t", 0, record_batch(6))
    created = b.topics.get("t").created_ms
    assert (list_offsets(b, "t", 0, 0).offset, list_offsets(b, "t", 0, 0).timestamp) == (0, created)
    found = list_offsets(b, "t", 0, created + 3)
    assert (found.offset, found.timestamp) == (3, created + 3)
    assert list_offsets(b, "t", 0, created + 6).offset == -1, "no record that late"
    latest = list_offsets(b, "t", 0, -3)
    assert (latest.offset, latest.timestamp) == (5, created + 5)


# CreateTopics, DeleteTopics, CreatePartitions


def create_topics(
    b: Broker, *specs: tuple[str, int, int], version: int = 7, validate_only: bool = False
) -> Any:
    t = types(ApiKey.CREATE_TOPICS, version)
    return call(
        b,
        ApiKey.CREATE_TOPICS,
        version,
        topics=tuple(
            t.CreatableTopic(
                name=name,
                num_partitions=count,
                replication_factor=factor,
                assignments=(),
                configs=(),
            )
            for name, count, factor in specs
        ),
        timeout=datetime.timedelta(seconds=30),
        validate_only=validate_only,
    ).topics


def test_create_topics_creates_and_reports_errors_per_topic() -> None:
    b = broker(partitions=2)
    results = create_topics(
        b,
        ("new", 4, 1),
        ("default", -1, -1),
        ("replicated", 1, 3),
        ("none", 0, 1),
        ("bad/name", 1, 1),
    )
    errors = {r.name: r.error_code for r in results}
    assert errors == {
        "new": ErrorCode.none,
        "default": ErrorCode.none,
        "replicated": ErrorCode.invalid_replication_factor,
        "none": ErrorCode.invalid_partitions,
        "bad/name": ErrorCode.invalid_topic_exception,
    }
    assert len(b.topics.get("new").partitions) == 4
    assert len(b.topics.get("default").partitions) == 2
    assert results[0].topic_id == b.topics.get("new").id
    assert {c.name for c in results[0].configs} >= {"retention.ms", "cleanup.policy"}
    # As Kafka 4.1.1: a topic that failed has no configs, not null ones.
    assert [r.configs for r in results[2:]] == [(), (), ()]
    assert create_topics(b, ("new", 1, 1))[0].error_code is ErrorCode.topic_already_exists


def test_create_topics_validate_only_creates_nothing() -> None:
    b = broker()
    assert create_topics(b, ("dry", 3, 1), validate_only=True)[0].error_code is ErrorCode.none
    assert b.topics.get("dry") is None


def test_a_topic_named_twice_in_one_request_is_an_invalid_request() -> None:
    results = create_topics(broker(), ("twice", 1, 1), ("twice", 1, 1))
    assert all(r.error_code is ErrorCode.invalid_request for r in results)


@pytest.mark.parametrize("version", range(2, 8))
def test_every_create_topics_version_is_answered(version: int) -> None:
    assert create_topics(broker(), ("t", 1, 1), version=version)[0].error_code is ErrorCode.none


def test_delete_topics_by_name_and_id_keeps_the_produced_counts() -> None:
    b = broker()
    produce(b, "gone", 0, record_batch(3))
    response = call(
        b,
        ApiKey.DELETE_TOPICS,
        5,
        topic_names=("gone", "never"),
        timeout=datetime.timedelta(seconds=5),
    )
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("gone", ErrorCode.none),
        ("never", ErrorCode.unknown_topic_or_partition),
    ]
    assert b.topics.get("gone") is None
    assert b.stats.produced[("gone", 0)].records == 3

    old_id = b.topics.create("again").id
    b.topics.delete(b.topics.get("again"))
    assert b.topics.create("again").id != old_id, "a re-created topic gets a new id"

    t = types(ApiKey.DELETE_TOPICS, 6)
    by_id = call(
        b,
        ApiKey.DELETE_TOPICS,
        6,
        topics=(t.DeleteTopicState(name=None, topic_id=b.topics.get("again").id),),
        timeout=datetime.timedelta(seconds=5),
    )
    assert by_id.responses[0].name == "again" and by_id.responses[0].error_code is ErrorCode.none


def test_create_partitions_only_grows() -> None:
    b = broker()
    metadata(b, "t")
    t = types(ApiKey.CREATE_PARTITIONS, 3)

    def grow(count: int, name: str = "t") -> ErrorCode:
        result = call(
            b,
            ApiKey.CREATE_PARTITIONS,
            3,
            topics=(t.CreatePartitionsTopic(name=name, count=count, assignments=None),),
            timeout=datetime.timedelta(seconds=5),
            validate_only=False,
        ).results[0]
        if result.error_code is ErrorCode.unknown_topic_or_partition:
            assert result.error_message is None  # as Kafka 4.1.1 answers it
        return result.error_code

    assert grow(3) is ErrorCode.none
    assert len(b.topics.get("t").partitions) == 3
    assert grow(2) is ErrorCode.invalid_partitions
    assert grow(5, "missing") is ErrorCode.unknown_topic_or_partition


# DescribeConfigs, DescribeCluster, FindCoordinator


def describe_configs(
    b: Broker, resource_type: int, name: str, keys: tuple[str, ...] | None = None
) -> Any:
    t = types(ApiKey.DESCRIBE_CONFIGS, 4)
    return call(
        b,
        ApiKey.DESCRIBE_CONFIGS,
        4,
        resources=(
            t.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=keys
            ),
        ),
        include_synonyms=True,
        include_documentation=False,
    ).results[0]


def test_describe_configs_reports_topic_defaults_and_overrides() -> None:
    b = broker()
    b.topics.create("t", 1, {"retention.ms": "1000"})
    result = describe_configs(b, 2, "t")
    configs = {c.name: c for c in result.configs}
    assert configs["retention.ms"].value == "1000" and configs["retention.ms"].config_source == 1
    assert (
        configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].config_source == 5
    )
    assert configs["retention.ms"].synonyms[0].value == "1000"
    only = describe_configs(b, 2, "t", keys=("min.insync.replicas",))
    assert [c.name for c in only.configs] == ["min.insync.replicas"]
    missing = describe_configs(b, 2, "missing")
    # As Kafka 4.1.1: "", not null, with an error or without.
    assert (missing.error_code, missing.error_message) == (ErrorCode.unknown_topic_or_partition, "")
    assert result.error_message == ""


def test_describe_configs_names_the_synonyms_kafka_names() -> None:
    # As Kafka 4.1.1 (a KRaft cluster, formatted with min.insync.replicas=1 for every broker):
    # a topic config's synonym is the broker config its default comes from, after the topic's
    # own setting; some have none.
    b = broker()
    b.topics.create("t", 1, {"cleanup.policy": "compact"})
    configs = {c.name: c for c in describe_configs(b, 2, "t").configs}

    def synonyms(name: str) -> list[tuple[str, str | None, int]]:
        return [(x.name, x.value, x.source) for x in configs[name].synonyms]

    assert synonyms("cleanup.policy") == [
        ("cleanup.policy", "compact", 1),
        ("log.cleanup.policy", "delete", 5),
    ]
    assert synonyms("max.message.bytes") == [("message.max.bytes", "1048588", 5)]
    assert synonyms("segment.ms") == synonyms("retention.ms") == []
    assert configs["min.insync.replicas"].config_source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert synonyms("min.insync.replicas") == [
        ("min.insync.replicas", "1", 3),
        ("min.insync.replicas", "1", 5),
    ]
    brokers = {c.name: c for c in describe_configs(b, 4, "0").configs}
    assert brokers["min.insync.replicas"].config_source == 3
    assert [x.source for x in brokers["min.insync.replicas"].synonyms] == [3, 5]


def test_describe_configs_reports_the_brokers_own_settings() -> None:
    result = describe_configs(broker(partitions=6), 4, "0")
    configs = {c.name: c.value for c in result.configs}
    assert configs["num.partitions"] == "6"
    assert configs["auto.create.topics.enable"] == "true"
    assert describe_configs(broker(), 4, "7").error_code is ErrorCode.invalid_request


def test_describe_cluster_lists_this_node() -> None:
    b = broker()
    response = call(
        b, ApiKey.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False, endpoint_type=1
    )
    assert response.cluster_id == b.cluster_id
    assert [(n.broker_id, n.host, n.port) for n in response.brokers] == [(0, "127.0.0.1", 9092)]
    controllers = call(
        b, ApiKey.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False, endpoint_type=2
    )
    assert controllers.error_code is ErrorCode.unsupported_endpoint_type


def test_authorized_operations_are_every_one_kafka_s_resource_type_has() -> None:
    # Kafka 4.1.1 without an authorizer answered these bit sets: the cluster's seven
    # operations (no token ones), a topic's eight, even for a topic asked by a name that
    # does not exist.
    b = broker()
    b.topics.create("ops", 1)
    response = call(
        b,
        ApiKey.METADATA,
        10,
        topics=(
            types(ApiKey.METADATA, 10).MetadataRequestTopic(name="ops", topic_id=uuid.UUID(int=0)),
            types(ApiKey.METADATA, 10).MetadataRequestTopic(name="nope", topic_id=uuid.UUID(int=0)),
        ),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    assert response.cluster_authorized_operations == 8096
    assert [(t.name, t.error_code, t.topic_authorized_operations) for t in response.topics] == [
        ("ops", ErrorCode.none, 3576),
        ("nope", ErrorCode.unknown_topic_or_partition, 3576),
    ]
    described = call(
        b, ApiKey.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True, endpoint_type=1
    )
    assert described.cluster_authorized_operations == 8096


def test_find_coordinator_points_at_this_node_in_old_and_batched_versions() -> None:
    b = broker()
    single = call(b, ApiKey.FIND_COORDINATOR, 3, key="group", key_type=0)
    assert (single.node_id, single.host, single.port) == (0, "127.0.0.1", 9092)
    batched = call(b, ApiKey.FIND_COORDINATOR, 6, key_type=0, coordinator_keys=("g1", "g2"))
    assert [c.key for c in batched.coordinators] == ["g1", "g2"]
    # Kafka 4.1.1 words no error "NONE" before v4 and "" in a coordinator of v4+.
    assert single.error_message == "NONE"
    assert [c.error_message for c in batched.coordinators] == ["", ""]


def test_find_coordinator_refuses_a_key_type_it_does_not_serve_as_kafka_does() -> None:
    b = broker()
    unknown = call(b, ApiKey.FIND_COORDINATOR, 3, key="group", key_type=7)
    assert (unknown.error_code, unknown.node_id, unknown.host, unknown.port) == (
        ErrorCode.invalid_request,
        -1,
        "",
        -1,
    )
    assert unknown.error_message.startswith("This most likely occurs because of a request")
    share, other = (
        call(
            b, ApiKey.FIND_COORDINATOR, 6, key_type=2, coordinator_keys=("g:topic-id:0",)
        ).coordinators
        + call(b, ApiKey.FIND_COORDINATOR, 6, key_type=-1, coordinator_keys=("g",)).coordinators
    )
    # Share groups (key type 2) Kafka refuses without a message when they are not enabled.
    assert (share.error_code, share.error_message, share.node_id) == (
        ErrorCode.invalid_request,
        "",
        -1,
    )
    assert (other.error_code, other.port) == (ErrorCode.invalid_request, -1)


def test_every_request_is_counted_per_api_with_its_latency() -> None:
    b = broker()
    metadata(b, "t")
    produce(b, "t", 0, record_batch(1))
    assert b.stats.apis["Metadata"].requests == 1
    assert b.stats.apis["Produce"].requests == 1
    assert b.stats.apis["Produce"].latency.count == 1


# Read side: DescribeTopicPartitions, DeleteRecords, source topics


def test_describe_topic_partitions_pages_with_a_cursor() -> None:
    b = broker(partitions=3)
    metadata(b, "a", "b")
    t = types(75, 0)
    first = call(
        b,
        75,
        0,
        topics=(t.TopicRequest(name="b"), t.TopicRequest(name="a"), t.TopicRequest(name="zz")),
        response_partition_limit=4,
        cursor=None,
    )
    assert [(topic.name, len(topic.partitions)) for topic in first.topics] == [("a", 3), ("b", 1)]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("b", 1)
    rest = call(
        b,
        75,
        0,
        topics=(t.TopicRequest(name="b"), t.TopicRequest(name="a"), t.TopicRequest(name="zz")),
        response_partition_limit=4,
        cursor=t.Cursor(topic_name="b", partition_index=1),
    )
    assert [
        (topic.name, [p.partition_index for p in topic.partitions]) for topic in rest.topics
    ] == [
        ("b", [1, 2]),
        ("zz", []),
    ]
    assert rest.topics[1].error_code is ErrorCode.unknown_topic_or_partition
    assert rest.next_cursor is None


def test_describe_topic_partitions_sends_empty_elr_lists_as_kafka_does() -> None:
    # The schema lets both be null, but the Java admin client calls .stream() on them:
    # null was a NullPointerException in every Spark read and `kafka-topics --describe`.
    b = broker(partitions=2)
    metadata(b, "a")
    t = types(75, 0)
    response = call(
        b, 75, 0, topics=(t.TopicRequest(name="a"),), response_partition_limit=10, cursor=None
    )
    partitions = response.topics[0].partitions
    assert len(partitions) == 2
    for partition in partitions:
        assert partition.eligible_leader_replicas == ()
        assert partition.last_known_elr == ()


def test_delete_records_advances_the_log_start() -> None:
    b = broker()
    produce(b, "t", 0, record_batch(10))
    t = types(21, 2)

    def delete_below(offset: int) -> Any:
        return (
            call(
                b,
                21,
                2,
                topics=(
                    t.DeleteRecordsTopic(
                        name="t",
                        partitions=(t.DeleteRecordsPartition(partition_index=0, offset=offset),),
                    ),
                ),
                timeout=datetime.timedelta(seconds=5),
            )
            .topics[0]
            .partitions[0]
        )

    assert delete_below(4).low_watermark == 4
    assert list_offsets(b, "t", 0, -2).offset == 4
    beyond = delete_below(11)
    # As Kafka: a refused partition's low watermark is -1, not its log start.
    assert (beyond.error_code, beyond.low_watermark) == (ErrorCode.offset_out_of_range, -1)
    assert delete_below(-1).low_watermark == 10, "-1 means up to the high watermark"


def test_a_source_topic_exists_from_the_start_and_refuses_produce() -> None:
    from nullbroker.sources.synthetic import SourceSpec

    b = broker(sources=(SourceSpec("src", partitions=2, records=500),))
    assert [p.log_end_offset for p in b.topics.get("src").partitions] == [500, 500]
    assert list_offsets(b, "src", 1, -1).offset == 500
    refused = produced_partition(produce(b, "src", 0, record_batch(1)))
    assert refused.error_code is ErrorCode.policy_violation
    assert b.stats.produced.get(("src", 0)) is None or b.stats.produced[("src", 0)].records == 0
