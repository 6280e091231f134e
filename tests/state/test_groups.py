"""Consumer groups in-process: the classic group protocol, committed offsets and group
administration, through Dispatch.answer (request bytes in, response bytes out).

Time is trio's MockClock with autojump: sessions, rebalance timeouts and the initial
rebalance delay pass as soon as every task waits, so no test sleeps for real.
"""

from __future__ import annotations

import datetime
import inspect
import io
import struct
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
from kio.schema.consumer_protocol_assignment.v0 import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_assignment.v0.data import TopicPartition
from kio.schema.consumer_protocol_subscription.v0 import ConsumerProtocolSubscription
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from codec import KAFKA_4_RANGES
from codec.apis import request_schema
from codec.entities import make
from nullbroker.app.configuration import checked, load
from nullbroker.broker import Broker
from nullbroker.ops.metrics import exposition, make_registry
from nullbroker.ops.report import summary
from nullbroker.settings import Config, ConfigError
from nullbroker.state.groups.consumer import ConsumerGroups
from nullbroker.state.groups.consumer import Heartbeat as ConsumerHeartbeat
from nullbroker.state.groups.coordinator import GroupCoordinator
from nullbroker.state.groups.model import GroupState
from nullbroker.stats import GROUP_STATES, BrokerStats
from tests.support.kio_calls import SESSION, decode_response, dispatch_of, request_frame, types

OFFSET_COMMIT, OFFSET_FETCH, METADATA = 8, 9, 3
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
INIT_PRODUCER_ID, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 22, 25, 26, 28
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69

SESSION_MS = 10_000
REBALANCE_MS = 30_000
# Bounds every wait in mock time: far beyond any timeout the tests set, and free.
PATIENCE_SECONDS = 600
TOPIC = "orders"
PARTITIONS = 4
TOPIC_IDS_FROM = 10


def versions(api_key: int) -> range:
    served = KAFKA_4_RANGES[api_key]
    return range(served.min_version, served.max_version + 1)


def by_topic_name(api_key: int) -> range:
    """The versions of OffsetCommit or OffsetFetch that name topics; v10 names them by id
    (test_offset_commit_and_fetch_v10_name_topics_by_id)."""
    return range(KAFKA_4_RANGES[api_key].min_version, TOPIC_IDS_FROM)


def ms(milliseconds: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=milliseconds)


def subscription(*topics: str) -> bytes:
    """Consumer-protocol subscription metadata, as a Java consumer sends it (version 0)."""
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", 0))
    entity_writer(ConsumerProtocolSubscription)(
        buffer, ConsumerProtocolSubscription(topics=topics, user_data=None)
    )
    return buffer.getvalue()


def assignment(topic: str, *partitions: int) -> bytes:
    """Consumer-protocol assignment of `partitions` of `topic` (version 0)."""
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", 0))
    entity_writer(ConsumerProtocolAssignment)(
        buffer,
        ConsumerProtocolAssignment(
            assigned_partitions=(TopicPartition(topic=topic, partitions=partitions),),
            user_data=None,
        ),
    )
    return buffer.getvalue()


async def acall(broker: Broker, api_key: int, version: int, **fields: Any) -> Any:
    """Send one request; await the answer if the request waits; decode it."""
    body = make(request_schema(api_key, version), **fields)
    answer = dispatch_of(broker).answer(request_frame(api_key, version, body), SESSION)
    if inspect.isawaitable(answer):
        answer = await answer
    assert answer is not None, "this request should have been answered"
    _, response = decode_response(api_key, version, answer)
    return response


@pytest.fixture
async def broker(nursery: trio.Nursery) -> AsyncIterator[Broker]:
    """A broker with a topic of four partitions and its group coordinator running; consumer
    groups' assignments are made at every change (test_the_assignment_waits_its_interval
    tests the interval)."""
    b = Broker(Config(partitions=PARTITIONS, group_consumer_assignment_interval_ms=0))
    await nursery.start(b.groups.run)
    await acall(
        b,
        METADATA,
        12,
        topics=(types(METADATA, 12).MetadataRequestTopic(topic_id=None, name=TOPIC),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    yield b


@dataclass
class Consumer:
    """One group member as a client drives it: join (answering MEMBER_ID_REQUIRED), sync,
    heartbeat, leave."""

    broker: Broker
    group: str = "group"
    instance: str | None = None
    protocols: Sequence[tuple[str, bytes]] = (("range", subscription(TOPIC)),)
    protocol_type: str = "consumer"
    session_ms: int = SESSION_MS
    member_id: str = ""
    generation: int = -1
    joined: list[Any] = field(default_factory=list)

    async def join(self, version: int = 9) -> Any:
        response = await self._join_once(version)
        if response.error_code is ErrorCode.member_id_required:
            self.member_id = response.member_id
            response = await self._join_once(version)
        if response.error_code is ErrorCode.none:
            self.member_id, self.generation = response.member_id, response.generation_id
        self.joined.append(response)
        return response

    async def _join_once(self, version: int) -> Any:
        t = types(JOIN_GROUP, version)
        return await acall(
            self.broker,
            JOIN_GROUP,
            version,
            group_id=self.group,
            session_timeout=ms(self.session_ms),
            rebalance_timeout=ms(REBALANCE_MS),
            member_id=self.member_id,
            group_instance_id=self.instance,
            protocol_type=self.protocol_type,
            protocols=tuple(
                t.JoinGroupRequestProtocol(name=name, metadata=metadata)
                for name, metadata in self.protocols
            ),
            reason=None,
        )

    async def sync(self, assignments: dict[str, bytes] | None = None, version: int = 5) -> Any:
        t = types(SYNC_GROUP, version)
        return await acall(
            self.broker,
            SYNC_GROUP,
            version,
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance,
            protocol_type=self.protocol_type,
            protocol_name=self.protocols[0][0],
            assignments=tuple(
                t.SyncGroupRequestAssignment(member_id=member, assignment=data)
                for member, data in (assignments or {}).items()
            ),
        )

    async def heartbeat(self, version: int = 4) -> ErrorCode:
        response = await acall(
            self.broker,
            HEARTBEAT,
            version,
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance,
        )
        return response.error_code

    async def leave(self) -> Any:
        t = types(LEAVE_GROUP, 5)
        return await acall(
            self.broker,
            LEAVE_GROUP,
            5,
            group_id=self.group,
            members=(
                make(
                    t.MemberIdentity,
                    member_id=self.member_id,
                    group_instance_id=self.instance,
                    reason=None,
                ),
            ),
        )


async def join_together(*consumers: Consumer) -> None:
    async with trio.open_nursery() as nursery:
        for consumer in consumers:
            nursery.start_soon(consumer.join)


async def stable(*consumers: Consumer) -> dict[str, bytes]:
    """Join all together, the leader assigns a partition round-robin, all sync: the
    assignment each member received, by member id."""
    await join_together(*consumers)
    leader = next(c for c in consumers if c.joined[-1].leader == c.member_id)
    members = [m.member_id for m in leader.joined[-1].members]
    plan = {
        member: assignment(TOPIC, *range(i, PARTITIONS, len(members)))
        for i, member in enumerate(members)
    }
    received: dict[str, bytes] = {}

    async def sync(consumer: Consumer) -> None:
        response = await consumer.sync(plan if consumer is leader else None)
        assert response.error_code is ErrorCode.none
        received[consumer.member_id] = response.assignment

    async with trio.open_nursery() as nursery:
        for consumer in consumers:
            nursery.start_soon(sync, consumer)
    return received


def commit_request(
    group: str,
    offsets: dict[int, int],
    generation: int = -1,
    member: str = "",
    version: int = 8,
    topic: str = TOPIC,
    metadata: str | None = "m",
) -> dict[str, Any]:
    t = types(OFFSET_COMMIT, version)
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "group_instance_id": None,
        "retention_time": ms(-1),
        "topics": (
            t.OffsetCommitRequestTopic(
                name=topic,
                partitions=tuple(
                    make(
                        t.OffsetCommitRequestPartition,
                        partition_index=partition,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata=metadata,
                    )
                    for partition, offset in offsets.items()
                ),
            ),
        ),
    }


async def commit(
    broker: Broker, group: str, offsets: dict[int, int], **options: Any
) -> list[ErrorCode]:
    version = options.get("version", 8)
    response = await acall(
        broker, OFFSET_COMMIT, version, **commit_request(group, offsets, **options)
    )
    return [p.error_code for t in response.topics for p in t.partitions]


async def fetch(
    broker: Broker, group: str, partitions: Sequence[int] | None, version: int = 8
) -> dict[tuple[str, int], Any]:
    """Committed offsets by (topic, partition), from an OffsetFetch of `version`."""
    t = types(OFFSET_FETCH, version)
    if version >= 8:
        topics = (
            None
            if partitions is None
            else (t.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=tuple(partitions)),)
        )
        response = await acall(
            broker,
            OFFSET_FETCH,
            version,
            require_stable=True,
            groups=(
                make(
                    t.OffsetFetchRequestGroup,
                    group_id=group,
                    member_id=None,
                    member_epoch=-1,
                    topics=topics,
                ),
            ),
        )
        (answered,) = response.groups
        assert answered.error_code is ErrorCode.none
        found = answered.topics
    else:
        topics = (
            None
            if partitions is None
            else (t.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=tuple(partitions)),)
        )
        response = await acall(
            broker, OFFSET_FETCH, version, group_id=group, topics=topics, require_stable=True
        )
        found = response.topics
    return {(topic.name, p.partition_index): p for topic in found for p in topic.partitions}


