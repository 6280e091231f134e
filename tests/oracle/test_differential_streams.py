"""Streams groups' APIs (KIP-1071), at every version both brokers serve, asked of Kafka 4.4.0
(`kafka`) and of nullbroker alike (tests/support/differential.py), error paths included: the
answers must be equal but for data. Each sequence returns the KNOWN differences it meets.

A member id and process id are the client's: the same on both sides. Each group's initial
rebalance delay is set to 0 on both brokers (the group config
streams.initial.rebalance.delay.ms), so that a sequence need not wait three seconds for its
first assignment; Kafka's internal topics are created by its controller a moment after the
heartbeat that asks for them, so the heartbeats that wait for them repeat until they are
assigned (`until`) on both sides."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.differential import (
    Listed,
    Pair,
    Side,
    create_topic,
    find_coordinator,
    for_each_version,
    pair,
    request,
    uncompared_versions,
    unique,
    until_assignable,
)

pytestmark = pytest.mark.differential
__all__ = ["pair"]

Sequence_ = Callable[[Pair], Awaitable[tuple[str, ...]]]
STREAMS_SWEEP: dict[int, Sequence_] = {}
GROUP_RESOURCE = 32
REBALANCE_TIMEOUT = datetime.timedelta(minutes=5)
NOT_GIVEN = datetime.timedelta(milliseconds=-1)


def sweep(api_key: int) -> Callable[[Sequence_], Sequence_]:
    def register(run: Sequence_) -> Sequence_:
        STREAMS_SWEEP[api_key] = run
        return run

    return register


def word_count(app: str, source: str) -> dict[str, Any]:
    """Kafka's WordCount topology as Kafka Streams 4.4 sends it: split lines (subtopology 0),
    repartition by word, count into a store with a changelog (1)."""
    repartition = f"{app}-counts-repartition"
    return {
        "epoch": 0,
        "subtopologies": [
            {
                "subtopology_id": "0",
                "source_topics": [source],
                "source_topic_regex": [],
                "state_changelog_topics": [],
                "repartition_sink_topics": [repartition],
                "repartition_source_topics": [],
                "copartition_groups": [],
            },
            {
                "subtopology_id": "1",
                "source_topics": [],
                "source_topic_regex": [],
                "state_changelog_topics": [
                    {
                        "name": f"{app}-counts-changelog",
                        "partitions": 0,
                        "replication_factor": 0,
                        "topic_configs": [{"key": "cleanup.policy", "value": "compact"}],
                    }
                ],
                "repartition_sink_topics": [],
                "repartition_source_topics": [
                    {
                        "name": repartition,
                        "partitions": 0,
                        "replication_factor": 0,
                        "topic_configs": [
                            {"key": "cleanup.policy", "value": "delete"},
                            {"key": "segment.bytes", "value": "52428800"},
                            {"key": "retention.ms", "value": "-1"},
                        ],
                    }
                ],
                "copartition_groups": [],
            },
        ],
    }


def heartbeat(
    version: int,
    group: str,
    member: str,
    epoch: int,
    *,
    topology: dict[str, Any] | None = None,
    tasks: list[dict[str, Any]] | None = None,
    process: str | None = None,
    rebalance_timeout: datetime.timedelta | None = None,
    **fields: Any,
) -> Any:
    """A StreamsGroupHeartbeat. A join (epoch 0) sends its topology, process and empty
    task lists; `tasks` are the active tasks a member says it runs (with empty standby and
    warm-up lists), None to say nothing."""
    joining = epoch == 0
    spec: dict[str, Any] = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "endpoint_information_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": rebalance_timeout
        if rebalance_timeout is not None
        else (REBALANCE_TIMEOUT if joining else NOT_GIVEN),
        "topology": topology,
        "active_tasks": [] if joining else tasks,
        "standby_tasks": [] if joining or tasks is not None else None,
        "warmup_tasks": [] if joining or tasks is not None else None,
        "process_id": process,
        "user_endpoint": None,
        "client_tags": [] if joining else None,
        "task_offsets": None,
        "task_end_offsets": None,
        "shutdown_application": False,
    }
    spec.update(fields)
    return request(88, version, **spec)


def active(answer: Any) -> list[dict[str, Any]]:
    """The active tasks an answer gives, as a heartbeat says them back."""
    return [
        {"subtopology_id": task.subtopology_id, "partitions": list(task.partitions)}
        for task in answer.active_tasks or ()
    ]


async def no_initial_delay(pair: Pair, group: str) -> None:
    """Both brokers assign the group's tasks at once (not compared)."""
    configs = [
        {"name": "streams.initial.rebalance.delay.ms", "config_operation": 0, "value": "0"},
        {"name": "streams.assignment.interval.ms", "config_operation": 0, "value": "0"},
    ]
    answers = await pair.step(
        request(
            44,
            1,
            resources=[
                {"resource_type": GROUP_RESOURCE, "resource_name": group, "configs": configs}
            ],
            validate_only=False,
        ),
        compared=False,
    )
    for side in pair.sides:
        assert answers[side].responses[0].error_code == 0, answers[side]


