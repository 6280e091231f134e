"""Sequences end to end, asked of Kafka 4.1.1 and of nullbroker alike
(tests/support/differential.py): produced batches read back with --retain (offsets,
timestamps, keys, headers, transaction markers) in both isolation levels, ListOffsets while
a transaction is open, transactions with their offsets and fencing, and classic and KIP-848
consumer groups from join to deletion."""

from __future__ import annotations

import datetime
import itertools
import uuid
from collections.abc import Callable

import pytest
import trio
from kio.records.schema import RecordHeader

from tests.support.differential import (
    Answers,
    Pair,
    Side,
    commit_classic,
    create_topic,
    error_codes,
    find_coordinator,
    generation,
    init_producer,
    join_classic,
    learn_topic_ids,
    list_offsets_request,
    member,
    pair,
    produce,
    producer_batch,
    read_log,
    records_batch,
    request,
    set_assignment_interval,
    topic_id,
    txn_offset_commit_request,
    unique,
)

pytestmark = pytest.mark.differential
__all__ = ["pair"]

SECONDS = datetime.timedelta(seconds=10)
CONCURRENT_TRANSACTIONS = 51
START = 1_767_225_600_000
ADD_PARTITIONS_VERSION = 3
"""The last version a client sends (v4+ is the brokers' verification, KIP-890)."""
END_TXN_VERSION = 4
"""Transactions v1, as a client that adds its partitions and keeps its epoch sends it
(librdkafka 2.16); the transactions v2 sequences end with V2_END_TXN_VERSION."""
V2_END_TXN_VERSION = 5
"""Transactions v2 (KIP-890 part 2), as Kafka's 4.x Java producer sends it: every end bumps
the producer's epoch, and the answer carries the new one."""
V2_PRODUCE_VERSION = 12
"""Transactions v2: a transactional Produce adds its partition to the transaction."""

FIRST_MEMBER_EPOCH = 2
"""A new consumer group's first member's epoch in Kafka 4.4 (1 in Kafka 4.1)."""


def producer(side: Side, transactional_id: str | None) -> tuple[int, int]:
    return (
        side.learned["producer_id", transactional_id],
        side.learned["producer_epoch", transactional_id],
    )


async def add_partition(pair: Pair, transactional_id: str, topic: str) -> None:
    await pair.step(
        lambda side: request(
            24,
            ADD_PARTITIONS_VERSION,
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=producer(side, transactional_id)[0],
            v3_and_below_producer_epoch=producer(side, transactional_id)[1],
            v3_and_below_topics=[{"name": topic, "partitions": [0]}],
        ),
        until=not_concurrent,
    )


async def end_transaction(
    pair: Pair,
    transactional_id: str,
    committed: bool,
    topic: str,
    version: int = END_TXN_VERSION,
    marker: bool = True,
) -> None:
    """EndTxn, then (with a `marker` to write) wait for it on the topic's partition 0: Kafka
    writes markers after it answers EndTxn, so a Produce sent at once may land before the
    marker. From v5 each side learns the producer id and epoch its answer gives."""
    before = (await log_end(pair, topic)).kafka.topics[0].partitions[0].offset
    answers = await pair.step(
        lambda side: request(
            26,
            version,
            transactional_id=transactional_id,
            producer_id=producer(side, transactional_id)[0],
            producer_epoch=producer(side, transactional_id)[1],
            committed=committed,
        ),
        until=not_concurrent,
    )
    if version >= V2_END_TXN_VERSION:
        for side in pair.sides:
            if answers[side].error_code == 0:
                side.learned["producer_id", transactional_id] = answers[side].producer_id
                side.learned["producer_epoch", transactional_id] = answers[side].producer_epoch
    if marker:
        await log_end(pair, topic, above=before)


async def log_end(pair: Pair, topic: str, above: int = -1) -> Answers:
    """ListOffsets latest (read_uncommitted), repeated until it is above `above`."""
    return await pair.step(
        list_offsets_request(pair.versions(2)[-1], topic, -1),
        until=lambda answer: answer.topics[0].partitions[0].offset > above,
    )


def not_concurrent(answer: object) -> bool:
    """Kafka completes the end of a transaction after answering EndTxn: until then the
    next one gets CONCURRENT_TRANSACTIONS, which clients retry (as here, on both)."""
    return CONCURRENT_TRANSACTIONS not in set(error_codes(answer))


