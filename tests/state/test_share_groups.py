"""Share groups' membership (nullbroker.state.share.groups), their assignor, sessions and
group configs."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from nullbroker.settings import Config
from nullbroker.state.groups.consumer import HeartbeatError
from nullbroker.state.share.assignor import assign
from nullbroker.state.share.configs import (
    CACHED_GROUPS,
    GroupConfigs,
    InvalidGroupConfig,
    by_duration_ms,
)
from nullbroker.state.share.groups import Heartbeat, ShareGroups
from nullbroker.state.share.sessions import ShareSessions
from nullbroker.stats import BrokerStats

PARTITIONS = {"orders": 3, "clicks": 1}


def groups(clock: list[float]) -> ShareGroups:
    return ShareGroups(
        PARTITIONS.get, BrokerStats(), GroupConfigs(Config()), clock=lambda: clock[0]
    )


def beat(member: str, epoch: int, topics: tuple[str, ...] | None = ("orders",)) -> Heartbeat:
    return Heartbeat("g", member, epoch, None, topics, "client", "/127.0.0.1")


def test_members_join_and_every_partition_is_read() -> None:
    clock = [0.0]
    share = groups(clock)
    # The first join moves the epoch twice: a member, and the topic's share partitions
    # initialized, as in Kafka.
    first, assigned = share.heartbeat(beat("a", 0))
    assert (first.epoch, assigned) == (2, {"orders": frozenset({0, 1, 2})})
    # Within the assignment interval (1 s) a member joining is told the assignment in
    # force: nothing for it yet.
    clock[0] = 0.5
    second, assigned = share.heartbeat(beat("b", 0))
    assert (second.epoch, assigned) == (3, {})
    clock[0] = 1.0
    second, assigned = share.heartbeat(beat("b", 3, None))
    assert assigned is not None and assigned.keys() == {"orders"}
    # The first member learns of its new share with its next heartbeat.
    member, told = share.heartbeat(beat("a", 2, None))
    assert member.epoch == 3
    assert told is not None and second.assignment.keys() == {"orders"}
    together = told["orders"] | second.assignment["orders"]
    assert together == {0, 1, 2} and not told["orders"] & second.assignment["orders"]
    assert share.heartbeat(beat("a", 3, None))[1] is None  # nothing new to tell


def test_more_members_than_partitions_share_them() -> None:
    target = assign({m: ("clicks",) for m in "abc"}, PARTITIONS.get, {})
    assert all(target[m] == {"clicks": frozenset({0})} for m in "abc")


def test_heartbeats_are_checked_as_kafka_checks_them() -> None:
    share = groups([0.0])
    refusals = [
        (Heartbeat("", "a", 0, None, ("orders",), "c", "h"), ErrorCode.invalid_request),
        (beat("", 0), ErrorCode.invalid_request),
        (beat("a", 0, None), ErrorCode.invalid_request),  # joining names its topics
        (beat("a", 3), ErrorCode.group_id_not_found),
    ]
    for heartbeat, error in refusals:
        with pytest.raises(HeartbeatError) as refused:
            share.heartbeat(heartbeat)
        assert refused.value.code is error
    share.heartbeat(beat("a", 0))
    with pytest.raises(HeartbeatError) as refused:
        share.heartbeat(beat("a", 7))
    assert refused.value.code is ErrorCode.fenced_member_epoch
    with pytest.raises(HeartbeatError) as refused:
        share.heartbeat(beat("b", 1))
    assert refused.value.code is ErrorCode.unknown_member_id


def test_a_silent_member_is_removed_after_the_session_timeout() -> None:
    clock = [0.0]
    share = groups(clock)
    share.heartbeat(beat("a", 0))
    share.heartbeat(beat("b", 0))
    clock[0] = 30.0
    share.heartbeat(beat("b", 3, None))
    clock[0] = 46.0  # a's last heartbeat was 46 s ago, past 45 s
    group = share.get("g")
    assert group is not None and list(group.members) == ["b"]
    assert group.state == "Stable"


def test_a_member_leaves_and_the_group_empties() -> None:
    share = groups([0.0])
    share.heartbeat(beat("a", 0))
    member, assigned = share.heartbeat(beat("a", -1, None))
    assert (member.epoch, assigned) == (-1, None)
    group = share.get("g")
    assert group is not None and group.state == "Empty"
    assert share.delete("g") is ErrorCode.none
    assert share.delete("g") is ErrorCode.group_id_not_found


def test_share_sessions_count_their_epochs_per_node() -> None:
    sessions = ShareSessions(slots=2)
    opened = sessions.open(1, "g", "a")
    assert not isinstance(opened, ErrorCode)
    sessions.advance(opened)
    assert sessions.find(1, "g", "a", 1) is opened
    assert sessions.find(1, "g", "a", 2) is ErrorCode.invalid_share_session_epoch
    assert sessions.find(2, "g", "a", 1) is ErrorCode.share_session_not_found
    assert not isinstance(sessions.open(2, "g", "a"), ErrorCode)
    assert sessions.open(3, "g", "a") is ErrorCode.share_session_limit_reached
    sessions.close_member("g", "a")
    assert len(sessions) == 0


def test_group_configs_default_to_the_brokers_and_are_checked() -> None:
    configs = GroupConfigs(Config(group_share_record_lock_duration_ms=20000))
    assert configs.limits("g").lock_ms == 20000
    configs.overrides("g")["share.delivery.count.limit"] = "2"
    assert configs.limits("g").delivery_limit == 2
    assert configs.value("g", "share.auto.offset.reset") == "latest"
    configs.check({"share.auto.offset.reset": "by_duration:PT1H"})
    refused = [
        {"share.record.lock.duration.ms": "1000"},  # below the broker's minimum, 15000
        {"share.delivery.count.limit": "1"},
        {"share.isolation.level": "serializable"},
        {"share.auto.offset.reset": "by_duration:soon"},
        {"no.such.config": "1"},
    ]
    for altered in refused:
        with pytest.raises(InvalidGroupConfig):
            configs.check(altered)
    assert by_duration_ms("by_duration:P1DT2H3M4.5S") == ((24 + 2) * 3600 + 3 * 60 + 4.5) * 1000


def test_group_configs_read_for_any_group_id_stay_bounded() -> None:
    configs = GroupConfigs(Config())
    for index in range(2 * CACHED_GROUPS + 5):
        assert configs.limits(f"g{index}").delivery_limit == 5
        assert configs.session_timeout_ms(f"g{index}") == 45_000
    assert len(configs._limits) <= CACHED_GROUPS and len(configs._ints) <= CACHED_GROUPS
    configs.overrides("g3")["share.session.timeout.ms"] = "6000"
    assert configs.session_timeout_ms("g3") == 6000
