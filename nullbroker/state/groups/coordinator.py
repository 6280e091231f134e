"""The group coordinator: what handlers and Broker ask about groups, of either protocol.

Classic groups (classic.py, their state machine's table in classic_states.py) and the new
protocol's consumer groups (consumer.py, KIP-848) share their ids, the offset APIs and the
administration's (DescribeGroups, ListGroups, DeleteGroups): the coordinator finds or creates
the group a request is about, checks what every group's request must pass (the group id, a
session timeout in Kafka's bounds, a coordinator that is running), and hands it on: a classic
group's JoinGroup, SyncGroup, Heartbeat and LeaveGroup to the state machine, the offsets'
rules to commits.py, the administration's answers to listing.py. Its methods' names and
signatures are what the handlers call.

While run() is not running, JoinGroup and SyncGroup are answered COORDINATOR_NOT_AVAILABLE,
as Kafka answers them while its coordinator is inactive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import trio
from kio.schema.errors import ErrorCode

from ...stats import BrokerStats, GroupSnapshot
from . import commits, listing
from .classic import ClassicGroups, JoinRequest, SyncRequest, unique_by_name
from .listing import DescribedGroup, ListedGroup
from .model import (
    DEFAULT_INITIAL_REBALANCE_DELAY_MS,
    MAX_SESSION_TIMEOUT_MS,
    MIN_SESSION_TIMEOUT_MS,
    STREAMS_GROUP_TYPE,
    Group,
    JoinResult,
    LeavingMember,
    SyncResult,
)
from .offsets import CommittedOffset
from .replies import Reply
from .transaction_offsets import StagedOffsets, TransactionOffsets

if TYPE_CHECKING:
    from ..share.groups import ShareGroup, ShareGroups
    from ..streams.groups import StreamsGroup, StreamsGroups
    from .consumer import ConsumerGroup, ConsumerGroups


GroupHandoff = tuple[
    dict[str, dict[int, CommittedOffset]] | None, dict[int, StagedOffsets], "ShareGroup | None"
]
"""A group as its coordinator hands it to another process: its committed offsets (None: only
transactions' staged offsets, no group), its staged offsets by producer id, and a share
group's membership (ShareGroups.hand_over)."""


class GroupCoordinator:
    """Every group of this node, classic and consumer, and their committed offsets."""

    def __init__(
        self,
        stats: BrokerStats,
        initial_rebalance_delay_ms: int = DEFAULT_INITIAL_REBALANCE_DELAY_MS,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.stats = stats
        self._classic = ClassicGroups(stats, initial_rebalance_delay_ms, clock)
        self._groups = self._classic.groups
        """The classic groups by id (the state machine's own map)."""
        self.consumer_groups: ConsumerGroups | None = None
        """The new protocol's groups (KIP-848): they share the group ids, the offset APIs
        and ListGroups with the classic ones."""
        self.share_groups: ShareGroups | None = None
        """Share groups (KIP-932): they share the group ids, ListGroups and DeleteGroups
        with the others, not the offset APIs (their offsets are share partitions')."""
        self.streams_groups: StreamsGroups | None = None
        """Streams groups (KIP-1071): they share the group ids, the offset APIs (their
        members commit as consumers do), ListGroups and DeleteGroups with the others."""
        self.transaction_offsets = TransactionOffsets()
        """Offsets transactions have staged (TxnOffsetCommit), until their markers."""

    # Running the classic groups' timers.

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fire the classic groups' timers when due, until cancelled; then every parked
        request is answered NOT_COORDINATOR, as when Kafka's coordinator unloads."""
        await self._classic.run(task_status=task_status)

    def start_in(self, nursery: trio.Nursery) -> None:
        """Run the timers in `nursery`, taking requests from now on: a coordinator made by
        a group request answers it, where run() would take requests from its first step."""
        self._classic.active = True
        nursery.start_soon(self.run)

    # Finding groups.

    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def find(self, group_id: str) -> Group | ConsumerGroup | StreamsGroup | None:
        """The group of that id that keeps committed offsets: classic groups, the new
        consumer protocol's (KIP-848) and streams groups (KIP-1071) share their ids, their
        offsets' APIs and the administration's. Every request that is not one protocol's
        own looks its group up here."""
        group = self._groups.get(group_id)
        if group is None and self.consumer_groups is not None:
            group = self.consumer_groups.get(group_id)
        if group is None and self.streams_groups is not None:
            return self.streams_groups.get(group_id)
        return group

    # The classic protocol's requests: checked here, run by the state machine.

    def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        *,
        require_known_member_id: bool,
        supports_skip_assignment: bool,
    ) -> Reply[JoinResult]:
        """A JoinGroup: answered at once (errors, MEMBER_ID_REQUIRED, a rejoin with
        nothing changed) or when the group's join phase completes."""
        if not self._classic.active:
            return Reply.now(JoinResult(ErrorCode.coordinator_not_available, member_id))
        if not group_id:
            return Reply.now(JoinResult(ErrorCode.invalid_group_id, member_id))
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            return Reply.now(JoinResult(ErrorCode.invalid_session_timeout, member_id))
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                return Reply.now(JoinResult(ErrorCode.unknown_member_id, member_id))
            consumer, streams = self.consumer_groups, self.streams_groups
            offsets = consumer.take_if_empty(group_id) if consumer is not None else {}
            if offsets == {} and streams is not None:
                offsets = streams.take_if_empty(group_id)
            if offsets is None:  # a group of another kind with members: not for this one
                return Reply.now(JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
            group = self._classic.create(group_id)
            group.offsets = offsets  # an empty consumer group becomes a classic one
        request = JoinRequest(
            member_id,
            group_instance_id,
            protocol_type,
            unique_by_name(protocols),
            session_timeout_ms,
            rebalance_timeout_ms,
            client_id,
            client_host,
            supports_skip_assignment,
        )
        return self._classic.join(group, request, require_known_member_id=require_known_member_id)

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Iterable[tuple[str, bytes]],
    ) -> Reply[SyncResult]:
        """A SyncGroup: the leader brings the assignment; the others wait for it."""
        if not self._classic.active:
            return Reply.now(SyncResult(ErrorCode.coordinator_not_available))
        if not group_id:
            return Reply.now(SyncResult(ErrorCode.invalid_group_id))
        group = self._groups.get(group_id)
        if group is None:
            return Reply.now(SyncResult(ErrorCode.unknown_member_id))
        request = SyncRequest(
            generation_id, member_id, group_instance_id, protocol_type, protocol_name, assignments
        )
        return self._classic.sync(group, request)

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        return self._classic.heartbeat(group, generation_id, member_id, group_instance_id)

    def leave(
        self, group_id: str, leaving: Iterable[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[LeavingMember]]:
        """LeaveGroup for (member id, group instance id) pairs: the group-level error and
        one answer per member. A static member may be removed by instance id alone."""
        leaving = list(leaving)
        if not group_id:
            return ErrorCode.invalid_group_id, []
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.none, [
                LeavingMember(member_id, instance_id, ErrorCode.unknown_member_id)
                for member_id, instance_id in leaving
            ]
        return self._classic.leave(group, leaving)

    # Offsets: the coordinator finds (or creates) the group, commits.py says what holds.

    def validate_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        api_version: int,
        *,
        transactional: bool = False,
        partitions: Iterable[tuple[str, int]] = (),
    ) -> tuple[ErrorCode, Group | ConsumerGroup | None]:
        """May this OffsetCommit, or TxnOffsetCommit (`transactional`), commit? Members
        commit in their generation (member epoch, for the new protocol's groups); a consumer
        outside group management (generation -1, no member id: assign() consumers, Spark)
        commits to a group with no members, which is created for it if need be."""
        if not group_id:
            return ErrorCode.invalid_group_id, None
        group = self.find(group_id)
        if group is None:
            refusal = commits.refusal_without_group(
                generation_id, api_version, transactional=transactional
            )
            if refusal is not None:
                return refusal, None
            group = self._classic.create(group_id)
        error = group.validate_commit(
            member_id,
            generation_id,
            group_instance_id,
            transactional=transactional,
            api_version=api_version,
            partitions=partitions,
        )
        return error, group if error is ErrorCode.none else None

    def take_if_empty(self, group_id: str) -> dict[str, dict[int, CommittedOffset]] | None:
        """The committed offsets of a classic group with no members, which goes, so that
        a group of another kind (KIP-848's, a streams group) takes its place ({} for no such
        group);
        None while it has members."""
        return self._classic.take_if_empty(group_id)

    commit = staticmethod(commits.commit)

    def end_transaction(self, producer_id: int, holds: Callable[[str], bool], commit: bool) -> None:
        """A transaction's marker for a partition of __consumer_offsets (the groups `holds`
        picks): on a commit, the offsets it staged for them go to the groups whatever their
        members did since, to a new group without members if one was deleted meanwhile (as
        Kafka replays them); on an abort they are dropped."""
        for group_id, offsets in self.transaction_offsets.end(producer_id, holds).items():
            if not commit:
                continue
            group = self.find(group_id) or self._classic.create(group_id)
            for (topic, index), committed in offsets.items():
                self.commit(group, topic, index, committed)

    def committed(self, group_id: str) -> dict[str, dict[int, CommittedOffset]] | None:
        """A group's committed offsets by topic and partition; None for no such group."""
        group = self.find(group_id)
        return None if group is None else group.offsets

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        return commits.validate_offset_fetch(self.find(group_id), member_id, member_epoch)

    def delete_offsets(
        self, group_id: str, topics: Iterable[tuple[str, Iterable[int]]]
    ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, ErrorCode]]]]]:
        if not group_id:
            return ErrorCode.invalid_group_id, []
        return commits.delete_offsets(self.find(group_id), topics)

    # DescribeGroups, ListGroups, DeleteGroups: the coordinator finds, listing.py answers.

    def describe(self, group_id: str) -> DescribedGroup:
        return listing.describe(group_id, self.find(group_id) or self.share_group(group_id))

    def share_group(self, group_id: str) -> object | None:
        """The share group of that id, for the requests that name a group of any kind."""
        shares = self.share_groups
        return None if shares is None else shares.get(group_id)

    def group_ids(self) -> list[str]:
        """Every group this coordinator holds that a coordinator move hands over: classic
        groups, the new protocol's (KIP-848), streams groups (KIP-1071), and those only a
        transaction has staged offsets for."""
        consumer, streams = self.consumer_groups, self.streams_groups
        held = [
            *self._groups,
            *(consumer.groups if consumer is not None else ()),
            *(streams.groups if streams is not None else ()),
        ]
        if self.share_groups is not None:
            held += [g.group_id for g in self.share_groups.groups.values() if g.coordinated_here]
        return [*held, *(self.transaction_offsets.group_ids() - set(held))]

    def snapshots(self) -> dict[str, GroupSnapshot]:
        """Every group's members and committed offsets, of either protocol, by group id."""
        groups: list[Group | ConsumerGroup | StreamsGroup] = [*self._groups.values()]
        if self.consumer_groups is not None:
            groups += self.consumer_groups.groups.values()
        if self.streams_groups is not None:
            groups += self.streams_groups.groups.values()
        return {group.group_id: listing.snapshot(group) for group in groups}

    def hand_over(self, group_id: str) -> GroupHandoff:
        """Give up a group whose coordinator is now another process's node (`--processes`):
        a classic group's waiting members are told NOT_COORDINATOR, as when a coordinator
        unloads; a KIP-848 or streams group's members learn it at their next heartbeat
        (UNKNOWN_MEMBER_ID from the new coordinator: they join it again). Its committed
        offsets (None: no such group) and the offsets transactions have staged for it go to
        the new coordinator; a share group's members go on there (ShareGroups.hand_over)."""
        staged = self.transaction_offsets.take(group_id)
        if group_id in self._groups:
            return self._classic.hand_over(group_id), staged, None
        for kind in (self.consumer_groups, self.streams_groups):
            group = kind.groups.pop(group_id, None) if kind is not None else None
            if group is not None:
                return group.offsets, staged, None
        shares = self.share_groups
        return None, staged, shares.hand_over(group_id) if shares is not None else None

    def take_over(self, group_id: str, handoff: GroupHandoff) -> None:
        """Coordinate a group handed over by another process, from its committed offsets;
        its members join again, as after a coordinator moves in Kafka (a share group's go
        on: its membership came with it)."""
        offsets, staged, share = handoff
        self.transaction_offsets.put(group_id, staged)
        if share is not None:
            assert self.share_groups is not None, "the broker makes them for a share group"
            self.share_groups.take_over(share)
        if offsets is None:
            return
        group = self._groups.get(group_id) or self._classic.create(group_id)
        for topic, partitions in offsets.items():
            group.offsets.setdefault(topic, {}).update(partitions)

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[ListedGroup]:
        return listing.list_groups(
            self._groups.values(),
            self.consumer_groups,
            states,
            types,
            self.share_groups,
            self.streams_groups,
        )

    def delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, ErrorCode]]:
        """DeleteGroups: a group without members goes, with its offsets."""
        return [(group_id, self._delete_group(group_id)) for group_id in group_ids]

    def _delete_group(self, group_id: str) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.find(group_id)
        if group is None:
            if self.share_group(group_id) is not None:
                assert self.share_groups is not None
                return self.share_groups.delete(group_id)
            return ErrorCode.group_id_not_found
        if not isinstance(group, Group):
            streams = group.GROUP_TYPE == STREAMS_GROUP_TYPE
            owner = self.streams_groups if streams else self.consumer_groups
            assert owner is not None
            offsets = owner.take_if_empty(group_id)
            return ErrorCode.non_empty_group if offsets is None else ErrorCode.none
        return self._classic.delete(group)