async def transaction(
    pair: Pair, transactional_id: str, topic: str, values: list[bytes], sequence: int
) -> None:
    """AddPartitionsToTxn and a transactional Produce; the transaction is left open."""
    await add_partition(pair, transactional_id, topic)
    await produce(
        pair,
        topic,
        producer_batch(
            transactional_id,
            values,
            sequence,
            transactional=True,
            timestamp_ms=START + 100 * sequence,
        ),
        transactional_id=transactional_id,
    )


async def fetch_everything(pair: Pair, topic: str, offsets: range) -> None:
    """Read the partition from each offset to its end at the highest common version and
    the lowest, in both isolation levels."""
    versions = pair.versions(1)
    for version in sorted({versions[0], versions[-1]}):
        for isolation_level in (0, 1):
            for offset in offsets:
                await read_log(pair, topic, version, isolation_level, offset)


async def list_offsets(pair: Pair, topic: str, timestamps: list[int]) -> None:
    for isolation_level in (0, 1):
        for timestamp in timestamps:
            await pair.step(
                list_offsets_request(pair.versions(2)[-1], topic, timestamp, isolation_level)
            )


async def test_produced_batches_read_back_as_from_kafka(pair: Pair) -> None:
    topic = unique("readback")
    await create_topic(pair, topic)
    header = RecordHeader(key=b"trace", value=b"\x00\x01")
    await produce(pair, topic, records_batch([b"a", b"b"], key=b"k", headers=(header,)))
    await init_producer(pair, None)
    await produce(pair, topic, producer_batch(None, [b"i1", b"i2", b"i3"], 0))
    transactional_id = unique("txn")
    await init_producer(pair, transactional_id)
    await transaction(pair, transactional_id, topic, [b"c1", b"c2"], 0)
    await end_transaction(pair, transactional_id, committed=True, topic=topic)
    await transaction(pair, transactional_id, topic, [b"x1"], 2)
    await end_transaction(pair, transactional_id, committed=False, topic=topic)
    await produce(pair, topic, producer_batch(None, [b"i4"], 3))
    # Offsets 0-1 plain, 2-4 idempotent, 5-6 committed, 7 its marker, 8 aborted, 9 its
    # marker, 10 idempotent: every batch start and a record inside one.
    await fetch_everything(pair, topic, range(12))
    pair.check()


async def test_list_offsets_and_fetch_while_a_transaction_is_open(pair: Pair) -> None:
    topic = unique("marker-clock")  # its commit marker is found by time, at each one's clock
    await create_topic(pair, topic)
    await produce(pair, topic, records_batch([b"a", b"b", b"c"], timestamp_ms=START))
    transactional_id = unique("txn")
    await init_producer(pair, transactional_id)
    await transaction(pair, transactional_id, topic, [b"t1", b"t2"], 0)
    await produce(pair, topic, records_batch([b"d"], timestamp_ms=START + 50))
    timestamps = [-2, -1, -3, START, START + 1, START + 50, START + 10_000]
    # Open: read_committed stops at the transaction's first offset (3).
    await list_offsets(pair, topic, timestamps)
    await fetch_everything(pair, topic, range(0, 7, 3))
    await end_transaction(pair, transactional_id, committed=True, topic=topic)
    await list_offsets(pair, topic, timestamps)
    await fetch_everything(pair, topic, range(0, 8, 3))
    pair.check()


async def offset_fetch(pair: Pair, group: str, topic: str) -> None:
    await pair.step(
        lambda side: request(
            9,
            pair.versions(9)[-1],
            groups=[
                {
                    "group_id": group,
                    "member_id": None,
                    "member_epoch": -1,
                    "topics": [
                        {
                            "name": topic,
                            "topic_id": topic_id(side, topic),
                            "partition_indexes": [0],
                        }
                    ],
                }
            ],
            require_stable=False,
        )
    )


async def txn_offset_commit(
    pair: Pair, transactional_id: str, group: str, topic: str, offset: int
) -> None:
    await pair.step(
        lambda side: request(
            25,
            pair.versions(25)[-1],
            transactional_id=transactional_id,
            producer_id=producer(side, transactional_id)[0],
            producer_epoch=producer(side, transactional_id)[1],
            group_id=group,
        )
    )
    await pair.step(
        lambda side: txn_offset_commit_request(
            side, pair.versions(28)[-1], transactional_id, group, topic, offset
        )
    )


