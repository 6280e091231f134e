"""Streams groups (KIP-1071) without a network: the topology against the topics, the sticky
task assignor, and the heartbeat's reconciliation (an active task is never run twice)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kio.schema.errors import ErrorCode

from nullbroker.state.groups.consumer import HeartbeatError
from nullbroker.state.streams.assignor import AssignorMember, TaskAssignment, assign, flatten
from nullbroker.state.streams.groups import Heartbeat, StreamsGroups, StreamsSettings
from nullbroker.state.streams.topology import (
    Status,
    Subtopology,
    TopicInfo,
    Topology,
    configure,
)

APP = "wordcount"
REPARTITION = f"{APP}-counts-repartition"
CHANGELOG = f"{APP}-counts-changelog"


def word_count(words_partitions_fixed: int = 0) -> Topology:
    """Kafka's WordCount: split lines (0), repartition by word, count (1)."""
    return Topology(
        1,
        (
            Subtopology("0", source_topics=("lines",), repartition_sink_topics=(REPARTITION,)),
            Subtopology(
                "1",
                changelog_topics=(TopicInfo(CHANGELOG, configs=(("cleanup.policy", "compact"),)),),
                repartition_source_topics=(TopicInfo(REPARTITION, words_partitions_fixed),),
            ),
        ),
    )


def test_tasks_follow_the_widest_source_and_internal_topics_are_sized_from_them() -> None:
    configured = configure(word_count(), {"lines": 3}.get)
    assert configured.tasks == {"0": 3, "1": 3}
    assert {name: size for name, (size, _) in configured.to_create.items()} == {
        REPARTITION: 3,
        CHANGELOG: 3,
    }
    assert [status.code for status in configured.statuses] == [Status.MISSING_INTERNAL_TOPICS]
    ready = configure(word_count(), {"lines": 3, REPARTITION: 3, CHANGELOG: 3}.get)
    assert ready.ready and ready.tasks == {"0": 3, "1": 3}


def test_a_fixed_repartition_size_and_the_topology_s_problems() -> None:
    configured = configure(word_count(5), {"lines": 2}.get)
    assert configured.tasks == {"0": 2, "1": 5}
    assert configured.to_create[CHANGELOG][0] == 5
    missing = configure(word_count(), {}.get)
    assert [status.code for status in missing.statuses] == [Status.MISSING_SOURCE_TOPICS]
    assert "lines" in missing.statuses[0].detail
    wrong = configure(word_count(), {"lines": 3, REPARTITION: 2, CHANGELOG: 3}.get)
    assert [status.code for status in wrong.statuses] == [Status.INCORRECTLY_PARTITIONED_TOPICS]
    joined = Topology(
        1,
        (Subtopology("0", source_topics=("a", "b"), copartition_groups=(frozenset({"a", "b"}),)),),
    )
    assert [s.code for s in configure(joined, {"a": 2, "b": 3}.get).statuses] == [
        Status.INCORRECTLY_PARTITIONED_TOPICS
    ]


def member(member_id: str, process: str, active: dict[str, frozenset[int]] | None = None):
    return AssignorMember(member_id, process, active or {})


WORD_COUNT_TASKS = {"0": 2, "1": 2}
BOTH_STATEFUL = frozenset({"0", "1"})


def targets(assigned: dict[str, TaskAssignment]) -> dict[str, tuple[dict, dict]]:
    return {
        member_id: (
            {sub: sorted(parts) for sub, parts in sorted(target.active.items())},
            {sub: sorted(parts) for sub, parts in sorted(target.standby.items())},
        )
        for member_id, target in assigned.items()
    }


