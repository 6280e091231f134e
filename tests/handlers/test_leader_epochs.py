"""Leader epochs as Kafka keeps them: 0 for a new topic's partitions, bumped when a fault
moves a partition's leader; OffsetForLeaderEpoch (key 23) answers where an epoch ends; and a
client's current_leader_epoch that is stale (FENCED_LEADER_EPOCH) or ahead of the broker's
(UNKNOWN_LEADER_EPOCH) is refused by Fetch, ListOffsets and OffsetForLeaderEpoch, as Kafka
refuses them. Kafka's answers to the single-node cases were checked with raw requests
(tests/oracle/test_differential_apis.py asks both brokers the same)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from codec import ApiKey
from codec.apis import request_schema
from codec.entities import make
from nullbroker.broker import Broker
from nullbroker.settings import Config
from tests.processes.test_cluster import PORTS, cluster_broker, session
from tests.support.kio_calls import (
    answered,
    decode_response,
    dispatch_of,
    record_batch,
    request_frame,
    types,
)


def ask(broker: Broker, node: int, api_key: int, version: int, **fields: Any) -> Any:
    frame = request_frame(api_key, version, request_schema(api_key, version)(**fields))
    return decode_response(
        api_key, version, answered(dispatch_of(broker).answer(frame, session(node)))
    )[1]


def end_of(broker: Broker, node: int, topic: str, current: int, epoch: int) -> tuple[int, ...]:
    """(error, epoch, end offset) of OffsetForLeaderEpoch v4 for partition 0 of `topic`."""
    t = types(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4)
    answer = ask(
        broker, node, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4,
        replica_id=-1,
        topics=(make(t.OffsetForLeaderTopic, topic=topic, partitions=(
            make(t.OffsetForLeaderPartition, partition=0, current_leader_epoch=current,
                 leader_epoch=epoch),
        )),),
    )  # fmt: skip
    (result,) = answer.topics[0].partitions
    return result.error_code, result.leader_epoch, result.end_offset


def latest(broker: Broker, node: int, topic: str, current: int) -> tuple[int, ...]:
    """(error, offset, leader epoch) of ListOffsets v10, latest, for partition 0."""
    t = types(ApiKey.LIST_OFFSETS, 10)
    answer = ask(
        broker, node, ApiKey.LIST_OFFSETS, 10,
        replica_id=-1, isolation_level=0, timeout=datetime.timedelta(seconds=1),
        topics=(make(t.ListOffsetsTopic, name=topic, partitions=(
            make(t.ListOffsetsPartition, partition_index=0, current_leader_epoch=current,
                 timestamp=-1),
        )),),
    )  # fmt: skip
    (result,) = answer.topics[0].partitions
    return result.error_code, result.offset, result.leader_epoch


def fetch_error(broker: Broker, node: int, topic: str, current: int) -> int:
    """The error of Fetch v12 of partition 0 from offset 0, naming `current`."""
    t = types(ApiKey.FETCH, 12)
    answer = ask(
        broker, node, ApiKey.FETCH, 12,
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(),
        rack_id="",
        topics=(make(t.FetchTopic, topic=topic, partitions=(
            make(t.FetchPartition, partition=0, current_leader_epoch=current, fetch_offset=0,
                 last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),
        )),),
    )  # fmt: skip
    return answer.responses[0].partitions[0].error_code  # type: ignore[no-any-return]


def grown(broker: Broker, topic: str, records: int) -> None:
    created = broker.topics.get_or_auto_create(topic)
    assert created is not None
    created.partitions[0].log_end_offset = records


def test_one_node_answers_epoch_zero_as_kafka_does() -> None:
    broker = Broker(Config())
    grown(broker, "orders", 3)
    assert end_of(broker, 0, "orders", -1, 0) == (ErrorCode.none, 0, 3)
    assert end_of(broker, 0, "orders", 0, 0) == (ErrorCode.none, 0, 3)
    # No epoch asked, or one after the current: not known, and no error (Kafka's answer).
    assert end_of(broker, 0, "orders", -1, -1) == (ErrorCode.none, -1, -1)
    assert end_of(broker, 0, "orders", 0, 3) == (ErrorCode.none, -1, -1)
    assert end_of(broker, 0, "orders", 5, 0) == (ErrorCode.unknown_leader_epoch, -1, -1)
    assert end_of(broker, 0, "missing", -1, 0) == (ErrorCode.unknown_topic_or_partition, -1, -1)
    assert latest(broker, 0, "orders", -1) == (ErrorCode.none, 3, 0)
    assert latest(broker, 0, "orders", 5) == (ErrorCode.unknown_leader_epoch, -1, -1)
    assert fetch_error(broker, 0, "orders", 0) == ErrorCode.none
    assert fetch_error(broker, 0, "orders", 5) == ErrorCode.unknown_leader_epoch


def test_a_moved_leader_bumps_the_epoch_and_fences_clients_of_the_old_one() -> None:
    broker = cluster_broker()
    grown(broker, "orders", 4)
    leader = broker.cluster.leader("orders", 0)
    assert end_of(broker, leader, "orders", 0, 0) == (ErrorCode.none, 0, 4)
    elsewhere = (leader + 1) % 3
    broker.faults.add(f"move:topic=orders,partition=0,to={elsewhere}")
    assert broker.cluster.leader_epoch("orders", 0) == 1
    # A client that knew epoch 0 is fenced, wherever it asks, and refreshes its metadata.
    for node in (leader, elsewhere):
        assert fetch_error(broker, node, "orders", 0) == ErrorCode.fenced_leader_epoch
        assert latest(broker, node, "orders", 0)[0] == ErrorCode.fenced_leader_epoch
        assert end_of(broker, node, "orders", 0, 0)[0] == ErrorCode.fenced_leader_epoch
    # With the new epoch: the new leader answers, the old one is no leader any more.
    assert fetch_error(broker, elsewhere, "orders", 1) == ErrorCode.none
    assert fetch_error(broker, leader, "orders", 1) == ErrorCode.not_leader_or_follower
    assert latest(broker, elsewhere, "orders", 1) == (ErrorCode.none, 4, 1)
    # The consumer validates its position: epoch 0 ended no earlier than it read.
    assert end_of(broker, elsewhere, "orders", 1, 0) == (ErrorCode.none, 0, 4)
    assert end_of(broker, elsewhere, "orders", 1, 1) == (ErrorCode.none, 1, 4)
    assert end_of(broker, elsewhere, "orders", 2, 1)[0] == ErrorCode.unknown_leader_epoch


def produce_refusal(broker: Broker, node: int, topic: str, version: int) -> Any:
    """Produce v`version` of one batch to partition 0 of `topic`, sent to `node`."""
    t = types(ApiKey.PRODUCE, version)
    created = broker.topics.get(topic)
    assert created is not None
    return ask(
        broker, node, ApiKey.PRODUCE, version,
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=1),
        topic_data=(make(t.TopicProduceData, name=topic, topic_id=created.id, partition_data=(
            make(t.PartitionProduceData, index=0, records=record_batch(1)),
        )),),
    )  # fmt: skip


def fetched(broker: Broker, node: int, topic: str, version: int, current: int = -1) -> Any:
    """Fetch v`version` of partition 0 of `topic` from offset 0, sent to `node`."""
    t = types(ApiKey.FETCH, version)
    created = broker.topics.get(topic)
    assert created is not None
    request = make(
        request_schema(ApiKey.FETCH, version),
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(),
        rack_id="",
        topics=(make(t.FetchTopic, topic=topic, topic_id=created.id, partitions=(
            make(t.FetchPartition, partition=0, current_leader_epoch=current, fetch_offset=0,
                 last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),
        )),),
    )  # fmt: skip
    frame = request_frame(ApiKey.FETCH, version, request)
    answer = answered(dispatch_of(broker).answer(frame, session(node)))
    return decode_response(ApiKey.FETCH, version, answer)[1]


def test_a_partition_refused_elsewhere_names_its_leader_as_kafka_does() -> None:
    """KIP-951, as Kafka 4.1.1 answers: Produce v10+ and Fetch v16+ refused by a node that
    does not lead the partition tell its leader and epoch, and the leader's endpoint; Fetch
    v12-v15 tells no leader; a stale epoch (FENCED_LEADER_EPOCH) is told the leader too."""
    broker = cluster_broker()
    grown(broker, "orders", 2)
    leader = broker.cluster.leader("orders", 0)
    elsewhere = (leader + 1) % 3
    for version in (9, 10, 13):
        answer = produce_refusal(broker, elsewhere, "orders", version)
        (refused,) = answer.responses[0].partition_responses
        assert refused.error_code == ErrorCode.not_leader_or_follower
        if version >= 10:
            assert (refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (
                leader,
                0,
            )
            (endpoint,) = answer.node_endpoints
            assert (endpoint.node_id, endpoint.port) == (leader, PORTS[leader])
    for version in (12, 15, 16, 18):
        answer = fetched(broker, elsewhere, "orders", version)
        (refused,) = answer.responses[0].partitions
        assert refused.error_code == ErrorCode.not_leader_or_follower
        told = (refused.current_leader.leader_id, refused.current_leader.leader_epoch)
        assert told == ((leader, 0) if version >= 16 else (-1, -1))
        endpoints = getattr(answer, "node_endpoints", ())
        assert [(e.node_id, e.port) for e in endpoints] == (
            [(leader, PORTS[leader])] if version >= 16 else []
        )
    # Taken by the leader: nothing to tell.
    answer = produce_refusal(broker, leader, "orders", 13)
    assert answer.responses[0].partition_responses[0].current_leader.leader_id == -1
    assert answer.node_endpoints == ()
    broker.faults.add(f"move:topic=orders,partition=0,to={elsewhere}")
    (fenced,) = fetched(broker, elsewhere, "orders", 16, current=0).responses[0].partitions
    assert fenced.error_code == ErrorCode.fenced_leader_epoch
    assert (fenced.current_leader.leader_id, fenced.current_leader.leader_epoch) == (elsewhere, 1)