async def test_transactions_commit_abort_offsets_and_fencing(pair: Pair) -> None:
    topic = unique("txnflow")
    group = unique("txngroup")
    await create_topic(pair, topic)
    await find_coordinator(pair, group)
    transactional_id = unique("txn")
    await init_producer(pair, transactional_id)
    await transaction(pair, transactional_id, topic, [b"a"], 0)
    await txn_offset_commit(pair, transactional_id, group, topic, 1)
    await offset_fetch(pair, group, topic)  # pending: not visible yet
    await end_transaction(pair, transactional_id, committed=True, topic=topic)
    await offset_fetch(pair, group, topic)
    await transaction(pair, transactional_id, topic, [b"b"], 1)
    await txn_offset_commit(pair, transactional_id, group, topic, 2)
    await end_transaction(pair, transactional_id, committed=False, topic=topic)
    await offset_fetch(pair, group, topic)  # the abort keeps offset 1
    # A second producer with the same id fences the first, whose open transaction aborts.
    await transaction(pair, transactional_id, topic, [b"c"], 2)
    old = {side.name: producer(side, transactional_id) for side in pair.sides}
    await init_producer(pair, transactional_id)
    fenced = producer_batch(transactional_id, [b"late"], 3, transactional=True)
    await pair.step(
        lambda side: request(
            0,
            pair.versions(0)[-1],
            transactional_id=transactional_id,
            acks=-1,
            timeout=SECONDS,
            topic_data=[
                {
                    "name": topic,
                    "topic_id": side.learned["topic_id", topic],
                    "partition_data": [
                        {
                            "index": 0,
                            "records": records_batch(
                                [b"late"],
                                producer_id=old[side.name][0],
                                producer_epoch=old[side.name][1],
                                base_sequence=3,
                                transactional=True,
                            ),
                        }
                    ],
                }
            ],
        )
    )
    del fenced
    await pair.step(
        lambda side: request(
            26,
            END_TXN_VERSION,
            transactional_id=transactional_id,
            producer_id=old[side.name][0],
            producer_epoch=old[side.name][1],
            committed=True,
        )
    )
    await fetch_everything(pair, topic, range(0, 6))
    pair.check()


async def v2_produce(
    pair: Pair, transactional_id: str, topic: str, values: list[bytes], sequence: int
) -> Answers:
    """A transactional Produce v12 (transactions v2), which adds its partition itself."""
    return await produce(
        pair,
        topic,
        producer_batch(
            transactional_id,
            values,
            sequence,
            transactional=True,
            timestamp_ms=START + 100 * sequence,
        ),
        version=V2_PRODUCE_VERSION,
        transactional_id=transactional_id,
    )


async def test_transactions_v2_read_back_as_from_kafka(pair: Pair) -> None:
    """A transactions v2 producer (InitProducerId v5, Produce v12, TxnOffsetCommit v5 and
    EndTxn v5, as Kafka's 4.x Java producer): a transaction read while open (the last stable
    offset), committed with its offsets, aborted, one whose partition it added itself
    (AddPartitionsToTxn v3) committed, and an abort with nothing open; the old epoch's batch
    fenced after each end, the EndTxn retried with it answered again; then the log read back
    in both isolation levels from every offset (each marker at its bumped epoch, the aborted
    transaction listed, the last stable offset), ListOffsets, DescribeProducers,
    DescribeTransactions and the group's offsets."""
    topic = unique("txnv2")
    group = unique("txnv2-group")
    await create_topic(pair, topic)
    await find_coordinator(pair, group)
    await produce(pair, topic, records_batch([b"before"], timestamp_ms=START))  # 0
    transactional_id = unique("txn")
    await init_producer(pair, transactional_id)
    await v2_produce(pair, transactional_id, topic, [b"c1", b"c2"], 0)  # 1-2
    await pair.step(
        lambda side: txn_offset_commit_request(
            side, pair.versions(28)[-1], transactional_id, group, topic, 3
        )
    )
    timestamps = [-2, -1, -3, START, START + 1, START + 10_000]
    await list_offsets(pair, topic, timestamps)  # read_committed ends at 1
    await fetch_everything(pair, topic, range(0, 3))
    await offset_fetch(pair, group, topic)
    fenced = {side.name: producer(side, transactional_id) for side in pair.sides}
    await end_transaction(pair, transactional_id, True, topic, V2_END_TXN_VERSION)  # 3
    await offset_fetch(pair, group, topic)
    await pair.step(  # the producer's last epoch: fenced
        lambda side: produce_request_of(
            side, topic, transactional_id, fenced[side.name], [b"late"], sequence=2
        )
    )
    await pair.step(  # the EndTxn again, with the epoch before: a retry, answered again
        lambda side: request(
            26,
            V2_END_TXN_VERSION,
            transactional_id=transactional_id,
            producer_id=fenced[side.name][0],
            producer_epoch=fenced[side.name][1],
            committed=True,
        ),
        until=not_concurrent,
    )
    await v2_produce(pair, transactional_id, topic, [b"x1"], 0)  # 4, sequences from 0
    await end_transaction(pair, transactional_id, False, topic, V2_END_TXN_VERSION)  # 5
    await add_partition(pair, transactional_id, topic)
    await v2_produce(pair, transactional_id, topic, [b"c3"], 0)  # 6
    await end_transaction(pair, transactional_id, True, topic, V2_END_TXN_VERSION)  # 7
    await end_transaction(
        pair, transactional_id, False, topic, V2_END_TXN_VERSION, marker=False
    )  # nothing open: the epoch bumps all the same
    await produce(pair, topic, records_batch([b"after"], timestamp_ms=START + 50))  # 8
    await fetch_everything(pair, topic, range(0, 10))
    await list_offsets(pair, topic, timestamps)
    await pair.step(
        request(61, pair.versions(61)[-1], topics=[{"name": topic, "partition_indexes": [0]}])
    )
    await pair.step(  # the last end complete (Kafka completes it after it answers)
        request(65, pair.versions(65)[-1], transactional_ids=[transactional_id]),
        until=lambda answer: answer.transaction_states[0].transaction_state == "CompleteAbort",
    )
    await offset_fetch(pair, group, topic)
    pair.check()


