"""Producer ids, sequences and transactions as Kafka 4.1.1 answers them, in-process: each
answer asserted here is the one the shared Kafka gave to the same requests (and
tests/oracle/test_differential_flows.py compares them with the session's Kafka)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from codec import ApiKey
from nullbroker.broker import Broker
from nullbroker.cluster.nodes import OFFSETS_TOPIC, internal_partition_for
from nullbroker.settings import Config
from tests.state.test_transactions_v2 import (
    ADD_PARTITIONS_TO_TXN,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    INIT_PRODUCER_ID,
    OFFSET_FETCH,
    PRODUCE,
    TOPIC,
    TRANSACTIONAL_ID,
    TXN_OFFSET_COMMIT,
    Script,
    add_fields,
    init_fields,
    offset_commit_fields,
)
from tests.support.kio_calls import call, record_batch, types

OFFSETS_PARTITIONS = 50
BATCH_TIME_MS = 1_767_225_600_000
"""kio_calls.record_batch's records' time (2026-01-01), the max timestamp of a batch of one."""


def init(broker: Broker, producer_id: int, epoch: int, transactional_id: str | None) -> Any:
    fields = init_fields(TRANSACTIONAL_ID) | {
        "transactional_id": transactional_id,
        "producer_id": producer_id,
        "producer_epoch": epoch,
    }
    return call(broker, INIT_PRODUCER_ID, 5, **fields)


def produce(broker: Broker, batch: bytes, version: int = 11) -> Any:
    t = types(PRODUCE, version)
    answer = call(
        broker,
        PRODUCE,
        version,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            t.TopicProduceData(
                name=TOPIC, partition_data=(t.PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )
    return answer.responses[0].partition_responses[0]


def idempotent(producer: tuple[int, int], sequence: int) -> bytes:
    return record_batch(
        1, producer_id=producer[0], producer_epoch=producer[1], base_sequence=sequence
    )


def test_init_producer_id_without_a_transactional_id_always_gives_a_new_id() -> None:
    broker = Broker(Config())
    first = init(broker, -1, -1, None)
    # KIP-360: the producer names the id and epoch it had; Kafka gives a new id at epoch 0.
    again = init(broker, first.producer_id, first.producer_epoch, None)
    assert again.error_code is ErrorCode.none
    assert again.producer_id != first.producer_id
    assert again.producer_epoch == 0
    # An id without an epoch, or an epoch without an id, is not a request Kafka takes.
    assert init(broker, first.producer_id, -1, None).error_code is ErrorCode.invalid_request
    assert init(broker, -1, 3, None).error_code is ErrorCode.invalid_request


def test_sequences_are_checked_as_kafka_checks_them() -> None:
    broker = Broker(Config())
    broker.topics.get_or_auto_create(TOPIC)
    produce(broker, record_batch(2))
    t = types(ApiKey.DELETE_RECORDS, 2)
    partitions = (t.DeleteRecordsPartition(partition_index=0, offset=1),)
    call(
        broker,
        ApiKey.DELETE_RECORDS,
        2,
        topics=(t.DeleteRecordsTopic(name=TOPIC, partitions=partitions),),
        timeout=datetime.timedelta(seconds=5),
    )
    answer = init(broker, -1, -1, None)
    producer = (answer.producer_id, answer.producer_epoch)
    # No state for the producer on the partition: any first sequence is taken.
    assert produce(broker, idempotent(producer, 555)).error_code is ErrorCode.none
    gap = produce(broker, idempotent(producer, 600))
    # Refused as the log appends: the log start offset, no message, as Kafka answers.
    assert (gap.error_code, gap.log_start_offset, gap.error_message) == (
        ErrorCode.out_of_order_sequence_number,
        1,
        None,
    )
    assert produce(broker, idempotent((producer[0], 1), 3)).error_code is (
        ErrorCode.out_of_order_sequence_number
    ), "a new epoch starts at sequence 0"
    assert produce(broker, idempotent((producer[0], 1), 0)).error_code is ErrorCode.none
    fenced = produce(broker, idempotent(producer, 556))
    assert (fenced.error_code, fenced.log_start_offset) == (ErrorCode.invalid_producer_epoch, 1)


def test_a_transactional_producers_first_batch_of_produce_v12_must_be_sequence_0() -> None:
    script = Script()
    assert script.produce(12, 7) == (ErrorCode.out_of_order_sequence_number, -1)
    assert script.produce(12, 0) == (ErrorCode.none, 0)
    # Transactions v1 (Produce v11, the partition added first) takes any first sequence.
    call(script.broker, ADD_PARTITIONS_TO_TXN, 3, **add_fields(script.producer, partition=1))
    assert script.produce(11, 7, partition=1) == (ErrorCode.none, 0)


def test_init_producer_id_aborts_an_open_transaction_at_a_fencing_epoch_first() -> None:
    for names_itself, epoch_after in ((False, 2), (True, 1)):
        script = Script()
        producer_id, epoch = script.producer
        script.produce(12, 0)
        asked = (producer_id, epoch) if names_itself else (-1, -1)
        first = init(script.broker, *asked, TRANSACTIONAL_ID)
        assert (first.error_code, first.producer_id, first.producer_epoch) == (
            ErrorCode.concurrent_transactions,
            -1,
            -1,
        )
        # The abort marker carries the fencing epoch, as Kafka writes it.
        marker = script.partition().transactions.markers[2]
        assert (marker.producer_id, marker.epoch, marker.commit) == (producer_id, epoch + 1, False)
        retry = init(script.broker, *asked, TRANSACTIONAL_ID)
        assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (
            ErrorCode.none,
            producer_id,
            epoch + epoch_after,
        )
    fenced = init(script.broker, producer_id + 1, 0, TRANSACTIONAL_ID)
    assert fenced.error_code is ErrorCode.producer_fenced
    assert init(script.broker, producer_id, epoch + 7, TRANSACTIONAL_ID).error_code is (
        ErrorCode.producer_fenced
    )


def groups_on(partition: int, count: int, other: bool = False) -> list[str]:
    """`count` group ids held by `partition` of __consumer_offsets (or, `other`, not)."""
    found = []
    for index in range(100_000):
        group = f"group-{index}"
        if (internal_partition_for(group, OFFSETS_PARTITIONS) == partition) != other:
            found.append(group)
            if len(found) == count:
                return found
    raise AssertionError("no such group ids")


def test_txn_offset_commit_needs_the_groups_offsets_partition_in_the_transaction() -> None:
    script = Script()
    broker = script.broker
    script.produce(12, 0)
    added, sharing = groups_on(7, 2)
    [elsewhere] = groups_on(7, 1, other=True)
    answer = call(
        broker,
        ApiKey.ADD_OFFSETS_TO_TXN,
        3,
        transactional_id=TRANSACTIONAL_ID,
        producer_id=script.producer[0],
        producer_epoch=script.producer[1],
        group_id=added,
    )
    assert answer.error_code is ErrorCode.none

    def commit(group: str) -> ErrorCode:
        fields = offset_commit_fields(3, script.producer, group)
        answer = call(broker, TXN_OFFSET_COMMIT, 3, **fields)
        return answer.topics[0].partitions[0].error_code  # type: ignore[no-any-return]

    # As Kafka: the transaction holds partition 7 of __consumer_offsets, so every group
    # it holds may commit; another partition's group is refused.
    assert [commit(added), commit(sharing), commit(elsewhere)] == [
        ErrorCode.none,
        ErrorCode.none,
        ErrorCode.invalid_txn_state,
    ]
    described = call(broker, DESCRIBE_TRANSACTIONS, 0, transactional_ids=(TRANSACTIONAL_ID,))
    listed = {(topic.topic, topic.partitions) for topic in described.transaction_states[0].topics}
    assert listed == {(TOPIC, (0,)), (OFFSETS_TOPIC, (7,))}
    assert script.end(commit=True)[0] is ErrorCode.none
    assert [committed(broker, group) for group in (added, sharing, elsewhere)] == [5, 5, -1]
    assert broker.topics.get(OFFSETS_TOPIC) is None or all(
        partition.log_end_offset == 0 for partition in broker.topics.get(OFFSETS_TOPIC).partitions
    ), "no marker in __consumer_offsets: its log stays empty"


def committed(broker: Broker, group: str) -> int:
    t = types(OFFSET_FETCH, 8)
    asked = (t.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0,)),)
    fetched = call(
        broker,
        OFFSET_FETCH,
        8,
        require_stable=False,
        groups=(t.OffsetFetchRequestGroup(group_id=group, topics=asked),),
    )
    return fetched.groups[0].topics[0].partitions[0].committed_offset  # type: ignore[no-any-return]


def test_describe_producers_shows_the_last_batch_timestamp_and_names_an_unknown_topic() -> None:
    broker = Broker(Config())
    broker.topics.get_or_auto_create(TOPIC)
    answer = init(broker, -1, -1, None)
    produce(broker, idempotent((answer.producer_id, answer.producer_epoch), 0))
    t = types(DESCRIBE_PRODUCERS, 0)
    described = call(
        broker,
        DESCRIBE_PRODUCERS,
        0,
        topics=(
            t.TopicRequest(name=TOPIC, partition_indexes=(0, 4)),
            t.TopicRequest(name="missing", partition_indexes=(0,)),
        ),
    )
    known, past_the_end = described.topics[0].partitions
    assert [state.last_timestamp for state in known.active_producers] == [BATCH_TIME_MS]
    assert past_the_end.error_message is None
    assert described.topics[1].partitions[0].error_message == (
        "This server does not host this topic-partition."
    )


def test_describe_producers_shows_the_coordinator_epoch_of_the_last_marker() -> None:
    script = Script()
    script.produce(12, 0)
    t = types(DESCRIBE_PRODUCERS, 0)
    asked = (t.TopicRequest(name=TOPIC, partition_indexes=(0,)),)

    def coordinator_epochs() -> list[int]:
        described = call(script.broker, DESCRIBE_PRODUCERS, 0, topics=asked)
        active = described.topics[0].partitions[0].active_producers
        return [state.coordinator_epoch for state in active]

    assert coordinator_epochs() == [-1], "no marker yet"
    script.end(commit=True)
    # Kafka's coordinator of a new cluster writes markers at its epoch 0; so does nullbroker's.
    assert coordinator_epochs() == [0]
