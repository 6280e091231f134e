"""Share groups' APIs (KIP-932), at every version both brokers serve, asked of Kafka 4.4.0
(`kafka`, which serves them as 4.2 made them production-ready) and of nullbroker alike
(tests/support/differential.py), error paths included: the answers must be equal but for
data. Each sequence returns the KNOWN differences it meets.

A member id is the client's (ShareGroupHeartbeat v1): the same on both sides. Records are
produced to both and read back by ShareFetch, so the acquired ranges, delivery counts and
the records themselves are compared."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from tests.support.differential import (
    Pair,
    Side,
    create_topic,
    for_each_version,
    pair,
    produce,
    records_batch,
    request,
    topic_id,
    uncompared_versions,
    unique,
)

pytestmark = pytest.mark.differential
__all__ = ["pair"]

Sequence_ = Callable[[Pair], Awaitable[tuple[str, ...]]]
SHARE_SWEEP: dict[int, Sequence_] = {}
GROUP_RESOURCE = 32
WAIT = datetime.timedelta(milliseconds=500)
ACCEPT, RELEASE, REJECT = 1, 2, 3


def sweep(api_key: int) -> Callable[[Sequence_], Sequence_]:
    def register(run: Sequence_) -> Sequence_:
        SHARE_SWEEP[api_key] = run
        return run

    return register


def member_id() -> str:
    """A member id as clients make one (a uuid, base64-like)."""
    return uuid.uuid4().hex[:22]


async def earliest(pair: Pair, group: str) -> None:
    """The group reads from the log start (share.auto.offset.reset=earliest)."""
    answers = await pair.step(
        request(
            44,
            1,
            resources=[
                {
                    "resource_type": GROUP_RESOURCE,
                    "resource_name": group,
                    "configs": [
                        {
                            "name": "share.auto.offset.reset",
                            "config_operation": 0,
                            "value": "earliest",
                        }
                    ],
                }
            ],
            validate_only=False,
        ),
        compared=False,
    )
    for side in pair.sides:
        assert answers[side].responses[0].error_code == 0, answers[side]


def heartbeat(group: str, member: str, epoch: int, topics: list[str] | None) -> Any:
    return request(
        76,
        1,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rack_id=None,
        subscribed_topic_names=topics,
    )


def assigned(answer: Any) -> bool:
    return (
        answer.error_code == 0
        and answer.assignment is not None
        and bool(answer.assignment.topic_partitions)
    )


async def joined(pair: Pair, group: str, topic: str, member: str) -> None:
    """A member joins and heartbeats until it is assigned, not compared: Kafka assigns a
    share partition only once its share coordinator has initialized it, a moment after the
    first member's join (its first answer assigns nothing); nullbroker at once. Members
    that join after it are compared, joins included. Each side's epoch is kept in
    side.learned["epoch", member]."""
    for side in pair.sides:
        answer = await side.ask(heartbeat(group, member, 0, [topic]))
        deadline = trio.current_time() + 30
        while not assigned(answer) and trio.current_time() < deadline:
            await trio.sleep(0.2)
            answer = await side.ask(heartbeat(group, member, answer.member_epoch, None))
        assert assigned(answer), f"{side.name}: {answer}"
        side.learned["epoch", member] = answer.member_epoch


def at_epoch(group: str, member: str, topics: list[str] | None = None) -> Callable[[Side], Any]:
    """A heartbeat at the member's epoch on each side (learned by `joined`)."""
    return lambda side: heartbeat(group, member, side.learned["epoch", member], topics)


async def topic_with_records(pair: Pair, name: str, count: int, partitions: int = 1) -> str:
    topic = unique(name)
    await create_topic(pair, topic, partitions=partitions, compared=False)
    for index in range(partitions):
        values = [b"record-%d-%d" % (index, n) for n in range(count)]
        await produce(pair, topic, records_batch(values), partition=index)
    return topic


def batches(acknowledgements: list[tuple[int, int, list[int]]]) -> list[dict[str, Any]]:
    return [
        {"first_offset": first, "last_offset": last, "acknowledge_types": types}
        for first, last, types in acknowledgements
    ]