def produce_request_of(
    side: Side,
    topic: str,
    transactional_id: str,
    producer_id_and_epoch: tuple[int, int],
    values: list[bytes],
    sequence: int,
) -> object:
    """A transactional Produce v12 of a batch from the producer id and epoch given."""
    producer_id, epoch = producer_id_and_epoch
    return request(
        0,
        V2_PRODUCE_VERSION,
        transactional_id=transactional_id,
        acks=-1,
        timeout=SECONDS,
        topic_data=[
            {
                "name": topic,
                "topic_id": side.learned["topic_id", topic],
                "partition_data": [
                    {
                        "index": 0,
                        "records": records_batch(
                            values,
                            producer_id=producer_id,
                            producer_epoch=epoch,
                            base_sequence=sequence,
                            transactional=True,
                        ),
                    }
                ],
            }
        ],
    )


def describe_groups(pair: Pair, group: str) -> object:
    return request(15, pair.versions(15)[-1], groups=[group], include_authorized_operations=False)


async def test_classic_group_from_join_to_deletion(pair: Pair) -> None:
    topic = unique("classic")
    await create_topic(pair, topic)
    group = unique("classic")
    await join_classic(pair, group, topic)
    await pair.step(
        lambda side: request(
            12,
            pair.versions(12)[-1],
            group_id=group,
            generation_id=generation(side, group),
            member_id=member(side, group),
        )
    )
    await commit_classic(pair, group, topic, 4)
    await offset_fetch(pair, group, topic)
    await pair.step(describe_groups(pair, group))
    offset_delete = request(
        47, 0, group_id=group, topics=[{"name": topic, "partitions": [{"partition_index": 0}]}]
    )
    await pair.step(offset_delete)  # GROUP_SUBSCRIBED_TO_TOPIC while the member reads it
    await pair.step(request(42, pair.versions(42)[-1], groups_names=[group]))  # NON_EMPTY_GROUP
    await pair.step(
        lambda side: request(
            13,
            pair.versions(13)[-1],
            group_id=group,
            members=[{"member_id": member(side, group), "group_instance_id": None}],
        )
    )
    await pair.step(describe_groups(pair, group))
    await pair.step(offset_delete)
    await offset_fetch(pair, group, topic)
    await pair.step(request(42, pair.versions(42)[-1], groups_names=[group]))
    await pair.step(describe_groups(pair, group))
    pair.check()


async def consumer_heartbeat(pair: Pair, group: str, member_id: str, **fields: object) -> None:
    """ConsumerGroupHeartbeat at the member's epoch on each broker (unless given)."""
    answers = await pair.step(
        lambda side: request(
            68,
            pair.versions(68)[-1],
            group_id=group,
            member_id=member_id,
            **{"member_epoch": side.learned.get(("epoch", group), 0), **fields},
        )
    )
    for side in pair.sides:
        side.learned["epoch", group] = answers[side].member_epoch