# What Kafka 4.4.0's StickyTaskAssignor gives (run on these inputs, research notes of
# 2026-11-29): its ties are broken by Java's HashMap and PriorityQueue orders, which decide
# for instance that of two fresh processes "p2" gets the first tasks.
KAFKA_VECTORS = [
    (WORD_COUNT_TASKS, BOTH_STATEFUL, 0, [member("m1", "p1"), member("m2", "p2")],
     {"m1": ({"0": [1], "1": [1]}, {}), "m2": ({"0": [0], "1": [0]}, {})}),
    (WORD_COUNT_TASKS, BOTH_STATEFUL, 0, [member("m1", "p1"), member("m2", "p1")],
     {"m1": ({"0": [0], "1": [0]}, {}), "m2": ({"0": [1], "1": [1]}, {})}),
    (WORD_COUNT_TASKS, BOTH_STATEFUL, 1,
     [member("m1", "p1", {"0": frozenset({0, 1}), "1": frozenset({0, 1})}), member("m2", "p2")],
     {"m1": ({"0": [0], "1": [0]}, {"0": [1], "1": [1]}),
      "m2": ({"0": [1], "1": [1]}, {"0": [0], "1": [0]})}),
    (WORD_COUNT_TASKS, BOTH_STATEFUL, 1, [member("m1", "p1"), member("m2", "p2")],
     {"m1": ({"0": [1], "1": [1]}, {"0": [0], "1": [0]}),
      "m2": ({"0": [0], "1": [0]}, {"0": [1], "1": [1]})}),
    ({"0": 3, "1": 2, "2": 1}, frozenset({"0", "2"}), 1,
     [member("a", "p1"), member("b", "p1"), member("c", "p2")],
     {"a": ({"0": [0], "1": [1]}, {"0": [1]}), "b": ({"0": [2], "2": [0]}, {}),
      "c": ({"0": [1], "1": [0]}, {"0": [0, 2], "2": [0]})}),
    ({"0": 3, "1": 2, "2": 1}, frozenset({"0", "2"}), 0,
     [member("a", "p1"), member("b", "p2"), member("c", "p3")],
     {"a": ({"0": [0], "2": [0]}, {}), "b": ({"0": [2], "1": [1]}, {}),
      "c": ({"0": [1], "1": [0]}, {})}),
    ({"0": 3}, frozenset(), 0, [member("m1", "p1"), member("m2", "p2")],
     {"m1": ({"0": [1]}, {}), "m2": ({"0": [0, 2]}, {})}),
    (WORD_COUNT_TASKS, BOTH_STATEFUL, 0,
     [member("5b0e1c0e-1f7a-4d8e-9c3a-0d2b7c1e9f01", "c3a7a4a0-6a5e-4a8e-b1f0-7e2d4c9b8a11"),
      member("0a9f8e7d-6c5b-4a39-8281-7f6e5d4c3b2a", "1d2c3b4a-5e6f-4a7b-8c9d-0e1f2a3b4c5d")],
     {"0a9f8e7d-6c5b-4a39-8281-7f6e5d4c3b2a": ({"0": [0], "1": [0]}, {}),
      "5b0e1c0e-1f7a-4d8e-9c3a-0d2b7c1e9f01": ({"0": [1], "1": [1]}, {})}),
]  # fmt: skip


@pytest.mark.parametrize(("tasks", "stateful", "standbys", "members", "expected"), KAFKA_VECTORS)
def test_the_assignor_gives_what_kafka_s_gives(
    tasks, stateful, standbys, members, expected
) -> None:  # type: ignore[no-untyped-def]
    assert targets(assign(members, tasks, standbys, stateful)) == expected


def test_the_assignor_balances_and_keeps_what_each_member_ran() -> None:
    first = assign([member("a", "p1"), member("b", "p2")], WORD_COUNT_TASKS)
    again = assign(
        [member("a", "p1", first["a"].active), member("b", "p2", first["b"].active),
         member("c", "p3")],
        WORD_COUNT_TASKS,
    )  # fmt: skip
    assert flatten(again["a"].active) <= flatten(first["a"].active)
    assert flatten(again["b"].active) <= flatten(first["b"].active)
    assert sorted(len(flatten(t.active)) for t in again.values()) == [1, 1, 2]
    every = set().union(*(flatten(t.active) for t in again.values()))
    assert every == {("0", 0), ("0", 1), ("1", 0), ("1", 1)}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def streams_groups(clock: Clock, topics: dict[str, int]) -> StreamsGroups:
    def create(name: str, partitions: int, info: TopicInfo) -> None:
        topics[name] = partitions

    settings = StreamsSettings(initial_rebalance_delay_ms=0, assignment_interval_ms=0)
    return StreamsGroups(topics.get, create, lambda group_id: settings, clock)