def share_fetch(
    version: int,
    group: str,
    member: str,
    epoch: int,
    topic: str,
    acknowledgements: list[tuple[int, int, list[int]]] = (),  # type: ignore[assignment]
    max_records: int = 500,
    mode: int = 0,
) -> Callable[[Side], Any]:
    def build(side: Side) -> Any:
        return request(
            78,
            version,
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            max_wait=WAIT,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=max_records,
            batch_size=max_records,
            share_acquire_mode=mode,
            is_renew_ack=False,
            topics=[
                {
                    "topic_id": topic_id(side, topic),
                    "partitions": [
                        {
                            "partition_index": 0,
                            "partition_max_bytes": 1 << 20,
                            "acknowledgement_batches": batches(acknowledgements),
                        }
                    ],
                }
            ],
            forgotten_topics_data=[],
        )

    return build


def share_acknowledge(
    version: int,
    group: str,
    member: str,
    epoch: int,
    topic: str,
    acknowledgements: list[tuple[int, int, list[int]]],
) -> Callable[[Side], Any]:
    def build(side: Side) -> Any:
        return request(
            79,
            version,
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            is_renew_ack=False,
            topics=[
                {
                    "topic_id": topic_id(side, topic),
                    "partitions": [
                        {
                            "partition_index": 0,
                            "acknowledgement_batches": batches(acknowledgements),
                        }
                    ],
                }
            ],
        )

    return build


def acquired(answer: Any) -> bool:
    return any(
        partition.acquired_records for topic in answer.responses for partition in topic.partitions
    )


@sweep(76)
async def share_group_heartbeat(pair: Pair) -> tuple[str, ...]:
    topic = unique("sgh")
    await create_topic(pair, topic, partitions=2, compared=False)

    async def run(version: int) -> None:
        group = unique("sgh-group")
        first, second = member_id(), member_id()
        await joined(pair, group, topic, first)
        await pair.step(at_epoch(group, first))
        await pair.step(heartbeat(group, first, 70, None))  # fenced
        await pair.step(heartbeat(group, member_id(), 3, None))  # unknown member
        await pair.step(heartbeat(group, second, 0, [topic]))  # the partitions are shared
        await pair.step(heartbeat("", member_id(), 0, [topic]))  # empty group id
        await pair.step(heartbeat(group, "", 0, [topic]))  # empty member id
        await pair.step(heartbeat(unique("sgh-none"), member_id(), 0, None))  # no topics
        await pair.step(heartbeat(unique("sgh-none"), member_id(), 2, [topic]))  # no group
        await pair.step(heartbeat(group, second, -1, None))  # leaves
        await pair.step(heartbeat(group, first, -1, None))

    await for_each_version(pair, 76, run)
    return ()


@sweep(77)
async def share_group_describe(pair: Pair) -> tuple[str, ...]:
    topic = unique("sgd")
    await create_topic(pair, topic, partitions=2, compared=False)
    group = unique("sgd-group")
    member = member_id()
    await joined(pair, group, topic, member)

    async def run(version: int) -> None:
        for operations in (False, True):
            await pair.step(
                request(
                    77,
                    version,
                    group_ids=[group, unique("sgd-missing")],
                    include_authorized_operations=operations,
                )
            )

    await for_each_version(pair, 77, run)
    return ()