def has_tasks(answer: Any) -> bool:
    return answer.error_code == 0 and bool(answer.active_tasks)


async def joined(pair: Pair, version: int, group: str, source: str, member: str) -> None:
    """The first member joins (compared) and heartbeats until it runs every task; its
    epoch and tasks on each side are kept in side.learned["epoch"/"tasks", member]."""
    process = str(uuid.uuid4())
    await no_initial_delay(pair, group)
    await find_coordinator(pair, group)
    answers = await pair.step(
        heartbeat(version, group, member, 0, topology=word_count(group, source), process=process)
    )
    for side in pair.sides:
        side.learned["epoch", member] = answers[side].member_epoch
    answers = await pair.step(
        lambda side: heartbeat(version, group, member, side.learned["epoch", member], tasks=[]),
        until=has_tasks,
    )
    for side in pair.sides:
        side.learned["epoch", member] = answers[side].member_epoch
        side.learned["tasks", member] = active(answers[side])


def at_epoch(version: int, group: str, member: str, **fields: Any) -> Callable[[Side], Any]:
    """A heartbeat at the member's epoch on each side, saying the tasks it was last told."""
    return lambda side: heartbeat(
        version,
        group,
        member,
        side.learned["epoch", member],
        tasks=side.learned["tasks", member],
        **fields,
    )


def learn(pair: Pair, member: str, answers: Any) -> None:
    for side in pair.sides:
        side.learned["epoch", member] = answers[side].member_epoch
        if answers[side].active_tasks is not None:
            side.learned["tasks", member] = active(answers[side])


@sweep(88)
async def streams_group_heartbeat(pair: Pair) -> tuple[str, ...]:
    source = unique("sgh-words")
    await create_topic(pair, source, partitions=2, compared=False)
    await until_assignable(pair, source, 2)  # Kafka's coordinator has seen the topic

    async def run(version: int) -> None:
        group, first, second = unique(f"sgh-v{version}"), str(uuid.uuid4()), str(uuid.uuid4())
        topology = word_count(group, source)
        # Refused before the group is looked at, in Kafka's order.
        await pair.step(heartbeat(version, group, "", 0, topology=topology, process="p"))
        await pair.step(
            heartbeat(version, group, first, 0, topology=topology, process="p",
                      rebalance_timeout=NOT_GIVEN)
        )  # fmt: skip
        join = heartbeat(version, group, first, 0, topology=None, process="p")
        await pair.step(join)
        await pair.step(heartbeat(version, group, first, -3))
        await pair.step(heartbeat(version, group, first, 3, tasks=None, active_tasks=[]))
        await pair.step(heartbeat(version, group, first, 3, topology=topology, tasks=[]))
        internal = word_count(group, "__consumer_offsets")
        await pair.step(heartbeat(version, group, first, 0, topology=internal, process="p"))
        regex = word_count(group, source)
        regex["subtopologies"][0]["source_topic_regex"] = ["sgh-.*"]
        await pair.step(heartbeat(version, group, first, 0, topology=regex, process="p"))
        await pair.step(heartbeat(version, group, first, 5, tasks=[]))  # no such group
        await pair.step(heartbeat(version, group, first, -1))  # leaving no such group
        # Two members: the second's tasks move only once the first has given them up.
        await joined(pair, version, group, source, first)
        learn(pair, second, await pair.step(
            heartbeat(version, group, second, 0, topology=topology, process="other")
        ))  # fmt: skip
        learn(pair, first, await pair.step(at_epoch(version, group, first)))
        learn(pair, first, await pair.step(at_epoch(version, group, first)))
        learn(pair, second, await pair.step(at_epoch(version, group, second)))
        await pair.step(heartbeat(version, group, first, 99, tasks=[]))  # fenced
        await pair.step(heartbeat(version, group, str(uuid.uuid4()), 1, tasks=[]))  # unknown
        changed = word_count(group, source)
        changed["epoch"] = 1
        await pair.step(heartbeat(version, group, str(uuid.uuid4()), 0, topology=changed,
                                  process="third"))  # fmt: skip
        await pair.step(lambda side: heartbeat(version, group, second, -1))
        await pair.step(lambda side: heartbeat(version, group, first, -1))

    await for_each_version(pair, 88, run)
    return ()