async def test_consumer_group_from_join_to_deletion(pair: Pair) -> None:
    topic = unique("kip848")
    await create_topic(pair, topic, partitions=2)
    group = unique("kip848")
    member_id = str(uuid.uuid4())
    await find_coordinator(pair, group)
    await set_assignment_interval(pair, group, 0)  # rebalances at once, as 4.1's
    await consumer_heartbeat(
        pair,
        group,
        member_id,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=[topic],
        server_assignor="uniform",
        topic_partitions=[],
    )
    await consumer_heartbeat(
        pair,
        group,
        member_id,
        topic_partitions=[
            {"topic_id": side_topic, "partitions": [0, 1]} for side_topic in [uuid.UUID(int=0)][:0]
        ],
    )
    await pair.step(
        lambda side: request(
            8,
            pair.versions(8)[-1],
            group_id=group,
            generation_id_or_member_epoch=side.learned["epoch", group],
            member_id=member_id,
            topics=[
                {
                    "name": topic,
                    "topic_id": side.learned["topic_id", topic],
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 3, "committed_metadata": ""}
                    ],
                }
            ],
        )
    )
    await offset_fetch(pair, group, topic)
    await pair.step(
        request(69, pair.versions(69)[-1], group_ids=[group], include_authorized_operations=False)
    )
    await pair.step(describe_groups(pair, group))
    # Offsets in a transaction, to a KIP-848 group.
    transactional_id = unique("txn")
    await init_producer(pair, transactional_id)
    await transaction(pair, transactional_id, topic, [b"a"], 0)
    await txn_offset_commit(pair, transactional_id, group, topic, 7)
    await end_transaction(pair, transactional_id, committed=True, topic=topic)
    await offset_fetch(pair, group, topic)
    await consumer_heartbeat(pair, group, member_id, member_epoch=-1, topic_partitions=None)
    await pair.step(
        request(69, pair.versions(69)[-1], group_ids=[group], include_authorized_operations=False)
    )
    await pair.step(
        request(
            47, 0, group_id=group, topics=[{"name": topic, "partitions": [{"partition_index": 0}]}]
        )
    )
    await offset_fetch(pair, group, topic)
    await pair.step(request(42, pair.versions(42)[-1], groups_names=[group]))
    await pair.step(
        request(69, pair.versions(69)[-1], group_ids=[group], include_authorized_operations=False)
    )
    pair.check()


async def test_a_uniform_assignment_keeps_what_a_member_owns(pair: Pair) -> None:
    """Member a owns both partitions; b, whose id sorts first, joins: Kafka's uniform
    assignor leaves a its partition 0 and will give b partition 1 once a lets it go."""
    topic = unique("sticky")
    await create_topic(pair, topic, partitions=2)
    group = unique("sticky")
    b, a = sorted(str(uuid.uuid4()) for _ in range(2))
    await find_coordinator(pair, group)
    await set_assignment_interval(pair, group, 0)  # rebalances at once, as 4.1's

    async def beat(member_id: str, epoch: int, owned: list[int]) -> None:
        answers = await pair.step(
            lambda side: request(
                68,
                pair.versions(68)[-1],
                group_id=group,
                member_id=member_id,
                member_epoch=side.learned.get(("epoch", member_id), 0) if epoch else 0,
                rebalance_timeout=datetime.timedelta(seconds=30),
                subscribed_topic_names=[topic],
                server_assignor="uniform",
                topic_partitions=[{"topic_id": topic_id(side, topic), "partitions": owned}][
                    : len(owned)
                ],
            )
        )
        for side in pair.sides:
            side.learned["epoch", member_id] = answers[side].member_epoch

    await beat(a, 0, [])
    await beat(a, 1, [0, 1])
    await beat(b, 0, [])
    await beat(a, 1, [0, 1])  # told to give up partition 1, not 0
    await beat(a, 1, [0])
    await beat(b, 2, [])  # given partition 1
    pair.check()