@sweep(78)
async def share_fetch_sweep(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        topic = await topic_with_records(pair, f"sf-v{version}", 10)
        group = unique(f"sf-group-v{version}")
        await earliest(pair, group)
        member = member_id()
        await joined(pair, group, topic, member)
        # Opens the session and acquires the ten records.
        await pair.step(share_fetch(version, group, member, 0, topic), until=acquired)
        # Accept three, release two, reject one; the rest stay acquired.
        acks = [(0, 2, [ACCEPT]), (3, 4, [RELEASE]), (5, 5, [REJECT])]
        await pair.step(share_fetch(version, group, member, 1, topic, acks))
        await pair.step(share_fetch(version, group, member, 7, topic))  # wrong epoch
        # Offsets 0-2 are no longer acquired: INVALID_RECORD_STATE for the partition.
        await pair.step(share_fetch(version, group, member, 2, topic, [(0, 0, [ACCEPT])]))
        await pair.step(share_fetch(version, group, member, -1, topic, [(6, 9, [ACCEPT])]))
        await pair.step(share_fetch(version, group, member, 1, topic))  # session closed
        await pair.step(share_fetch(version, unique("sf-none"), member_id(), 0, topic))

    await for_each_version(pair, 78, run)
    return ()


@sweep(79)
async def share_acknowledge_sweep(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        topic = await topic_with_records(pair, f"sa-v{version}", 6)
        group = unique(f"sa-group-v{version}")
        await earliest(pair, group)
        member = member_id()
        await joined(pair, group, topic, member)
        await pair.step(share_fetch(2, group, member, 0, topic), until=acquired, compared=False)
        await pair.step(share_acknowledge(version, group, member, 0, topic, [(0, 0, [ACCEPT])]))
        await pair.step(share_acknowledge(version, group, member, 1, topic, [(0, 1, [ACCEPT])]))
        await pair.step(share_acknowledge(version, group, member, 9, topic, [(2, 2, [ACCEPT])]))
        await pair.step(
            share_acknowledge(version, group, member, 2, topic, [(0, 0, [ACCEPT])])
        )  # no longer acquired
        await pair.step(share_acknowledge(version, group, member, -1, topic, [(2, 5, [RELEASE])]))
        await pair.step(share_acknowledge(version, group, member, 3, topic, [(2, 2, [ACCEPT])]))

    await for_each_version(pair, 79, run)
    return ()


def describe_offsets(version: int, group: str, topic: str | None) -> Any:
    topics = None if topic is None else [{"topic_name": topic, "partitions": [0, 1]}]
    return request(90, version, groups=[{"group_id": group, "topics": topics}])


@sweep(90)
async def describe_share_group_offsets(pair: Pair) -> tuple[str, ...]:
    topic = await topic_with_records(pair, "dsgo", 5, partitions=2)
    group = unique("dsgo-group")
    await earliest(pair, group)
    member = member_id()
    await joined(pair, group, topic, member)
    await pair.step(share_fetch(2, group, member, 0, topic), until=acquired, compared=False)
    await pair.step(share_fetch(2, group, member, 1, topic, [(0, 2, [ACCEPT])]), compared=False)

    def moved(answer: Any) -> bool:
        # Kafka's share coordinator records the start offset a moment after the accept.
        return answer.groups[0].topics[0].partitions[0].start_offset == 3

    # Kafka's share coordinator records the start offset a while after the accept (it
    # writes the share partition's state in __share_group_state): wait for it first.
    deadline = trio.current_time() + 60
    while not moved(await pair.kafka.ask(describe_offsets(1, group, topic))):
        assert trio.current_time() < deadline, "Kafka never recorded the start offset"
        await trio.sleep(0.5)

    async def run(version: int) -> None:
        await pair.step(describe_offsets(version, group, topic))
        await pair.step(describe_offsets(version, unique("dsgo-missing"), topic))

    await for_each_version(pair, 90, run)
    return ()


def alter_offsets(group: str, topic: str, offset: int) -> Any:
    return request(
        91,
        0,
        group_id=group,
        topics=[
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": offset}]}
        ],
    )


@sweep(91)
async def alter_share_group_offsets(pair: Pair) -> tuple[str, ...]:
    topic = await topic_with_records(pair, "asgo", 5)
    group = unique("asgo-group")
    member = member_id()
    await joined(pair, group, topic, member)
    await pair.step(alter_offsets(group, topic, 2))  # the group has a member
    await pair.step(heartbeat(group, member, -1, None), compared=False)
    await pair.step(alter_offsets(group, topic, 3))
    await pair.step(alter_offsets(group, unique("asgo-missing"), 3))
    return ()


@sweep(92)
async def delete_share_group_offsets(pair: Pair) -> tuple[str, ...]:
    topic = await topic_with_records(pair, "dlsgo", 5)
    group = unique("dlsgo-group")
    member = member_id()
    await joined(pair, group, topic, member)

    def delete(group_id: str, topics: list[str]) -> Any:
        return request(92, 0, group_id=group_id, topics=[{"topic_name": t} for t in topics])

    await pair.step(delete(group, [topic]))  # the group has a member
    await pair.step(heartbeat(group, member, -1, None), compared=False)
    await pair.step(delete(group, [topic, unique("dlsgo-missing")]))
    await pair.step(delete(unique("dlsgo-none"), [topic]))
    return ()


@pytest.mark.parametrize("api_key", sorted(SHARE_SWEEP))
async def test_every_version_answers_as_kafka_4_4_does(pair: Pair, api_key: int) -> None:
    known = await SHARE_SWEEP[api_key](pair)
    pair.check(*known)
    uncompared = uncompared_versions(pair.compared, api_key, pair.advertised(api_key))
    assert not uncompared, f"versions both advertise the sweep never compared: {uncompared}"