def joining(member_id: str, process: str) -> Heartbeat:
    return Heartbeat(
        group_id=APP, member_id=member_id, member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=300000, topology=word_count(), active={}, standby={}, warmup={},
        process_id=process, user_endpoint=None, client_tags=(), task_offsets=None,
        task_end_offsets=None, shutdown_application=False, endpoint_epoch=0,
        client_id="c", client_host="/127.0.0.1",
    )  # fmt: skip


def heartbeat(beat: Heartbeat, epoch: int, active: dict[str, frozenset[int]] | None) -> Heartbeat:
    # A member says what it runs with all three kinds, or says nothing.
    others = None if active is None else {}
    return replace(beat, member_epoch=epoch, topology=None, process_id=None, active=active,
                   standby=others, warmup=others)  # fmt: skip


def test_a_task_moves_only_once_its_owner_has_revoked_it() -> None:
    clock, topics = Clock(), {"lines": 2}
    groups = streams_groups(clock, topics)
    a = joining("a", "p1")
    answer = groups.heartbeat(a)
    assert REPARTITION in topics and CHANGELOG in topics  # created for the group
    answer = groups.heartbeat(heartbeat(a, answer.member.epoch, {}))
    assert answer.assignment is not None
    a_runs = answer.assignment.active
    assert flatten(a_runs) == {("0", 0), ("0", 1), ("1", 0), ("1", 1)}
    a_epoch = answer.member.epoch
    b = joining("b", "p2")
    b_answer = groups.heartbeat(b)
    assert b_answer.assignment is not None and not b_answer.assignment.active  # a still runs them
    # a is told to give up two; b gets them only after a's heartbeat no longer lists them.
    revoked = groups.heartbeat(heartbeat(a, a_epoch, a_runs))
    assert revoked.assignment is not None
    kept = revoked.assignment.active
    assert len(flatten(kept)) == 2
    b_answer = groups.heartbeat(heartbeat(b, b_answer.member.epoch, {}))
    assert b_answer.assignment is None or not b_answer.assignment.active
    done = groups.heartbeat(heartbeat(a, revoked.member.epoch, kept))
    assert done.member.epoch > a_epoch
    b_answer = groups.heartbeat(heartbeat(b, b_answer.member.epoch, {}))
    assert b_answer.assignment is not None
    assert flatten(b_answer.assignment.active) == flatten(a_runs) - flatten(kept)
    assert groups.groups[APP].state == "Stable"


def test_errors_as_kafka_names_them() -> None:
    clock, topics = Clock(), {"lines": 2}
    groups = streams_groups(clock, topics)
    with pytest.raises(HeartbeatError) as refused:
        groups.heartbeat(heartbeat(joining("a", "p1"), 3, {}))
    assert refused.value.code is ErrorCode.group_id_not_found
    answer = groups.heartbeat(joining("a", "p1"))
    with pytest.raises(HeartbeatError) as refused:
        groups.heartbeat(heartbeat(joining("a", "p1"), answer.member.epoch + 5, {}))
    assert refused.value.code is ErrorCode.fenced_member_epoch
    with pytest.raises(HeartbeatError) as refused:
        groups.heartbeat(heartbeat(joining("x", "p1"), 1, {}))
    assert refused.value.code is ErrorCode.unknown_member_id


def test_a_member_gone_silent_leaves_its_tasks_to_the_others() -> None:
    clock, topics = Clock(), {"lines": 2}
    groups = streams_groups(clock, topics)
    a, b = joining("a", "p1"), joining("b", "p2")
    groups.heartbeat(a)
    groups.heartbeat(b)
    clock.now += 46  # past streams.session.timeout.ms (45 s) for a, b heartbeats
    group = groups.get(APP)
    assert group is not None and not group.members
    answer = groups.heartbeat(joining("b", "p2"))  # the group was empty: b gets every task
    assert answer.assignment is not None and len(flatten(answer.assignment.active)) == 4
