"""DescribeGroups and ListGroups as groups answer them: what a group looks like to the
administration. Apart from the state machine because they only read a group; the coordinator
finds the groups (whether DeleteGroups may delete a classic one is the state table's)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

from kio.schema.errors import ErrorCode

from ...stats import GroupMember, GroupSnapshot, StreamsSnapshot
from .model import (
    CLASSIC_GROUP_TYPE,
    CONSUMER_GROUP_TYPE,
    SHARE_GROUP_TYPE,
    STREAMS_GROUP_TYPE,
    Group,
    GroupState,
)

if TYPE_CHECKING:
    from ..share.groups import ShareGroups
    from ..streams.groups import StreamsGroup, StreamsGroups
    from .consumer import ConsumerGroup, ConsumerGroups


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC_GROUP_TYPE


def describe(group_id: str, group: object | None) -> DescribedGroup:
    """DescribeGroups' answer for `group_id`, found as `group` (None: no such group)."""
    if not group_id:
        return DescribedGroup("", ErrorCode.invalid_group_id, GroupState.DEAD)
    if group is None or not isinstance(group, Group):
        return DescribedGroup(
            group_id,
            ErrorCode.group_id_not_found,
            GroupState.DEAD,
            message=f"Group {group_id} not found."
            if group is None
            else f"Group {group_id} is not a classic group.",
        )
    stable = group.state is GroupState.STABLE and group.protocol_name is not None
    return DescribedGroup(
        group_id,
        ErrorCode.none,
        group.state,
        group.protocol_type or "",
        (group.protocol_name or "") if stable else "",
        tuple(
            DescribedMember(
                member.member_id,
                member.group_instance_id,
                member.client_id,
                member.client_host,
                member.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                # As Kafka 4's ClassicGroupMember: the assignment in every state (the last
                # one synced, until a rebalance from CompletingRebalance resets it).
                member.assignment,
            )
            for member in group.members.values()
        ),
    )


def list_groups(
    classic: Iterable[Group],
    consumer_groups: ConsumerGroups | None,
    states: Iterable[str] = (),
    types: Iterable[str] = (),
    share_groups: ShareGroups | None = None,
    streams_groups: StreamsGroups | None = None,
) -> list[ListedGroup]:
    """Every group, or those in one of `states` and of one of `types` (both compared
    ignoring case, as Kafka does)."""
    wanted_states = {state.strip().lower() for state in states}
    wanted_types = {kind.strip().lower() for kind in types}
    listed = []
    if not wanted_types or CLASSIC_GROUP_TYPE in wanted_types:
        listed = [
            ListedGroup(group.group_id, group.protocol_type or "", group.state)
            for group in classic
            if not wanted_states or group.state.lower() in wanted_states
        ]
    if consumer_groups is not None and (not wanted_types or CONSUMER_GROUP_TYPE in wanted_types):
        listed += [
            ListedGroup(group.group_id, CONSUMER_GROUP_TYPE, group.state, CONSUMER_GROUP_TYPE)
            for group in consumer_groups.list(wanted_states)
        ]
    if share_groups is not None and (not wanted_types or SHARE_GROUP_TYPE in wanted_types):
        listed += [
            ListedGroup(group.group_id, SHARE_GROUP_TYPE, group.state, SHARE_GROUP_TYPE)
            for group in share_groups.list(wanted_states)
        ]
    if streams_groups is not None and (not wanted_types or STREAMS_GROUP_TYPE in wanted_types):
        listed += [
            ListedGroup(group.group_id, STREAMS_GROUP_TYPE, group.state, STREAMS_GROUP_TYPE)
            for group in streams_groups.list(wanted_states)
        ]
    return listed


def snapshot(group: Group | ConsumerGroup | StreamsGroup) -> GroupSnapshot:
    """The group's members and committed offsets for the accounts (its lag), and a streams
    group's own numbers."""
    return GroupSnapshot(
        CLASSIC_GROUP_TYPE if isinstance(group, Group) else group.GROUP_TYPE,
        str(group.state),
        tuple(
            GroupMember(member.member_id, member.client_id, member.client_host)
            for member in group.members.values()
        ),
        {
            (topic, index): committed.offset
            for topic, partitions in group.offsets.items()
            for index, committed in partitions.items()
            if committed.offset >= 0
        },
        _streams(group) if _is_streams(group) else None,
    )


def _is_streams(group: Group | ConsumerGroup | StreamsGroup) -> TypeGuard[StreamsGroup]:
    # By its kind's name, not isinstance: the streams modules load only once a client uses
    # a streams group (Broker.streams_groups), and reading the accounts must not load them.
    return not isinstance(group, Group) and group.GROUP_TYPE == STREAMS_GROUP_TYPE


def _streams(group: StreamsGroup) -> StreamsSnapshot:
    members = group.members.values()
    return StreamsSnapshot(
        topology_epoch=-1 if group.topology is None else group.topology.epoch,
        epoch=group.epoch,
        assignment_epoch=group.assignment_epoch,
        active_tasks=sum(len(member.assigned.active) for member in members),
        standby_tasks=sum(len(member.assigned.standby) for member in members),
        warmup_tasks=sum(len(member.assigned.warmup) for member in members),
        rebalances=group.rebalances,
    )
