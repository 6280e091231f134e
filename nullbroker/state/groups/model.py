"""A classic group as Kafka models it (ClassicGroup, ClassicGroupMember): its states (their
transitions are classic_states.py's table), its members and their protocols, and the answers
JoinGroup, SyncGroup and LeaveGroup give. Apart from the state machine (classic.py) because
these are data and the rules one group checks alone (is this member known, may it commit at
this generation, which protocol wins the vote); the state machine decides when things happen.

Kafka's limits and names for groups are here too, since both the state machine and the
handlers read them."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from kio.schema.consumer_protocol_subscription.v0 import ConsumerProtocolSubscription
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from .offsets import CommittedOffset
from .replies import Reply

log = logging.getLogger("nullbroker")

# Kafka's defaults: group.min.session.timeout.ms, group.max.session.timeout.ms,
# group.initial.rebalance.delay.ms, group.classic.new.member.join.timeout.ms and
# offset.metadata.max.bytes.
MIN_SESSION_TIMEOUT_MS = 6_000
MAX_SESSION_TIMEOUT_MS = 1_800_000
DEFAULT_INITIAL_REBALANCE_DELAY_MS = 3_000
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
MAX_OFFSET_METADATA_BYTES = 4096

CONSUMER_PROTOCOL_TYPE = "consumer"
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"
SHARE_GROUP_TYPE = "share"
STREAMS_GROUP_TYPE = "streams"
"""The new protocol's groups (KIP-848): nullbroker.state.groups.consumer."""
NO_GENERATION = -1
NO_OFFSET = -1
# OffsetCommit v9+ answers GROUP_ID_NOT_FOUND where older versions said ILLEGAL_GENERATION.
FIRST_COMMIT_VERSION_WITH_GROUP_ID_NOT_FOUND = 9

_read_subscription = entity_reader(ConsumerProtocolSubscription)


class GroupState(StrEnum):
    """A classic group's states, named as Kafka names them in DescribeGroups and ListGroups."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """A member as the group leader sees it in its JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode = ErrorCode.none


Protocols = tuple[tuple[str, bytes], ...]
"""A member's supported protocols, by preference: (name, metadata)."""


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    joining: Reply[JoinResult] | None = None
    """The JoinGroup this member is parked on, if any."""
    syncing: Reply[SyncResult] | None = None
    """The SyncGroup this member is parked on, if any."""
    is_new: bool = False
    """Joined but never got a JoinGroup answer: such a member expires even while joining."""

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among those every member supports."""
        return next(name for name, _ in self.protocols if name in candidates)

    def has_satisfied_heartbeat(self) -> bool:
        # A member parked on a JoinGroup or SyncGroup is alive; a new one may be stuck.
        return not self.is_new and (self.joining is not None or self.syncing is not None)


@dataclass(slots=True, eq=False)
class Group:
    """One classic group: its members, generation, chosen protocol and committed offsets."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.DEAD
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    """Member id of each group instance id (KIP-345 static membership)."""
    pending_join: set[str] = field(default_factory=set)
    """Member ids given out with MEMBER_ID_REQUIRED (KIP-394), not yet joined with."""
    pending_sync: set[str] = field(default_factory=set)
    """Members of this generation that have not sent SyncGroup yet."""
    supported_protocols: Counter[str] = field(default_factory=Counter)
    subscribed_topics: set[str] | None = None
    new_member_added: bool = False
    offsets: dict[str, dict[int, CommittedOffset]] = field(default_factory=dict)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(name for name, _ in member.protocols)
        self.pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(name for name, _ in member.protocols)
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join.discard(member_id)
        self.pending_sync.discard(member_id)

    def update_protocols(self, member: Member, protocols: Protocols) -> None:
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        member.protocols = protocols
        self.supported_protocols.update(name for name, _ in protocols)

    def has_all_members_joined(self) -> bool:
        return not self.pending_join and all(
            member.joining is not None for member in self.members.values()
        )

    def rebalance_timeout_ms(self) -> int:
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        names = set(names)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in names
        )

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        candidates = {
            name
            for name, supporters in self.supported_protocols.items()
            if supporters == len(self.members)
        }
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return votes.most_common(1)[0][0]

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to, from their consumer-protocol metadata;
        None when unknown (not the consumer protocol, or metadata that does not parse)."""
        if not self.uses_consumer_protocol():
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                # Every version of the subscription starts with version 0's fields, after
                # the int16 version: Kafka reads them as version 0 too.
                subscription, _ = _read_subscription(member.metadata(self.protocol_name), 2)
                topics.update(subscription.topics)
        except Exception:
            log.warning(
                "group %s: consumer protocol metadata does not parse; subscriptions unknown",
                self.group_id,
            )
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    def validate_commit(
        self,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
        *,
        transactional: bool = False,
        api_version: int = FIRST_COMMIT_VERSION_WITH_GROUP_ID_NOT_FOUND,
        partitions: Iterable[tuple[str, int]] = (),
    ) -> ErrorCode:
        """May an OffsetCommit, or a TxnOffsetCommit (`transactional`), commit to this
        group? As Kafka answers: a member commits in its generation; one naming no member
        commits to an empty group, or with a transaction (before v3 it cannot name one).
        `api_version` matters to ConsumerGroup.validate_commit only: the coordinator asks
        a group of either protocol alike."""
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return ErrorCode.none
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self.validate_member(member_id, group_instance_id)
            if error is not ErrorCode.none:
                return error
            if generation_id != self.generation_id:
                return ErrorCode.illegal_generation
        elif not transactional and self.state is not GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        if not transactional and self.state is GroupState.COMPLETING_REBALANCE:
            # The member knows the new generation but not its assignment yet.
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def joined_members(self) -> tuple[JoinedMember, ...]:
        assert self.protocol_name is not None
        return tuple(
            JoinedMember(
                member.member_id, member.group_instance_id, member.metadata(self.protocol_name)
            )
            for member in self.members.values()
        )