@sweep(89)
async def streams_group_describe(pair: Pair) -> tuple[str, ...]:
    source = unique("sgd-words")
    await create_topic(pair, source, partitions=2, compared=False)
    await until_assignable(pair, source, 2)
    group, member = unique("sgd"), str(uuid.uuid4())
    version = pair.versions(88)[-1]
    await joined(pair, version, group, source, member)
    learn(pair, member, await pair.step(at_epoch(version, group, member)))

    async def run(version: int) -> None:
        for include in (False, True):
            await pair.step(
                request(
                    89,
                    version,
                    group_ids=[group, unique("sgd-none"), ""],
                    include_authorized_operations=include,
                    include_topology_description=include,
                )
            )

    await for_each_version(pair, 89, run)
    await pair.step(heartbeat(version, group, member, -1))
    await pair.step(
        request(89, pair.versions(89)[-1], group_ids=[group], include_authorized_operations=False)
    )
    return ()


@sweep(93)
async def streams_group_topology_description_update(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        await pair.step(
            request(
                93,
                version,
                group_id=unique("sgtdu"),
                member_id=str(uuid.uuid4()),
                topology_epoch=0,
                topology_description={"subtopologies": [], "global_stores": []},
            )
        )

    await for_each_version(pair, 93, run)
    return ()


@pytest.mark.parametrize("api_key", sorted(STREAMS_SWEEP))
async def test_every_version_answers_as_kafka_4_4_does(pair: Pair, api_key: int) -> None:
    known = await STREAMS_SWEEP[api_key](pair)
    pair.check(*known)
    uncompared = uncompared_versions(pair.compared, api_key, pair.advertised(api_key))
    assert not uncompared, f"versions both advertise the sweep never compared: {uncompared}"


def offset_commit(group: str, member: str, epoch: int | None, topic: str, version: int) -> Any:
    """An OffsetCommit of partition 0 of `topic`, at the member's epoch on each side (None)
    or at `epoch`."""
    return lambda side: request(
        8,
        version,
        group_id=group,
        generation_id_or_member_epoch=side.learned["epoch", member] if epoch is None else epoch,
        member_id=member,
        group_instance_id=None,
        retention_time=datetime.timedelta(milliseconds=-1),
        topics=[
            {
                "name": topic,
                "topic_id": side.learned.get(("topic_id", topic), uuid.UUID(int=0)),
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 3,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    )


async def test_the_group_apis_know_a_streams_group(pair: Pair) -> None:
    """ListGroups, DescribeGroups, the offsets' APIs, DeleteGroups and the other protocols'
    heartbeats on a streams group, as Kafka 4.4.0 answers them."""
    source = unique("sgo-words")
    await create_topic(pair, source, partitions=2, compared=False)
    await until_assignable(pair, source, 2)
    group, member = unique("sgo"), str(uuid.uuid4())
    version = pair.versions(88)[-1]
    await joined(pair, version, group, source, member)
    learn(pair, member, await pair.step(at_epoch(version, group, member)))
    listed = Listed.of("groups", "group_id", [group], [group])
    for states, types in (([], ["streams"]), (["stable"], []), (["not_ready"], ["streams"])):
        await pair.step(
            request(16, 5, states_filter=states, types_filter=types),
            only=listed
            if "not_ready" not in states
            else Listed.of("groups", "group_id", [group], []),
        )
    for describe_version in (5, 6):
        await pair.step(
            request(15, describe_version, groups=[group], include_authorized_operations=False)
        )
    commit = pair.versions(8)[-1]
    await pair.step(offset_commit(group, member, None, source, commit))  # at its epoch
    await pair.step(offset_commit(group, member, 99, source, commit))  # STALE_MEMBER_EPOCH
    await pair.step(offset_commit(group, member, None, source, 8))  # below v9: refused
    fetch = pair.versions(9)[-1]
    for epoch in (None, 99):
        await pair.step(
            lambda side, epoch=epoch: request(
                9,
                fetch,
                groups=[
                    {
                        "group_id": group,
                        "member_id": member,
                        "member_epoch": side.learned["epoch", member] if epoch is None else epoch,
                        "topics": None,
                    }
                ],
                require_stable=False,
            )
        )
    await pair.step(
        request(
            47, 0, group_id=group, topics=[{"name": source, "partitions": [{"partition_index": 0}]}]
        )
    )  # the group reads it: GROUP_SUBSCRIBED_TO_TOPIC
    await pair.step(request(42, pair.versions(42)[-1], groups_names=[group]))  # NON_EMPTY_GROUP
    await pair.step(
        request(
            68,
            pair.versions(68)[-1],
            group_id=group,
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout=REBALANCE_TIMEOUT,
            subscribed_topic_names=[source],
            topic_partitions=[],
        )
    )  # not a consumer group
    await pair.step(heartbeat(version, group, member, -1))
    await pair.step(request(42, pair.versions(42)[-1], groups_names=[group]))
    await pair.step(request(89, pair.versions(89)[-1], group_ids=[group],
                            include_authorized_operations=False))  # fmt: skip
    pair.check()