async def test_producer_sequences_epochs_and_their_state(pair: Pair) -> None:
    """Kafka's sequence rules (ProducerAppendInfo.checkSequence) on a partition whose log
    start is not 0: an idempotent producer's first batch at any sequence, a duplicate of its
    last batch and one of the batch before (with other timestamps: the answer carries the
    first's), a new epoch from 0 only, an old epoch fenced, a transactional batch of Produce
    v12 (transactions v2) from 0 only; then what DescribeProducers shows of them."""
    topic = unique("sequences")
    await create_topic(pair, topic)
    await produce(pair, topic, records_batch([b"a", b"b"]))
    await pair.step(
        request(
            21,
            pair.versions(21)[-1],
            topics=[{"name": topic, "partitions": [{"partition_index": 0, "offset": 1}]}],
            timeout=SECONDS,
        )
    )
    await init_producer(pair, None)
    await produce(pair, topic, producer_batch(None, [b"i1", b"i2"], 555))
    await produce(pair, topic, producer_batch(None, [b"i3"], 557, timestamp_ms=START + 7))
    await produce(pair, topic, producer_batch(None, [b"i3"], 557, timestamp_ms=START + 7))
    await produce(pair, topic, producer_batch(None, [b"i1", b"i2"], 555, timestamp_ms=START + 3))
    await produce(pair, topic, producer_batch(None, [b"gap"], 600))

    def next_epoch(sequence: int) -> object:
        return lambda side: records_batch(
            [b"e"],
            producer_id=producer(side, None)[0],
            producer_epoch=producer(side, None)[1] + 1,
            base_sequence=sequence,
        )

    await produce(pair, topic, next_epoch(3))
    await produce(pair, topic, next_epoch(0))
    await produce(pair, topic, producer_batch(None, [b"old"], 558))
    transactional_id = unique("txn")
    await init_producer(pair, transactional_id)
    for sequence in (7, 0):
        await produce(
            pair,
            topic,
            producer_batch(transactional_id, [b"t"], sequence, transactional=True),
            version=12,
            transactional_id=transactional_id,
        )
    await pair.step(
        request(61, pair.versions(61)[-1], topics=[{"name": topic, "partition_indexes": [0]}])
    )
    pair.check()


async def test_init_producer_id_fences_an_open_transaction(pair: Pair) -> None:
    """InitProducerId while the id's transaction is open: CONCURRENT_TRANSACTIONS while the
    transaction aborts at a bumped epoch, then the epoch after it, for a new producer
    (no id) and for the same one retrying (its id and epoch, KIP-360); then the
    transaction's __consumer_offsets partition as DescribeTransactions lists it."""
    topic = unique("fence")
    group = unique("fencegroup")
    await create_topic(pair, topic)
    await find_coordinator(pair, group)
    for names_itself in (False, True):
        transactional_id = unique("txn")
        await init_producer(pair, transactional_id)
        await transaction(pair, transactional_id, topic, [b"a"], 0)
        await txn_offset_commit(pair, transactional_id, group, topic, 1)
        await pair.step(request(65, pair.versions(65)[-1], transactional_ids=[transactional_id]))
        if not names_itself:
            for side in pair.sides:
                side.learned["producer_id", transactional_id] = -1
                side.learned["producer_epoch", transactional_id] = -1
        await pair.step(
            lambda side, transactional_id=transactional_id: request(
                22,
                pair.versions(22)[-1],
                transactional_id=transactional_id,
                transaction_timeout=datetime.timedelta(seconds=60),
                producer_id=producer(side, transactional_id)[0],
                producer_epoch=producer(side, transactional_id)[1],
            )
        )
        await init_producer(pair, transactional_id)
    await fetch_everything(pair, topic, range(0, 4))
    await pair.step(
        request(61, pair.versions(61)[-1], topics=[{"name": topic, "partition_indexes": [0]}])
    )
    pair.check()


