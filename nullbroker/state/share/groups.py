"""Share groups (KIP-932): members that heartbeat, the partitions the group reads, and the
share partitions that say which records each member holds.

A member joins with epoch 0 and a member id it made (a uuid, ShareGroupHeartbeat v1),
naming the topics it subscribes to; each change of membership or subscriptions bumps the
group's epoch and the group's assignment is made again by the simple assignor
(assignor.py), which may give a partition to several members: share groups have no
exclusive owners, so there is no revocation, and a member takes the group's epoch with
its next heartbeat. A member leaves with epoch -1, or is removed when it goes without a
heartbeat for the session timeout; either way the records it holds are released.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from ...stats import BrokerStats
from ..groups.consumer import HeartbeatError
from .assignor import Assignment, assign
from .configs import GroupConfigs
from .partition import Limits, SharePartition
from .sessions import ShareSessions

LEAVE_EPOCH = -1
ASSIGNOR_NAME = "simple"


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: tuple[str, ...] = ()
    epoch: int = 0
    assignment: Assignment = field(default_factory=dict)
    told: Assignment | None = None
    """The assignment last sent to the member: a change made by another member's heartbeat
    reaches it with its own next one."""
    last_heartbeat: float = 0.0


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    partitions: dict[tuple[str, int], SharePartition] = field(default_factory=dict)
    """Each share partition the group has read, by (topic name, partition)."""
    targets: dict[str, Assignment] = field(default_factory=dict)
    """The assignment in force, by member id (made at most once an assignment interval)."""
    assigned_at: float = float("-inf")
    """When it was made (the groups' clock)."""
    initialized: set[str] = field(default_factory=set)
    """The topics whose share partitions the group has initialized (subscribed to)."""
    coordinated_here: bool = True
    """False where another process coordinates the group (`--processes`): this one holds
    the share partitions it leads, and knows nothing of the members."""

    @property
    def state(self) -> str:
        """As Kafka names a share group's state (ShareGroup.ShareGroupState)."""
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {topic for member in self.members.values() for topic in member.subscribed}


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What a member sent, as the coordinator needs it."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed: tuple[str, ...] | None
    client_id: str
    client_host: str


def group_assignment(group: ShareGroup, member: ShareMember) -> Assignment:
    """The member's partitions in the assignment in force (none if it joined since)."""
    return group.targets.get(member.member_id, {})


class ShareGroups:
    """Every share group of this coordinator, their members, share partitions and share
    sessions."""

    def __init__(
        self,
        partitions_of: Callable[[str], int | None],
        stats: BrokerStats,
        configs: GroupConfigs,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._partitions_of = partitions_of
        """A topic's partition count, or None for no such topic."""
        self.stats = stats
        self.configs = configs
        self._clock = clock
        self.groups: dict[str, ShareGroup] = {}
        self.sessions = ShareSessions()

    def heartbeat(self, beat: Heartbeat) -> tuple[ShareMember, Assignment | None]:
        """Apply one heartbeat: the member after it, and its assignment (None: none to
        send, as it was). Raises HeartbeatError."""
        group_id = beat.group_id
        if not group_id:
            raise HeartbeatError(ErrorCode.invalid_request, "GroupId can't be empty.")
        if not beat.member_id:
            raise HeartbeatError(ErrorCode.invalid_request, "")  # Kafka says no more
        if beat.member_epoch == 0 and not beat.subscribed:
            raise HeartbeatError(
                ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
            )
        if beat.member_epoch < LEAVE_EPOCH:
            raise HeartbeatError(
                ErrorCode.invalid_request, f"MemberEpoch is {beat.member_epoch}, should be >= -1."
            )
        group = self.groups.get(group_id)
        if group is None:
            if beat.member_epoch != 0:
                raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
            group = self.groups[group_id] = ShareGroup(group_id)
        group.coordinated_here = True
        self.expire(group)
        member = group.members.get(beat.member_id)
        if beat.member_epoch == LEAVE_EPOCH:
            if member is None:
                raise HeartbeatError(
                    ErrorCode.unknown_member_id,
                    f"Member {beat.member_id} is not a member of group {group_id}.",
                )
            self._remove(group, member)
            member.epoch = LEAVE_EPOCH
            return member, None
        if member is None:
            if beat.member_epoch != 0:
                raise HeartbeatError(
                    ErrorCode.unknown_member_id,
                    f"Member {beat.member_id} is not a member of group {group_id}.",
                )
            member = group.members[beat.member_id] = ShareMember(
                beat.member_id, beat.rack_id, beat.client_id, beat.client_host
            )
            changed = True  # the group's epoch moves once for all this heartbeat changed
        elif beat.member_epoch not in (0, member.epoch):
            raise HeartbeatError(
                ErrorCode.fenced_member_epoch,
                f"The share group member has a greater member epoch ({beat.member_epoch}) "
                f"than the one known by the group coordinator ({member.epoch}). The member "
                "must abandon all its partitions and rejoin."
                if beat.member_epoch > member.epoch
                else f"The share group member has a smaller member epoch ({beat.member_epoch})"
                f" than the one known by the group coordinator ({member.epoch}). The member "
                "must abandon all its partitions and rejoin.",
            )
        else:
            changed = False
        member.last_heartbeat = self._clock()
        if beat.rack_id is not None:
            member.rack_id = beat.rack_id
        if beat.subscribed is not None and tuple(sorted(beat.subscribed)) != member.subscribed:
            member.subscribed = tuple(sorted(beat.subscribed))
            changed = True
        if changed:
            group.epoch += 1
            new_topics = group.subscribed_topics() - group.initialized
            if new_topics:
                # As Kafka: the share partitions of a topic the group subscribes to for the
                # first time are initialized (in its share coordinator), which moves the
                # group's epoch once more.
                group.initialized |= new_topics
                group.epoch += 1
        fresh = beat.member_epoch == 0
        now = member.last_heartbeat
        interval = self.configs.int_value(group_id, "share.assignment.interval.ms") / 1000
        if group.assignment_epoch < group.epoch and now - group.assigned_at >= interval:
            # As Kafka 4.4: the assignment is made again at most once an interval
            # (share.assignment.interval.ms); a member joining sooner is told the one
            # in force (nothing, for it) and gets its partitions at a later heartbeat.
            group.assigned_at = now
            targets = assign(
                {m.member_id: m.subscribed for m in group.members.values()},
                self._partitions_of,
                {m.member_id: m.assignment for m in group.members.values()},
            )
            group.targets = targets
            group.assignment_epoch = group.epoch
        member.epoch = group.epoch
        member.assignment = group_assignment(group, member)
        if fresh or member.assignment != member.told:
            member.told = member.assignment
            return member, member.assignment
        return member, None

    def _remove(self, group: ShareGroup, member: ShareMember) -> None:
        """A member goes: the group's epoch moves. What it holds stays locked, as in
        Kafka (whose group coordinator never touches share partitions): released when its
        share session closes, or when the locks run out."""
        del group.members[member.member_id]
        group.epoch += 1

    def release_member(
        self, group: ShareGroup, member_id: str, counted: Limits | None = None
    ) -> None:
        """Give back every record the member holds, in every share partition (see
        SharePartition.release_member for `counted`)."""
        for share_partition in group.partitions.values():
            share_partition.release_member(member_id, counted)

    def expire(self, group: ShareGroup) -> None:
        """Remove the members whose session ran out (Kafka removes them by timer; here they
        go when their group is next looked at, and by the broker's periodic sweep)."""
        now = self._clock()
        timeout = self.configs.session_timeout_ms(group.group_id) / 1000
        gone = [m for m in group.members.values() if now - m.last_heartbeat > timeout]
        for member in gone:
            self._remove(group, member)

    def partitions_holder(self, group_id: str) -> ShareGroup:
        """The group as a partition's leader holds it where another process coordinates it
        (`--processes`): its share partitions here, no members."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id, coordinated_here=False)
        return group

    def hand_over(self, group_id: str) -> ShareGroup | None:
        """A group this process coordinated, for the process that coordinates it now
        (`--processes`): its members, epochs and assignment, as Kafka's new coordinator
        reads them from __consumer_offsets, so its members go on without joining again.
        Its share partitions stay with their leaders: here, held as another process's."""
        group = self.groups.get(group_id)
        if group is None or not group.coordinated_here:
            return None
        given = replace(group, partitions={})
        group.members, group.targets, group.coordinated_here = {}, {}, False
        return given

    def take_over(self, given: ShareGroup) -> None:
        """Coordinate a group another process handed over, with the share partitions this
        one leads."""
        held = self.groups.get(given.group_id)
        if held is not None:
            given.partitions = held.partitions
        self.groups[given.group_id] = given

    def drop_held(self, group_id: str) -> bool:
        """Forget the share partitions held here of a group another process coordinated
        and has deleted; whether there were any."""
        held = self.groups.get(group_id)
        if held is None or held.coordinated_here:
            return False
        del self.groups[group_id]
        return True

    def get(self, group_id: str) -> ShareGroup | None:
        group = self.groups.get(group_id)
        if group is not None:
            self.expire(group)
        return group

    def member(self, group_id: str, member_id: str) -> ShareMember | None:
        group = self.get(group_id)
        return None if group is None else group.members.get(member_id)

    def list(self, states: Iterable[str]) -> list[ShareGroup]:
        wanted = {state.strip().lower() for state in states}
        return [
            group for group in self.groups.values() if not wanted or group.state.lower() in wanted
        ]

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: one without members goes, with its share
        partitions."""
        group = self.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        return ErrorCode.none