async def delete_offsets(broker: Broker, group: str, topics: Sequence[str]) -> Any:
    """An OffsetDelete of each topic's partition 0."""
    t = types(OFFSET_DELETE, 0)
    return await acall(
        broker,
        OFFSET_DELETE,
        0,
        group_id=group,
        topics=tuple(
            t.OffsetDeleteRequestTopic(
                name=name, partitions=(t.OffsetDeleteRequestPartition(partition_index=0),)
            )
            for name in topics
        ),
    )


async def describe(broker: Broker, group: str, version: int = 5) -> Any:
    response = await acall(
        broker, DESCRIBE_GROUPS, version, groups=(group,), include_authorized_operations=True
    )
    return response.groups[0]


# Joining and syncing


async def test_a_new_member_gets_member_id_required_then_leads_generation_1(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumer = Consumer(broker)
    first = await consumer._join_once(version=5)
    assert first.error_code is ErrorCode.member_id_required
    assert first.member_id.startswith("tests-")
    consumer.member_id = first.member_id
    with trio.fail_after(PATIENCE_SECONDS):
        joined = await consumer._join_once(version=5)
    assert joined.error_code is ErrorCode.none
    assert (joined.generation_id, joined.leader, joined.member_id) == (
        1,
        first.member_id,
        first.member_id,
    )
    assert [(m.member_id, m.metadata) for m in joined.members] == [
        (first.member_id, subscription(TOPIC))
    ]
    assert joined.protocol_name == "range"
    consumer.generation = 1
    synced = await consumer.sync({consumer.member_id: assignment(TOPIC, 0, 1, 2, 3)})
    assert synced.error_code is ErrorCode.none
    assert synced.assignment == assignment(TOPIC, 0, 1, 2, 3)
    assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    assert await consumer.heartbeat() is ErrorCode.none
    described = await describe(broker, "group")
    assert (described.group_state, described.protocol_type, described.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    (member,) = described.members
    assert (member.client_id, member.client_host) == ("tests", "/127.0.0.1")
    assert member.member_assignment == assignment(TOPIC, 0, 1, 2, 3)


async def test_the_first_join_group_makes_the_coordinator_and_is_answered(
    nursery: trio.Nursery, autojump_clock: trio.abc.Clock
) -> None:
    # A served broker makes its group coordinator for the first group request, and runs
    # its timers from then on: that request is answered as by a coordinator running all
    # along, not COORDINATOR_NOT_AVAILABLE.
    b = Broker(Config(partitions=PARTITIONS))
    b.serve_groups_in(nursery)
    assert "groups" not in vars(b)
    consumer = Consumer(b)
    with trio.fail_after(PATIENCE_SECONDS):
        joined = await consumer.join()
    assert joined.error_code is ErrorCode.none and joined.generation_id == 1
    await trio.sleep(SESSION_MS / 1000 * 2)  # the timers run: the silent member expires
    assert b.groups.group("group").state == "Empty"


async def test_before_join_group_v4_a_new_member_is_given_its_id_with_the_join(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumer = Consumer(broker)
    first = await consumer._join_once(version=3)
    assert first.error_code is ErrorCode.none
    assert first.generation_id == 1 and first.leader == first.member_id != ""


async def test_members_joining_within_the_initial_delay_form_one_generation(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumers = [Consumer(broker) for _ in range(3)]
    with trio.fail_after(PATIENCE_SECONDS):
        received = await stable(*consumers)
    generations = {c.joined[-1].generation_id for c in consumers}
    assert generations == {1}
    leaders = [c for c in consumers if c.joined[-1].leader == c.member_id]
    assert len(leaders) == 1
    assert len(leaders[0].joined[-1].members) == 3
    assert all(not c.joined[-1].members for c in consumers if c is not leaders[0])
    assert len(set(received.values())) == 3
    assert broker.stats.rebalances == 1
    assert broker.stats.groups["Stable"] == 1


async def test_a_member_joining_a_stable_group_makes_it_rebalance(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    first = Consumer(broker)
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(first)
        second = Consumer(broker)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(second.join)
            # The existing member learns of the rebalance from its heartbeat, then rejoins.
            while await first.heartbeat() is ErrorCode.none:
                await trio.sleep(1)
            assert await first.heartbeat() is ErrorCode.rebalance_in_progress
            await first.join()
    assert first.generation == second.generation == 2
    assert broker.stats.rebalances == 2


async def test_a_leaving_member_makes_the_survivor_rebalance_alone(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    first, second = Consumer(broker), Consumer(broker)
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(first, second)
        left = await second.leave()
        assert left.error_code is ErrorCode.none
        assert [m.error_code for m in left.members] == [ErrorCode.none]
        assert await first.heartbeat() is ErrorCode.rebalance_in_progress
        received = await stable(first)
    assert first.generation == 2
    assert received[first.member_id] == assignment(TOPIC, 0, 1, 2, 3)


async def test_a_member_that_stops_heartbeating_is_removed_after_its_session_timeout(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    alive, silent = Consumer(broker), Consumer(broker)
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(alive, silent)
        # Heartbeat well within the session, until the silent member's session ends.
        for _ in range(4 * SESSION_MS // 1000):
            await trio.sleep(1)
            if await alive.heartbeat() is ErrorCode.rebalance_in_progress:
                break
        else:
            raise AssertionError("the silent member was never removed")
        await stable(alive)
    described = await describe(broker, "group")
    assert [m.member_id for m in described.members] == [alive.member_id]
    assert await silent.heartbeat() is ErrorCode.unknown_member_id


async def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_dropped(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    rejoining, absent = Consumer(broker), Consumer(broker)
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(rejoining, absent)
        # The leader (whoever it is) rejoining starts a rebalance the other never joins.
        leader = rejoining if rejoining.joined[-1].leader == rejoining.member_id else absent
        other = absent if leader is rejoining else rejoining
        async with trio.open_nursery() as nursery:
            nursery.start_soon(leader.join)
            # Keep the other member's session alive: only the rebalance timeout drops it.
            while leader.joined[-1].generation_id != 2:
                await trio.sleep(1)
                await other.heartbeat()
    assert [m.member_id for m in leader.joined[-1].members] == [leader.member_id]


async def test_members_that_do_not_sync_within_the_rebalance_timeout_are_dropped(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumers = [Consumer(broker), Consumer(broker)]
    with trio.fail_after(PATIENCE_SECONDS):
        await join_together(*consumers)
        # The follower syncs and waits for the leader's assignment, which never comes.
        follower = next(c for c in consumers if c.joined[-1].leader != c.member_id)
        synced = await follower.sync()
        assert synced.error_code is ErrorCode.rebalance_in_progress
        received = await stable(follower)
    assert follower.generation == 2
    assert received[follower.member_id] == assignment(TOPIC, 0, 1, 2, 3)


async def test_a_follower_rejoining_with_the_same_metadata_gets_the_current_generation(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumers = [Consumer(broker), Consumer(broker)]
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(*consumers)
        follower = next(c for c in consumers if c.joined[-1].leader != c.member_id)
        again = await follower.join()
    assert again.error_code is ErrorCode.none and again.generation_id == 1
    assert broker.groups.group("group").state == "Stable"


async def test_a_pending_member_that_never_rejoins_expires_with_its_session(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    joined = Consumer(broker)
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(joined)
        ghost = Consumer(broker)
        assert (await ghost._join_once(9)).error_code is ErrorCode.member_id_required
        # The group waits for the pending member during the rebalance the leader starts,
        # until the pending id expires with its session.
        assert (await joined.join()).generation_id == 2
    assert [m.member_id for m in joined.joined[-1].members] == [joined.member_id]


async def test_protocol_is_the_one_all_support_that_most_members_prefer(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    range_first = (("range", b"r"), ("roundrobin", b"rr"))
    roundrobin_first = (("roundrobin", b"rr"), ("range", b"r"), ("sticky", b"s"))
    consumers = [
        Consumer(broker, protocols=range_first),
        Consumer(broker, protocols=roundrobin_first),
        Consumer(broker, protocols=roundrobin_first),
    ]
    with trio.fail_after(PATIENCE_SECONDS):
        await join_together(*consumers)
    assert {c.joined[-1].protocol_name for c in consumers} == {"roundrobin"}


async def test_a_member_without_a_common_protocol_is_refused(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(Consumer(broker))
    other_type = await Consumer(broker, protocol_type="connect").join()
    assert other_type.error_code is ErrorCode.inconsistent_group_protocol
    other_name = await Consumer(broker, protocols=(("sticky", b""),)).join()
    assert other_name.error_code is ErrorCode.inconsistent_group_protocol
    empty_type = await Consumer(broker, group="fresh", protocol_type="").join()
    assert empty_type.error_code is ErrorCode.inconsistent_group_protocol


async def test_join_refuses_bad_session_timeouts_empty_group_ids_and_unknown_members(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    assert (
        await Consumer(broker, session_ms=1_000).join()
    ).error_code is ErrorCode.invalid_session_timeout
    assert (
        await Consumer(broker, session_ms=3_600_000).join()
    ).error_code is ErrorCode.invalid_session_timeout
    assert (await Consumer(broker, group="").join()).error_code is ErrorCode.invalid_group_id
    unknown = await Consumer(broker, member_id="who").join()
    assert unknown.error_code is ErrorCode.unknown_member_id


async def test_sync_group_errors_follow_kafka(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    first, second = Consumer(broker), Consumer(broker)
    assert (await first.sync()).error_code is ErrorCode.unknown_member_id  # no such group
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(first)
    stranger = Consumer(broker, member_id="stranger", generation=1)
    assert (await stranger.sync()).error_code is ErrorCode.unknown_member_id
    stale = Consumer(broker, member_id=first.member_id, generation=0)
    assert (await stale.sync()).error_code is ErrorCode.illegal_generation
    other_name = Consumer(
        broker, member_id=first.member_id, generation=1, protocols=(("sticky", b""),)
    )
    assert (await other_name.sync()).error_code is ErrorCode.inconsistent_group_protocol
    with trio.fail_after(PATIENCE_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(second.join)
            while await first.heartbeat() is ErrorCode.none:
                await trio.sleep(1)
            assert (await first.sync()).error_code is ErrorCode.rebalance_in_progress
            await first.join()


async def test_a_sync_group_v5_without_protocol_type_or_name_is_refused_first(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    # Kafka 4.1.1 answers INCONSISTENT_GROUP_PROTOCOL before it looks at the member (which
    # here is unknown, and the group too); v4 has neither field and is asked about the member.
    async def sync(version: int, protocol_type: str | None, protocol_name: str | None) -> Any:
        return await acall(
            broker,
            SYNC_GROUP,
            version,
            group_id="group",
            generation_id=1,
            member_id="stranger",
            group_instance_id=None,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=(),
        )

    assert (await sync(5, None, None)).error_code is ErrorCode.inconsistent_group_protocol
    assert (await sync(5, "consumer", None)).error_code is ErrorCode.inconsistent_group_protocol
    assert (await sync(5, "consumer", "range")).error_code is ErrorCode.unknown_member_id
    assert (await sync(4, None, None)).error_code is ErrorCode.unknown_member_id


async def test_a_follower_parked_on_sync_learns_of_a_new_rebalance(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumers = [Consumer(broker), Consumer(broker)]
    with trio.fail_after(PATIENCE_SECONDS):
        await join_together(*consumers)
        follower = next(c for c in consumers if c.joined[-1].leader != c.member_id)
        async with trio.open_nursery() as nursery:
            answers: list[Any] = []

            async def sync() -> None:
                answers.append(await follower.sync())

            nursery.start_soon(sync)
            await trio.sleep(1)
            # A third member joins while the leader has not assigned yet.
            nursery.start_soon(Consumer(broker).join)
            while not answers:
                await trio.sleep(1)
            nursery.cancel_scope.cancel()
    assert answers[0].error_code is ErrorCode.rebalance_in_progress


async def test_heartbeat_errors_follow_kafka(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumer = Consumer(broker)
    assert await consumer.heartbeat() is ErrorCode.unknown_member_id
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(consumer)
    assert (
        await Consumer(broker, member_id=consumer.member_id, generation=7).heartbeat()
        is ErrorCode.illegal_generation
    )
    assert await Consumer(broker, group="", member_id="m").heartbeat() is ErrorCode.invalid_group_id


async def test_leave_group_answers_each_member_and_unknown_groups(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumer = Consumer(broker)
    unknown_group = await consumer.leave()
    assert unknown_group.error_code is ErrorCode.none
    assert [m.error_code for m in unknown_group.members] == [ErrorCode.unknown_member_id]
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(consumer)
    old = await acall(broker, LEAVE_GROUP, 0, group_id="group", member_id="nobody")
    assert old.error_code is ErrorCode.unknown_member_id
    old = await acall(broker, LEAVE_GROUP, 2, group_id="group", member_id=consumer.member_id)
    assert old.error_code is ErrorCode.none
    assert broker.groups.group("group").state == "Empty"


# Static membership


async def test_a_restarted_static_member_takes_over_without_rebalance_and_fences_its_old_id(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    before = Consumer(broker, instance="host-1")
    with trio.fail_after(PATIENCE_SECONDS):
        received = await stable(before)
        after = Consumer(broker, instance="host-1")
        rejoined = await after.join()
    assert rejoined.error_code is ErrorCode.none
    assert after.member_id != before.member_id and after.member_id.startswith("host-1-")
    assert rejoined.generation_id == 1, "no rebalance: the group's protocol did not change"
    assert rejoined.skip_assignment and [m.member_id for m in rejoined.members] == [after.member_id]
    assert await before.heartbeat() is ErrorCode.fenced_instance_id
    assert (await before.sync()).error_code is ErrorCode.fenced_instance_id
    assert await after.heartbeat() is ErrorCode.none
    synced = await after.sync()
    assert synced.assignment == received[before.member_id]
    assert broker.stats.rebalances == 1


async def test_a_static_member_parked_on_join_is_fenced_when_its_instance_rejoins(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    first = Consumer(broker, instance="host-1")
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(first, Consumer(broker, instance="host-2"))
        # A member rejoining with new metadata parks until every member rejoins...
        first.protocols = (("range", subscription(TOPIC, "other")),)
        async with trio.open_nursery() as nursery:
            answers: list[Any] = []

            async def rejoin() -> None:
                answers.append(await first.join())

            nursery.start_soon(rejoin)
            await trio.sleep(1)
            # ...and a restart of its instance replaces it meanwhile.
            replacement = Consumer(broker, instance="host-1")
            nursery.start_soon(replacement.join)
            while not answers:
                await trio.sleep(1)
            nursery.cancel_scope.cancel()
    assert answers[0].error_code is ErrorCode.fenced_instance_id


async def test_a_static_member_can_be_removed_by_instance_id_alone(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    static = Consumer(broker, instance="host-1")
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(static)
    t = types(LEAVE_GROUP, 4)
    response = await acall(
        broker,
        LEAVE_GROUP,
        4,
        group_id="group",
        members=(make(t.MemberIdentity, member_id="", group_instance_id="host-1"),),
    )
    assert [m.error_code for m in response.members] == [ErrorCode.none]
    assert broker.groups.group("group").state == "Empty"


# Committed offsets


async def test_a_member_commits_in_its_generation_and_reads_its_offsets_back(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumer = Consumer(broker)
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(consumer)
    errors = await commit(broker, "group", {0: 10, 1: 11}, generation=1, member=consumer.member_id)
    assert errors == [ErrorCode.none, ErrorCode.none]
    for version in (1, 7, 8):
        found = await fetch(broker, "group", [0, 1, 2], version=version)
        assert found[(TOPIC, 0)].committed_offset == 10
        assert found[(TOPIC, 1)].committed_offset == 11
        assert found[(TOPIC, 0)].metadata == "m"
        assert found[(TOPIC, 2)].committed_offset == -1, "nothing committed: -1"
        assert found[(TOPIC, 2)].error_code is ErrorCode.none


async def test_commits_from_outside_the_current_generation_are_refused(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumer = Consumer(broker)
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(consumer)
    assert await commit(broker, "group", {0: 1}, generation=5, member=consumer.member_id) == [
        ErrorCode.illegal_generation
    ]
    assert await commit(broker, "group", {0: 1}, generation=1, member="stranger") == [
        ErrorCode.unknown_member_id
    ]
    # A simple consumer may not commit to a group that has members.
    assert await commit(broker, "group", {0: 1}) == [ErrorCode.unknown_member_id]
    assert (await fetch(broker, "group", [0]))[(TOPIC, 0)].committed_offset == -1


async def test_a_commit_while_the_group_completes_a_rebalance_is_told_to_wait(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumer = Consumer(broker)
    with trio.fail_after(PATIENCE_SECONDS):
        await consumer.join()
    assert broker.groups.group("group").state == "CompletingRebalance"
    assert await commit(broker, "group", {0: 1}, generation=1, member=consumer.member_id) == [
        ErrorCode.rebalance_in_progress
    ]


async def test_a_simple_consumer_commits_with_generation_minus_1_to_an_empty_group(
    broker: Broker,
) -> None:
    assert await commit(broker, "spark-kafka-source-1", {0: 5, 3: 7}) == [ErrorCode.none] * 2
    found = await fetch(broker, "spark-kafka-source-1", None)
    assert {key: p.committed_offset for key, p in found.items()} == {(TOPIC, 0): 5, (TOPIC, 3): 7}
    listed = await acall(broker, LIST_GROUPS, 5, states_filter=(), types_filter=())
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
        ("spark-kafka-source-1", "", "Empty", "classic")
    ]


async def test_commits_to_a_group_that_does_not_exist_with_a_generation_are_refused(
    broker: Broker,
) -> None:
    assert await commit(broker, "nobody", {0: 1}, generation=1, member="m", version=8) == [
        ErrorCode.illegal_generation
    ]
    assert await commit(broker, "nobody", {0: 1}, generation=1, member="m", version=9) == [
        ErrorCode.group_id_not_found
    ]


async def test_commits_to_unknown_partitions_or_with_oversized_metadata_are_refused(
    broker: Broker,
) -> None:
    assert await commit(broker, "g", {0: 1}, topic="no-such-topic") == [
        ErrorCode.unknown_topic_or_partition
    ]
    assert await commit(broker, "g", {9: 1}) == [ErrorCode.unknown_topic_or_partition]
    assert await commit(broker, "g", {0: 1}, metadata="x" * 4097) == [
        ErrorCode.offset_metadata_too_large
    ]
    assert await commit(broker, "", {0: 1}) == [ErrorCode.invalid_group_id]


async def test_offset_fetch_of_null_topics_returns_every_committed_offset(broker: Broker) -> None:
    await commit(broker, "a", {1: 100, 2: 200})
    await commit(broker, "b", {0: 1})
    for version in (2, 7):
        found = await fetch(broker, "a", None, version=version)
        assert {key: p.committed_offset for key, p in found.items()} == {
            (TOPIC, 1): 100,
            (TOPIC, 2): 200,
        }
    t = types(OFFSET_FETCH, 8)
    response = await acall(
        broker,
        OFFSET_FETCH,
        8,
        require_stable=False,
        groups=tuple(
            make(t.OffsetFetchRequestGroup, group_id=g, topics=None) for g in ("a", "b", "none")
        ),
    )
    assert [
        (
            g.group_id,
            [
                (p.partition_index, p.committed_offset)
                for topic in g.topics
                for p in topic.partitions
            ],
        )
        for g in response.groups
    ] == [("a", [(1, 100), (2, 200)]), ("b", [(0, 1)]), ("none", [])]


async def test_offset_commit_and_fetch_v10_name_topics_by_id(broker: Broker) -> None:
    """Kafka 4.2 made v10 stable (topics by id, as the new consumer protocol commits): an
    offset committed by id is fetched by id and by name; an id no topic has is
    UNKNOWN_TOPIC_ID, in either."""
    known = broker.topics.get(TOPIC)
    assert known is not None
    unknown = uuid.uuid4()
    c = types(OFFSET_COMMIT, TOPIC_IDS_FROM)
    committed = await acall(
        broker,
        OFFSET_COMMIT,
        TOPIC_IDS_FROM,
        group_id="by-id",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=tuple(
            c.OffsetCommitRequestTopic(
                topic_id=topic_id,
                partitions=(
                    make(
                        c.OffsetCommitRequestPartition,
                        partition_index=0,
                        committed_offset=42,
                        committed_leader_epoch=-1,
                        committed_metadata="m",
                    ),
                ),
            )
            for topic_id in (known.id, unknown)
        ),
    )
    assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in committed.topics] == [
        (known.id, [ErrorCode.none]),
        (unknown, [ErrorCode.unknown_topic_id]),
    ]
    f = types(OFFSET_FETCH, TOPIC_IDS_FROM)
    fetched = await acall(
        broker,
        OFFSET_FETCH,
        TOPIC_IDS_FROM,
        require_stable=False,
        groups=(
            f.OffsetFetchRequestGroup(
                group_id="by-id",
                member_id=None,
                member_epoch=-1,
                topics=tuple(
                    f.OffsetFetchRequestTopics(topic_id=topic_id, partition_indexes=(0,))
                    for topic_id in (known.id, unknown)
                ),
            ),
        ),
    )
    (group,) = fetched.groups
    assert [
        (t.topic_id, [(p.committed_offset, p.error_code) for p in t.partitions])
        for t in group.topics
    ] == [(known.id, [(42, ErrorCode.none)]), (unknown, [(-1, ErrorCode.unknown_topic_id)])]
    assert (await fetch(broker, "by-id", [0]))[TOPIC, 0].committed_offset == 42


# Group administration


async def test_describing_an_unknown_group_says_dead_and_from_v6_group_id_not_found(
    broker: Broker,
) -> None:
    old = await describe(broker, "nobody", version=5)
    assert (old.error_code, old.group_state) == (ErrorCode.none, "Dead")
    new = await describe(broker, "nobody", version=6)
    assert (new.error_code, new.group_state) == (ErrorCode.group_id_not_found, "Dead")


async def test_list_groups_filters_by_state_and_type_ignoring_case(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(Consumer(broker, group="busy"))
    await commit(broker, "idle", {0: 1})

    async def listed(states: tuple[str, ...], kinds: tuple[str, ...] = ()) -> list[str]:
        response = await acall(broker, LIST_GROUPS, 5, states_filter=states, types_filter=kinds)
        return sorted(g.group_id for g in response.groups)

    assert await listed(()) == ["busy", "idle"]
    assert await listed(("stable",)) == ["busy"]
    assert await listed(("EMPTY", "Stable")) == ["busy", "idle"]
    assert await listed((), ("Classic",)) == ["busy", "idle"]
    assert await listed((), ("consumer",)) == []


async def test_delete_groups_removes_empty_groups_with_their_offsets_only(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(Consumer(broker, group="busy"))
    await commit(broker, "idle", {0: 9})
    response = await acall(broker, DELETE_GROUPS, 2, groups_names=("busy", "idle", "nobody", ""))
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("busy", ErrorCode.non_empty_group),
        ("idle", ErrorCode.none),
        ("nobody", ErrorCode.group_id_not_found),
        ("", ErrorCode.invalid_group_id),
    ]
    assert (await fetch(broker, "idle", [0]))[(TOPIC, 0)].committed_offset == -1
    assert broker.stats.groups["Empty"] == 0


async def test_offset_delete_keeps_offsets_of_topics_the_members_subscribe_to(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumer = Consumer(broker, protocols=(("range", subscription(TOPIC)),))
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(consumer)
    await acall(
        broker,
        METADATA,
        12,
        topics=(types(METADATA, 12).MetadataRequestTopic(topic_id=None, name="other"),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    await commit(broker, "group", {0: 3}, generation=1, member=consumer.member_id)
    await commit(broker, "group", {0: 4}, generation=1, member=consumer.member_id, topic="other")
    response = await delete_offsets(broker, "group", (TOPIC, "other", "missing"))
    assert response.error_code is ErrorCode.none
    assert {topic.name: topic.partitions[0].error_code for topic in response.topics} == {
        TOPIC: ErrorCode.group_subscribed_to_topic,
        "other": ErrorCode.none,
        "missing": ErrorCode.unknown_topic_or_partition,
    }
    assert broker.groups.committed("group") == {
        TOPIC: {0: broker.groups.committed("group")[TOPIC][0]}
    }
    unknown = await acall(broker, OFFSET_DELETE, 0, group_id="nobody", topics=())
    assert unknown.error_code is ErrorCode.group_id_not_found


async def test_offset_delete_refuses_a_non_consumer_group_with_members(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(Consumer(broker, protocol_type="connect", protocols=(("default", b""),)))
    response = await acall(broker, OFFSET_DELETE, 0, group_id="group", topics=())
    assert response.error_code is ErrorCode.non_empty_group


# Groups of the new protocol (KIP-848) in the offset, transaction and administration APIs.
# Each answer below is the one Kafka 4.1.1 gave to the same requests.


@dataclass
class NewMember:
    """A member of the new protocol, heartbeating as a client does."""

    broker: Broker
    group: str = "new"
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0

    async def heartbeat(
        self,
        epoch: int | None = None,
        topics: tuple[str, ...] | None = None,
        owned: Sequence[int] | None = None,
    ) -> Any:
        response = await self.send(epoch, topics, owned)
        assert response.error_code is ErrorCode.none, response
        self.epoch = response.member_epoch
        return response

    async def send(
        self,
        epoch: int | None = None,
        topics: tuple[str, ...] | None = None,
        owned: Sequence[int] | None = None,
    ) -> Any:
        """One heartbeat, whatever it is answered; `owned`: the partitions of TOPIC it says
        it owns (None: unchanged since its last heartbeat)."""
        topic = self.broker.topics.get(TOPIC)
        assert topic is not None
        return await acall(
            self.broker,
            CONSUMER_GROUP_HEARTBEAT,
            1,
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=self.epoch if epoch is None else epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=ms(REBALANCE_MS),
            subscribed_topic_names=topics,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=None
            if owned is None
            else (
                types(CONSUMER_GROUP_HEARTBEAT, 1).TopicPartitions(
                    topic_id=topic.id, partitions=tuple(owned)
                ),
            ),
        )

    async def join(self) -> None:
        await self.heartbeat(0, (TOPIC,))

    async def leave(self) -> None:
        await self.heartbeat(-1)


async def test_consumer_heartbeat_answers_leaving_and_fenced_members_as_kafka_does(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    member = NewMember(broker)
    await member.join()
    again = await member.heartbeat()
    assert again.assignment is None  # unchanged: Kafka does not send it again
    fenced = await member.send(member.epoch + 5)
    # Kafka 4.1.1's error answer is the response's defaults but for the error.
    assert (
        fenced.error_code,
        fenced.member_epoch,
        fenced.heartbeat_interval,
        fenced.assignment,
    ) == (ErrorCode.fenced_member_epoch, 0, datetime.timedelta(0), None)
    left = await member.heartbeat(-1)
    assert (left.member_epoch, left.heartbeat_interval, left.assignment) == (
        -1,
        datetime.timedelta(0),
        None,
    )


async def test_a_commit_at_an_older_epoch_is_taken_for_partitions_owned_since(
    broker: Broker,
) -> None:
    """KIP-1251, as Kafka 4.4.0 answered the same commits: a commit the heartbeat moving its
    member on has crossed carries the member's previous epoch, and is taken for a partition
    the member has owned since that epoch, refused (STALE_MEMBER_EPOCH) for one it gave up;
    an epoch older than the partition's, or newer than the member's, is refused; at its own
    epoch any partition is taken; an unknown member is UNKNOWN_MEMBER_ID. A TxnOffsetCommit
    before v6 refuses with ILLEGAL_GENERATION."""
    first, second = sorted((NewMember(broker), NewMember(broker)), key=lambda m: m.member_id)
    await first.join()
    await first.heartbeat(owned=range(PARTITIONS))
    previous = first.epoch
    await second.join()
    revoking = await first.heartbeat(owned=range(PARTITIONS))
    kept = [p for t in revoking.assignment.topic_partitions for p in t.partitions]
    assert 0 < len(kept) < PARTITIONS, revoking
    given_up = next(p for p in range(PARTITIONS) if p not in kept)
    await first.heartbeat(owned=kept)
    assert first.epoch > previous

    async def commit_as(member_id: str, epoch: int, partition: int = kept[0]) -> ErrorCode:
        [error] = await commit(
            broker, "new", {partition: 5}, generation=epoch, member=member_id, version=9
        )
        return error

    assert await commit_as(first.member_id, previous) is ErrorCode.none
    assert await commit_as(first.member_id, previous, given_up) is ErrorCode.stale_member_epoch
    answers = {
        epoch: await commit_as(first.member_id, epoch)
        for epoch in (previous - 1, first.epoch + 1, -1)
    }
    assert answers == dict.fromkeys(answers, ErrorCode.stale_member_epoch)
    assert await commit_as("nobody", first.epoch) is ErrorCode.unknown_member_id
    assert await commit_as(first.member_id, first.epoch, given_up) is ErrorCode.none
    producer = await begin_offsets_transaction(broker, "new")
    newer = await txn_commit(broker, producer, "new", {kept[0]: 6}, first.member_id, previous + 9)
    assert newer == [ErrorCode.illegal_generation]
    crossed = await txn_commit(broker, producer, "new", {kept[0]: 6}, first.member_id, previous)
    assert crossed == [ErrorCode.none]


async def fetch_as(broker: Broker, group: str, member_id: str | None, epoch: int) -> ErrorCode:
    t = types(OFFSET_FETCH, 9)
    response = await acall(
        broker,
        OFFSET_FETCH,
        9,
        require_stable=True,
        groups=(
            t.OffsetFetchRequestGroup(
                group_id=group, member_id=member_id, member_epoch=epoch, topics=None
            ),
        ),
    )
    return response.groups[0].error_code


async def begin_offsets_transaction(broker: Broker, group: str) -> tuple[int, int]:
    """A transactional producer's id and epoch, its transaction holding `group`'s offsets."""
    producer = await acall(
        broker,
        INIT_PRODUCER_ID,
        4,
        transactional_id="etl",
        transaction_timeout=ms(60_000),
        producer_id=-1,
        producer_epoch=-1,
    )
    added = await acall(
        broker,
        ADD_OFFSETS_TO_TXN,
        3,
        transactional_id="etl",
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        group_id=group,
    )
    assert added.error_code is ErrorCode.none
    return producer.producer_id, producer.producer_epoch


async def txn_commit(
    broker: Broker,
    producer: tuple[int, int],
    group: str,
    offsets: dict[int, int],
    member_id: str,
    generation: int,
) -> list[ErrorCode]:
    t = types(TXN_OFFSET_COMMIT, 3)
    response = await acall(
        broker,
        TXN_OFFSET_COMMIT,
        3,
        transactional_id="etl",
        group_id=group,
        producer_id=producer[0],
        producer_epoch=producer[1],
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        topics=(
            t.TxnOffsetCommitRequestTopic(
                name=TOPIC,
                partitions=tuple(
                    t.TxnOffsetCommitRequestPartition(
                        partition_index=partition,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                    for partition, offset in offsets.items()
                ),
            ),
        ),
    )
    return [p.error_code for topic in response.topics for p in topic.partitions]


async def end_transaction(broker: Broker, producer: tuple[int, int]) -> None:
    ended = await acall(
        broker,
        END_TXN,
        3,
        transactional_id="etl",
        producer_id=producer[0],
        producer_epoch=producer[1],
        committed=True,
    )
    assert ended.error_code is ErrorCode.none


async def test_a_committed_transaction_commits_its_offsets_to_a_group_of_the_new_protocol(
    broker: Broker,
) -> None:
    """Exactly-once pipelines with KIP-848 groups: the offsets a member sends with its
    transaction are the group's once the transaction commits (they were dropped, and the
    pipeline read its input again)."""
    member = NewMember(broker)
    await member.join()
    producer = await begin_offsets_transaction(broker, "new")
    taken = await txn_commit(
        broker, producer, "new", {0: 10, 1: 11}, member.member_id, member.epoch
    )
    assert taken == [ErrorCode.none, ErrorCode.none]
    # One naming no member is taken too (clients before TxnOffsetCommit v3 cannot).
    assert await txn_commit(broker, producer, "new", {2: 12}, "", -1) == [ErrorCode.none]
    assert (await fetch(broker, "new", [0, 1, 2]))[(TOPIC, 0)].committed_offset == -1
    await end_transaction(broker, producer)
    offsets = await fetch(broker, "new", [0, 1, 2])
    assert [offsets[(TOPIC, p)].committed_offset for p in range(3)] == [10, 11, 12]


async def test_a_transaction_checks_a_new_protocol_member_and_its_epoch(broker: Broker) -> None:
    member = NewMember(broker)
    await member.join()
    producer = await begin_offsets_transaction(broker, "new")
    refused = {
        "a stale epoch": await txn_commit(broker, producer, "new", {1: 7}, member.member_id, 9),
        "an unknown member": await txn_commit(broker, producer, "new", {1: 7}, "x", member.epoch),
    }
    assert refused == {
        "a stale epoch": [ErrorCode.illegal_generation],
        "an unknown member": [ErrorCode.unknown_member_id],
    }
    await end_transaction(broker, producer)
    assert (await fetch(broker, "new", [1]))[(TOPIC, 1)].committed_offset == -1


async def test_a_transaction_checks_a_classic_member_and_its_generation(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    consumer = Consumer(broker)
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(consumer)
    producer = await begin_offsets_transaction(broker, "group")
    member, generation = consumer.member_id, consumer.generation
    answers = [
        await txn_commit(broker, producer, "group", {0: 7}, member, generation + 5),
        await txn_commit(broker, producer, "group", {0: 7}, member, -1),
        await txn_commit(broker, producer, "group", {0: 7}, "nobody", generation),
        await txn_commit(broker, producer, "group", {0: 7}, "", generation),
        await txn_commit(broker, producer, "group", {0: 8}, "", -1),
        await txn_commit(broker, producer, "group", {1: 9}, member, generation),
    ]
    assert answers == [
        [ErrorCode.illegal_generation],
        [ErrorCode.illegal_generation],
        [ErrorCode.unknown_member_id],
        [ErrorCode.unknown_member_id],
        [ErrorCode.none],
        [ErrorCode.none],
    ]
    # A group that does not exist: only a commit without a generation makes it.
    await acall(
        broker,
        ADD_OFFSETS_TO_TXN,
        3,
        transactional_id="etl",
        producer_id=producer[0],
        producer_epoch=producer[1],
        group_id="simple",
    )
    assert await txn_commit(broker, producer, "simple", {0: 1}, "m", 3) == [
        ErrorCode.illegal_generation
    ]
    assert await txn_commit(broker, producer, "simple", {0: 2}, "", -1) == [ErrorCode.none]
    await end_transaction(broker, producer)
    offsets = await fetch(broker, "group", [0, 1])
    assert [offsets[(TOPIC, p)].committed_offset for p in range(2)] == [8, 9]
    assert (await fetch(broker, "simple", [0]))[(TOPIC, 0)].committed_offset == 2


async def test_offset_commit_and_fetch_check_a_new_protocol_members_epoch(broker: Broker) -> None:
    member = NewMember(broker)
    await member.join()
    old = await commit(broker, "new", {0: 1}, generation=member.epoch, member=member.member_id)
    assert old == [ErrorCode.unsupported_version]  # v8: members of this protocol need v9
    assert await commit(
        broker, "new", {0: 2}, generation=member.epoch, member=member.member_id, version=9
    ) == [ErrorCode.none]
    assert await fetch_as(broker, "new", member.member_id, member.epoch) is ErrorCode.none
    assert await fetch_as(broker, "new", None, -1) is ErrorCode.none
    stale = await fetch_as(broker, "new", member.member_id, member.epoch + 5)
    assert stale is ErrorCode.stale_member_epoch
    assert await fetch_as(broker, "new", "nobody", member.epoch) is ErrorCode.unknown_member_id


async def test_delete_groups_and_offset_delete_know_groups_of_the_new_protocol(
    broker: Broker,
) -> None:
    member = NewMember(broker)
    await member.join()
    await acall(
        broker,
        METADATA,
        12,
        topics=(types(METADATA, 12).MetadataRequestTopic(topic_id=None, name="other"),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    for topic in (TOPIC, "other"):
        await commit(
            broker, "new", {0: 5}, generation=member.epoch, member=member.member_id, version=9,
            topic=topic,
        )  # fmt: skip

    async def delete_group() -> ErrorCode:
        response = await acall(broker, DELETE_GROUPS, 2, groups_names=("new",))
        return response.results[0].error_code

    async def delete_new_offsets(*topics: str) -> tuple[ErrorCode, dict[str, ErrorCode]]:
        response = await delete_offsets(broker, "new", topics)
        return response.error_code, {
            topic.name: topic.partitions[0].error_code for topic in response.topics
        }

    assert await delete_group() is ErrorCode.non_empty_group
    assert await delete_new_offsets(TOPIC, "other") == (
        ErrorCode.none,
        {TOPIC: ErrorCode.group_subscribed_to_topic, "other": ErrorCode.none},
    )
    assert broker.groups.committed("new") == {TOPIC: broker.groups.committed("new")[TOPIC]}
    await member.leave()
    assert await delete_new_offsets(TOPIC) == (ErrorCode.none, {TOPIC: ErrorCode.none})
    assert broker.groups.committed("new") == {}
    await commit(broker, "new", {1: 6}, version=9)  # an admin's commit to the empty group
    assert await delete_group() is ErrorCode.none
    # Gone, offsets and all: as if it had never been.
    assert (await fetch(broker, "new", [1]))[(TOPIC, 1)].committed_offset == -1
    described = await acall(
        broker, CONSUMER_GROUP_DESCRIBE, 0, group_ids=("new",), include_authorized_operations=False
    )
    assert described.groups[0].error_code is ErrorCode.group_id_not_found
    listed = await acall(broker, LIST_GROUPS, 5, states_filter=(), types_filter=())
    assert listed.groups == ()
    assert await delete_group() is ErrorCode.group_id_not_found
    assert (await delete_new_offsets(TOPIC))[0] is ErrorCode.group_id_not_found


async def test_each_describe_api_says_which_kind_of_group_it_found(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    await NewMember(broker).join()
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(Consumer(broker))
    classic = await describe(broker, "new", version=6)
    assert (classic.error_code, classic.error_message, classic.group_state) == (
        ErrorCode.group_id_not_found,
        "Group new is not a classic group.",
        "Dead",
    )
    response = await acall(
        broker,
        CONSUMER_GROUP_DESCRIBE,
        0,
        group_ids=("group", "nobody"),
        include_authorized_operations=False,
    )
    assert [(g.error_code, g.error_message, g.group_state) for g in response.groups] == [
        (ErrorCode.group_id_not_found, "Group group is not a consumer group.", ""),
        (ErrorCode.group_id_not_found, "Group nobody not found.", ""),
    ]
    # As Kafka 4.1.1 answered: a group's operations (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS,
    # ALTER_CONFIGS: 3400) for a group found only; a group ConsumerGroupDescribe refuses has
    # the response's defaults; a member without a regex has "", and is a consumer member (1).
    assert classic.authorized_operations == -(2**31)
    found_classic = await describe(broker, "group", version=6)
    assert (found_classic.error_code, found_classic.authorized_operations) == (
        ErrorCode.none,
        3400,
    )
    response = await acall(
        broker,
        CONSUMER_GROUP_DESCRIBE,
        1,
        group_ids=("new", "group"),
        include_authorized_operations=True,
    )
    found, other = response.groups
    assert (found.error_code, found.authorized_operations) == (ErrorCode.none, 3400)
    assert [(m.subscribed_topic_regex, m.member_type) for m in found.members] == [("", 1)]
    assert (
        other.group_state,
        other.group_epoch,
        other.assignment_epoch,
        other.assignor_name,
        other.authorized_operations,
    ) == ("", 0, 0, "", -(2**31))


# Every served version


@pytest.mark.parametrize("version", versions(JOIN_GROUP))
async def test_every_join_sync_heartbeat_and_leave_version_is_answered(
    broker: Broker, autojump_clock: trio.abc.Clock, version: int
) -> None:
    consumer = Consumer(broker)
    with trio.fail_after(PATIENCE_SECONDS):
        joined = await consumer.join(version=version)
    assert joined.error_code is ErrorCode.none and joined.generation_id == 1
    sync_version = min(version, max(versions(SYNC_GROUP)))
    synced = await consumer.sync({consumer.member_id: b"a"}, version=sync_version)
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"a")
    assert (
        await consumer.heartbeat(version=min(version, max(versions(HEARTBEAT)))) is ErrorCode.none
    )
    leave_version = min(version, max(versions(LEAVE_GROUP)))
    if leave_version < 3:
        left = await acall(
            broker, LEAVE_GROUP, leave_version, group_id="group", member_id=consumer.member_id
        )
    else:
        t = types(LEAVE_GROUP, leave_version)
        left = await acall(
            broker,
            LEAVE_GROUP,
            leave_version,
            group_id="group",
            members=(
                make(
                    t.MemberIdentity,
                    member_id=consumer.member_id,
                    group_instance_id=None,
                    reason=None,
                ),
            ),
        )
    assert left.error_code is ErrorCode.none


@pytest.mark.parametrize("version", by_topic_name(OFFSET_COMMIT))
async def test_every_offset_commit_version_is_answered(broker: Broker, version: int) -> None:
    assert await commit(broker, "g", {1: 7}, version=version) == [ErrorCode.none]
    assert (await fetch(broker, "g", [1]))[(TOPIC, 1)].committed_offset == 7


@pytest.mark.parametrize("version", by_topic_name(OFFSET_FETCH))
async def test_every_offset_fetch_version_is_answered(broker: Broker, version: int) -> None:
    await commit(broker, "g", {2: 8})
    assert (await fetch(broker, "g", [2], version=version))[(TOPIC, 2)].committed_offset == 8


@pytest.mark.parametrize("version", versions(DESCRIBE_GROUPS))
async def test_every_describe_groups_version_is_answered(
    broker: Broker, autojump_clock: trio.abc.Clock, version: int
) -> None:
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(Consumer(broker))
    described = await describe(broker, "group", version=version)
    assert (described.error_code, described.group_state, len(described.members)) == (
        ErrorCode.none,
        "Stable",
        1,
    )


@pytest.mark.parametrize("version", versions(LIST_GROUPS))
async def test_every_list_groups_version_is_answered(broker: Broker, version: int) -> None:
    await commit(broker, "g", {0: 1})
    response = await acall(broker, LIST_GROUPS, version, states_filter=(), types_filter=())
    assert [g.group_id for g in response.groups] == ["g"]


@pytest.mark.parametrize("version", versions(DELETE_GROUPS))
async def test_every_delete_groups_version_is_answered(broker: Broker, version: int) -> None:
    await commit(broker, "g", {0: 1})
    response = await acall(broker, DELETE_GROUPS, version, groups_names=("g",))
    assert [r.error_code for r in response.results] == [ErrorCode.none]


@pytest.mark.parametrize("version", versions(OFFSET_DELETE))
async def test_every_offset_delete_version_is_answered(broker: Broker, version: int) -> None:
    await commit(broker, "g", {0: 1})
    t = types(OFFSET_DELETE, version)
    response = await acall(
        broker,
        OFFSET_DELETE,
        version,
        group_id="g",
        topics=(
            t.OffsetDeleteRequestTopic(
                name=TOPIC, partitions=(t.OffsetDeleteRequestPartition(partition_index=0),)
            ),
        ),
    )
    assert response.error_code is ErrorCode.none
    assert (await fetch(broker, "g", [0]))[(TOPIC, 0)].committed_offset == -1


# The coordinator's life and accounts


async def test_a_stopping_coordinator_answers_parked_joins_with_not_coordinator(
    autojump_clock: trio.abc.Clock,
) -> None:
    b = Broker(Config())
    answers: list[Any] = []

    async def join() -> None:
        answers.append(await Consumer(b).join())

    with trio.fail_after(PATIENCE_SECONDS):
        async with trio.open_nursery() as clients, trio.open_nursery() as coordinator:
            await coordinator.start(b.groups.run)
            clients.start_soon(join)
            # The initial rebalance delay keeps the join parked; stopping ends the wait.
            await trio.sleep(1)
            assert not answers
            coordinator.cancel_scope.cancel()
    assert answers[0].error_code is ErrorCode.not_coordinator
    refused = await Consumer(b).join()
    assert refused.error_code is ErrorCode.coordinator_not_available


async def test_the_initial_rebalance_delay_waits_for_more_members_within_the_rebalance_timeout(
    autojump_clock: trio.abc.Clock,
) -> None:
    stats = BrokerStats()
    coordinator = GroupCoordinator(stats, initial_rebalance_delay_ms=3000)
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        started = trio.current_time()
        replies = []
        for _ in range(3):
            replies.append(
                coordinator.join(
                    "g",
                    "",
                    None,
                    "consumer",
                    [("range", subscription(TOPIC))],
                    SESSION_MS,
                    REBALANCE_MS,
                    "c",
                    "/127.0.0.1",
                    require_known_member_id=False,
                    supports_skip_assignment=True,
                )
            )
            # Each new member within the delay extends it by another delay.
            await trio.sleep(2)
        with trio.fail_after(PATIENCE_SECONDS):
            results = [await reply.wait() for reply in replies]
        waited = trio.current_time() - started
        nursery.cancel_scope.cancel()
    assert {result.generation_id for result in results} == {1}
    # Joins at 0, 2 and 4 s: the 3 s delay ends at 3 s (a member came: wait again), at 6 s
    # (another came: again) and at 9 s (none came: complete).
    assert waited == pytest.approx(9)


async def test_groups_by_state_and_rebalances_are_in_metrics_and_summary(
    broker: Broker, autojump_clock: trio.abc.Clock
) -> None:
    with trio.fail_after(PATIENCE_SECONDS):
        await stable(Consumer(broker, group="a"), Consumer(broker, group="a"))
        await Consumer(broker, group="b").join()
    await commit(broker, "c", {0: 1})
    groups = summary(broker.current_accounts())["groups"]
    assert groups["by_state"] == {
        "CompletingRebalance": 1,
        "Empty": 1,
        "PreparingRebalance": 0,
        "Stable": 1,
    }
    assert groups["rebalances"] == 2
    by_group = groups["by_group"]
    assert {name: (group["state"], len(group["members"])) for name, group in by_group.items()} == {
        "a": ("Stable", 2),
        "b": ("CompletingRebalance", 1),
        "c": ("Empty", 0),
    }
    # Committed past the log end (Kafka takes it): a negative lag, as kafka-consumer-groups
    # shows it (CURRENT-OFFSET 5, LOG-END-OFFSET 0, LAG -5 from Kafka 4.1.1).
    assert by_group["c"]["partitions"] == {
        "orders": {"0": {"committed": 1, "log_end": 0, "lag": -1}}
    }
    assert by_group["c"]["lag"] == by_group["a"]["lag"] - 1 == -1
    text = exposition(make_registry(broker.stats)).decode()
    assert 'nullbroker_groups{state="Stable"} 1.0' in text
    assert 'nullbroker_groups{state="PreparingRebalance"} 0.0' in text
    assert "nullbroker_rebalances_total 2.0" in text


def test_the_initial_rebalance_delay_is_a_setting_that_must_not_be_negative() -> None:
    assert Config().group_initial_rebalance_delay_ms == 3000
    assert (
        load({"group_initial_rebalance_delay_ms": 0}, environ={}).group_initial_rebalance_delay_ms
        == 0
    )
    with pytest.raises(ConfigError, match=r"^--group-initial-rebalance-delay-ms: "):
        checked(Config(group_initial_rebalance_delay_ms=-1))


def test_every_live_group_state_is_in_the_accounts_at_zero_before_any_group_request() -> None:
    broker = Broker(Config())
    assert "groups" not in broker.__dict__  # the group code is loaded by the first request
    assert set(GROUP_STATES) == {state.value for state in GroupState} - {GroupState.DEAD}
    assert broker.stats.groups == dict.fromkeys(GROUP_STATES, 0)
    assert all(
        f'nullbroker_groups{{state="{state}"}} 0.0'
        in exposition(make_registry(broker.stats)).decode()
        for state in GROUP_STATES
    )


def test_the_assignment_waits_its_interval_as_kafka_4_4_makes_it() -> None:
    """As Kafka 4.4.0 answered the same heartbeats: a new group's first member moves its
    epoch to 2 and gets every partition; a second member joining within the assignment
    interval is told the assignment in force (nothing, at its epoch) while the group's epoch
    moves on; after the interval the next heartbeat makes the assignment again."""
    now = [100.0]
    groups = ConsumerGroups(
        lambda topic: 2, clock=lambda: now[0], assignment_interval_ms=lambda group_id: 1000
    )

    def beat(member: str, epoch: int, owned: Iterable[int] = ()) -> tuple[int, list[int] | None]:
        joined, assignment = groups.heartbeat(
            ConsumerHeartbeat(
                "g", member, epoch, None, 30000, ("t",), "uniform",
                {"t": frozenset(owned)} if owned else {}, "client", "/127.0.0.1",
            )
        )  # fmt: skip
        return joined.epoch, None if assignment is None else sorted(assignment.get("t", ()))

    assert beat("a", 0) == (2, [0, 1])
    assert beat("b", 0) == (2, [])
    group = groups.groups["g"]
    assert (group.epoch, group.assignment_epoch, group.state) == (3, 2, "Assigning")
    now[0] += 0.5
    assert beat("a", 2, [0, 1]) == (2, [0, 1])  # within the interval: as it was
    now[0] += 0.6
    epoch, kept = beat("a", 2, [0, 1])
    assert (epoch, group.assignment_epoch) == (2, 3) and kept is not None and len(kept) == 1
    assert beat("a", 2, kept) == (3, kept)
    assert beat("b", 2) == (3, [1 - kept[0]])