async def test_commits_at_a_member_s_previous_older_and_newer_epochs(pair: Pair) -> None:
    """Member a owns both partitions at its first epoch (2 in Kafka 4.4); b joins (the next);
    a gives up partition 1 and moves to the next epoch. Then a commits partition 0, which it
    still owns, and partition 1, which it gave up, at every epoch around its own (the
    previous one is what a commit crossed by the heartbeat moving it on carries; Kafka 4.4.0
    refuses it, KIP-1251 would take it); an unknown member, and no member, commit too. The
    same in a transaction."""
    topic = unique("kip1251")
    await create_topic(pair, topic, partitions=2)
    await learn_topic_ids(pair, topic)
    group = unique("kip1251")
    a, b = sorted(str(uuid.uuid4()) for _ in range(2))  # uniform: the first id keeps 0
    await find_coordinator(pair, group)

    def beat(
        member_id: str, epoch: int, owned: list[int] | None, topics: list[str] | None = None
    ) -> Callable[[Side], object]:
        return lambda side: request(
            68,
            pair.versions(68)[-1],
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            rebalance_timeout=datetime.timedelta(seconds=30),
            subscribed_topic_names=topics,
            topic_partitions=None
            if owned is None
            else [{"topic_id": topic_id(side, topic), "partitions": owned}][: len(owned)],
        )

    await set_assignment_interval(pair, group, 0)  # b's joining moves partition 1 at once
    first = FIRST_MEMBER_EPOCH
    await pair.step(beat(a, 0, [], [topic]))
    await pair.step(beat(a, first, [0, 1]))
    await pair.step(beat(b, 0, [], [topic]))
    await pair.step(beat(a, first, [0, 1]))  # told to give up partition 1
    await pair.step(beat(a, first, [0]))  # done: the next epoch
    own = first + 1
    committers = [(a, epoch) for epoch in (first, first - 1, own + 1, -1, own)]
    committers += [("nobody", own), ("", -1)]
    for (member_id, epoch), partition in itertools.product(committers, (0, 1)):
        await pair.step(
            lambda side, member_id=member_id, epoch=epoch, partition=partition: request(
                8,
                pair.versions(8)[-1],
                group_id=group,
                generation_id_or_member_epoch=epoch,
                member_id=member_id,
                retention_time_ms=-1,
                topics=[
                    {
                        "name": topic,
                        "topic_id": topic_id(side, topic),
                        "partitions": [
                            {
                                "partition_index": partition,
                                "committed_offset": epoch + 10,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            )
        )
    await offset_fetch(pair, group, topic)
    transactional_id = unique("txn")
    await init_producer(pair, transactional_id)
    await transaction(pair, transactional_id, topic, [b"a"], 0)
    await txn_offset_commit(pair, transactional_id, group, topic, 20)
    for member_id, epoch in [(a, first), (a, own + 1), ("nobody", own), (a, own)]:
        await pair.step(
            lambda side, member_id=member_id, epoch=epoch: txn_offset_commit_request(
                side,
                pair.versions(28)[-1],
                transactional_id,
                group,
                topic,
                30 + epoch,
                member_id=member_id,
                generation_id=epoch,
            )
        )
    await end_transaction(pair, transactional_id, committed=True, topic=topic)
    await offset_fetch(pair, group, topic)
    pair.check()


# -- fetch sessions (KIP-227) ---------------------------------------------------------------

Asked = list[tuple[str, list[tuple[int, int]]]]
"""Topics with their (partition, fetch offset) each."""


def session_fetch(
    side: Side,
    version: int,
    asked: Asked,
    forgotten: Asked,
    *,
    session_id: int | None = None,
    epoch: int | None = None,
    max_wait_ms: int = 0,
) -> object:
    """A Fetch in this side's session (side.learned), or at the id and epoch given."""

    def topic(name: str) -> dict[str, object]:
        return {"topic": name, "topic_id": side.learned.get(("topic_id", name), uuid.UUID(int=0))}

    return request(
        1,
        version,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=side.learned.get("fetch session", 0) if session_id is None else session_id,
        session_epoch=side.learned.get("fetch epoch", 0) if epoch is None else epoch,
        topics=[
            {
                **topic(name),
                "partitions": [
                    {
                        "partition": index,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                    for index, offset in partitions
                ],
            }
            for name, partitions in asked
        ],
        forgotten_topics_data=[
            {**topic(name), "partitions": [index for index, _ in partitions]}
            for name, partitions in forgotten
        ],
        rack_id="",
    )


def moved_on(side: Side, answer: object) -> None:
    """The session id and epoch a client keeps after an answer (Java's FetchSessionHandler)."""
    if getattr(answer, "error_code", 1) != 0:
        return
    session_id = answer.session_id  # type: ignore[attr-defined]
    if session_id != side.learned.get("fetch session", 0):
        side.learned["fetch session"], side.learned["fetch epoch"] = session_id, 0
    side.learned["fetch epoch"] = side.learned["fetch epoch"] + 1 if session_id else 0


async def in_session(
    pair: Pair,
    version: int,
    asked: Asked | None = None,
    forgotten: Asked | None = None,
    **fields: int,
) -> Answers:
    answers = await pair.step(
        lambda side: session_fetch(side, version, asked or [], forgotten or [], **fields)
    )
    for side in pair.sides:
        moved_on(side, answers[side])
    return answers


def listed(answer: object) -> list[tuple[int, int]]:
    """(partition, records bytes) of each partition an answer lists."""
    return [
        (data.partition_index, len(data.records or b""))
        for topic in answer.responses  # type: ignore[attr-defined]
        for data in topic.partitions
    ]


async def held_until_produced(pair: Pair, version: int, topic: str, partition: int) -> None:
    """An incremental Fetch naming no partition, held at the log end on each broker until a
    record arrives at a partition of its session (produced on another connection)."""
    answers: dict[str, object] = {}

    async def held(side: Side) -> None:
        answers[side.name] = await side.ask(session_fetch(side, version, [], [], max_wait_ms=8000))
        moved_on(side, answers[side.name])

    producers = [await side.connection() for side in pair.sides]
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for side in pair.sides:
                nursery.start_soon(held, side)
            await trio.sleep(0.5)
            assert not answers, "nothing new: both brokers hold the fetch"
            for producer in producers:
                await producer.ask(
                    produce_request(pair.versions(0)[-1], producer, topic, partition, [b"held"])
                )
    for producer in producers:
        await producer.stream.aclose()
    pair.record(1, version, Answers(answers[pair.kafka.name], answers[pair.nullbroker.name]))


def produce_request(
    version: int, side: Side, topic: str, partition: int, values: list[bytes]
) -> object:
    return request(
        0,
        version,
        transactional_id=None,
        acks=-1,
        timeout=SECONDS,
        topic_data=[
            {
                "name": topic,
                "topic_id": side.learned.get(("topic_id", topic), uuid.UUID(int=0)),
                "partition_data": [{"index": partition, "records": records_batch(values)}],
            }
        ],
    )


@pytest.mark.parametrize("by_ids", [False, True], ids=["by-name", "by-id"])
async def test_fetch_sessions_as_kafka_keeps_them(pair: Pair, by_ids: bool) -> None:
    version = pair.versions(1)[-1] if by_ids else 12
    topic, other = unique("session"), unique("session-b")
    await create_topic(pair, topic, partitions=2)
    await create_topic(pair, other)
    await produce(pair, topic, records_batch([b"a", b"b"]))
    opened = await in_session(pair, version, [(topic, [(0, 0), (1, 0)])], epoch=0)
    assert opened.nullbroker.session_id > 0
    assert [(index, size > 0) for index, size in listed(opened.nullbroker)] == [
        (0, True),
        (1, False),
    ]
    for side in pair.sides:
        side.learned["opened"] = side.learned["fetch session"]
    quiet = await in_session(pair, version, [(topic, [(0, 2)])])
    assert listed(quiet.nullbroker) == [], "nothing new: an empty answer"
    await in_session(pair, version)
    await produce(pair, topic, records_batch([b"c"]), partition=1)
    news = await in_session(pair, version)
    assert [index for index, size in listed(news.nullbroker) if size] == [1]
    await in_session(pair, version, [(topic, [(1, 1)])])
    added = await in_session(pair, version, [(other, [(0, 0)])])
    assert listed(added.nullbroker) == [(0, 0)], "a partition added is told of"
    await in_session(pair, version, forgotten=[(topic, [(1, 1)])])
    await produce(pair, topic, records_batch([b"d"]), partition=1)
    forgot = await in_session(pair, version)
    assert listed(forgot.nullbroker) == [], "a forgotten partition is no longer watched"
    wrong = await in_session(pair, version, epoch=pair.nullbroker.learned["fetch epoch"] + 5)
    assert wrong.nullbroker.error_code == 71
    await in_session(pair, version)  # the session still serves
    unknown = await pair.step(
        lambda side: session_fetch(
            side, version, [], [], session_id=side.learned["fetch session"] ^ 1, epoch=1
        )
    )
    assert unknown.nullbroker.error_code == 70
    if by_ids:
        await pair.step(
            lambda side: session_fetch(side, 12, [], [])
        )  # FETCH_SESSION_TOPIC_ID_ERROR
    await in_session(pair, version, [(topic, [(0, 2)])], [(other, [(0, 0)])])
    await held_until_produced(pair, version, topic, 0)
    closing = await in_session(pair, version, [(topic, [(0, 2)])], epoch=-1)
    assert closing.nullbroker.session_id == 0
    closed = await pair.step(
        lambda side: session_fetch(
            side, version, [], [], session_id=side.learned["opened"], epoch=1
        )
    )
    assert closed.nullbroker.error_code == 70
    pair.check()
