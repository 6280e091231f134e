"""Consumer groups of the new protocol (KIP-848, `group.protocol=consumer`): the broker
assigns, members heartbeat.

A member joins with epoch 0 and its subscription; a change of membership or subscriptions
bumps the group's epoch, and the group's target assignment is computed again by a
server-side assignor (`uniform`, the default, or `range`). Each heartbeat then moves its
member towards its target, as Kafka's coordinator does: partitions it must give up are
revoked first (it keeps its epoch until its heartbeat no longer lists them, then takes the
group's), and partitions it gains are handed over only once no other member owns or is
still revoking them, so no partition is ever owned twice. Members leave with epoch -1
(-2: a static member, for a while), or are removed when they stop heartbeating for the
session timeout. Offsets are committed with member epochs.
"""

from __future__ import annotations

import itertools
import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import ClassVar

from kio.schema.errors import ErrorCode

from ...cluster.nodes import java_string_hash
from .member_epochs import FIRST_COMMIT_VERSION_FOR_MEMBERS, commit_error, fetch_error
from .model import CONSUMER_GROUP_TYPE
from .offsets import CommittedOffset

HEARTBEAT_INTERVAL_MS = 5000
"""Kafka's group.consumer.heartbeat.interval.ms default (the broker's
--group-consumer-heartbeat-interval-ms sets it)."""
SESSION_TIMEOUT_MS = 45000
"""Kafka's group.consumer.session.timeout.ms default (--group-consumer-session-timeout-ms)."""
UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

Assignment = dict[str, frozenset[int]]
"""Partitions by topic name."""


class HeartbeatError(Exception):
    """A heartbeat refused with `code`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed: tuple[str, ...] = ()
    """The topics it subscribes to: those it named, or those its regex matches."""
    regex: str | None = None
    """A subscription by regular expression (KIP-848's subscribed_topic_regex)."""
    assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    owned: Assignment = field(default_factory=dict)
    """What the member owns, as far as the coordinator knows."""
    revoking: Assignment = field(default_factory=dict)
    """Partitions it was told to give up and has not yet said it gave up."""
    owned_since: dict[tuple[str, int], int] = field(default_factory=dict)
    """The epoch at which it was given each partition it owns (KIP-1251: it may commit one
    at any epoch from that to its own)."""
    last_heartbeat: float = 0.0
    left_static: bool = False
    """A static member that left with epoch -2: it keeps its partitions until its session
    times out, for a member of the same instance id to take them over."""


@dataclass(slots=True)
class ConsumerGroup:
    GROUP_TYPE: ClassVar[str] = CONSUMER_GROUP_TYPE
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    assigned_at: float = float("-inf")
    """When the target assignment was last made: at most once an assignment interval."""
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    offsets: dict[str, dict[int, CommittedOffset]] = field(default_factory=dict)
    """Committed offsets by topic and partition, as a classic group keeps them."""

    @property
    def state(self) -> str:
        """As Kafka names a consumer group's state."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.epoch:
            return "Assigning"
        if any(
            member.epoch != self.epoch
            or member.revoking
            or member.owned != self.target.get(member_id, {})
            for member_id, member in self.members.items()
        ):
            return "Reconciling"
        return "Stable"

    def owner_of(self, topic: str, partition: int, other_than: str) -> bool:
        """Whether a member other than `other_than` owns or is still revoking it."""
        return any(
            partition in member.owned.get(topic, ()) or partition in member.revoking.get(topic, ())
            for member_id, member in self.members.items()
            if member_id != other_than
        )

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Whether a member subscribes to `topic`: its offsets are then not for deleting."""
        return any(topic in member.subscribed for member in self.members.values())

    def validate_commit(
        self,
        member_id: str,
        member_epoch: int,
        group_instance_id: str | None = None,
        *,
        transactional: bool = False,
        api_version: int = FIRST_COMMIT_VERSION_FOR_MEMBERS,
        partitions: Iterable[tuple[str, int]] = (),
    ) -> ErrorCode:
        """May an OffsetCommit, or a TxnOffsetCommit (`transactional`), commit `partitions`
        to this group? As Kafka 4.4 answers: a member commits with its epoch; a commit
        without a member (epoch -1: admin tools, assign() consumers) only to an empty group,
        except a TxnOffsetCommit that names no member at all, which is always taken.

        An older epoch is taken for partitions the member has owned since that epoch or
        before (KIP-1251, Kafka 4.4): a commit sent while the heartbeat moving the member on
        was in flight is kept. Any other epoch is STALE_MEMBER_EPOCH (ILLEGAL_GENERATION
        in a TxnOffsetCommit before v6). A request whose partitions are not all so owned is
        refused whole (Kafka answers per partition; its clients commit what they own)."""
        asked = list(partitions)

        def owned_since(member: ConsumerMember, epoch: int) -> bool:
            return bool(asked) and all(
                member.owned_since.get(key, epoch + 1) <= epoch for key in asked
            )

        return commit_error(
            self.members,
            member_id,
            member_epoch,
            group_instance_id,
            transactional=transactional,
            api_version=api_version,
            held_since=owned_since,
        )

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        """May an OffsetFetch (v9+) read this group's offsets? One naming no member (admin
        tools) may; a member reads at its epoch."""
        return fetch_error(self.members, member_id, member_epoch)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What a member sent, as the coordinator needs it."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rebalance_timeout_ms: int
    subscribed: tuple[str, ...] | None
    assignor: str | None
    owned: Assignment | None
    client_id: str
    client_host: str
    regex: str | None = None

    def is_full(self) -> bool:
        """Whether it sent all a member has (Kafka's isFullRequest): its rebalance timeout,
        subscription and owned partitions, as a client does after an error."""
        return (
            self.rebalance_timeout_ms != -1
            and (self.subscribed is not None or self.regex is not None)
            and self.owned is not None
        )


class ConsumerGroups:
    """Every consumer group of this coordinator."""

    def __init__(
        self,
        partitions_of: Callable[[str], int | None],
        topic_names: Callable[[], Iterable[str]] = tuple,
        clock: Callable[[], float] = time.monotonic,
        heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        assignment_interval_ms: Callable[[str], int] = lambda group_id: 0,
    ) -> None:
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self._assignment_interval_ms = assignment_interval_ms
        """A group's consumer.assignment.interval.ms (Kafka 4.4: 1 s unless the group or
        the broker sets it)."""
        self._partitions_of = partitions_of
        """A topic's partition count, or None for no such topic."""
        self._topic_names = topic_names
        """Every topic's name, for subscriptions by regex."""
        self._clock = clock
        self.groups: dict[str, ConsumerGroup] = {}

    def heartbeat(self, beat: Heartbeat) -> tuple[ConsumerMember, Assignment | None]:
        """Apply one heartbeat: the member after it, and its assignment (None: none to
        send: the member leaving, or its assignment as it was). Raises HeartbeatError."""
        if not beat.group_id:
            raise HeartbeatError(ErrorCode.invalid_group_id, "the group id is empty")
        group = self.groups.get(beat.group_id)
        if group is None:
            if beat.member_epoch != 0:
                raise HeartbeatError(ErrorCode.unknown_member_id, "no such group")
            group = self.groups[beat.group_id] = ConsumerGroup(beat.group_id)
        self._expire(group)
        if beat.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            member = group.members.get(beat.member_id)
            if member is None:
                raise HeartbeatError(ErrorCode.unknown_member_id, "not a member")
            if beat.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
                # Gone for a while: its partitions (and epoch) wait for its instance.
                member.left_static = True
                return replace(member, epoch=STATIC_LEAVE_EPOCH), None
            del group.members[beat.member_id]
            group.epoch += 1
            member.epoch = LEAVE_EPOCH
            # As Kafka 4.4: the leaving member's heartbeat makes the assignment again too,
            # if the interval allows.
            self._maybe_assign(group, self._clock())
            return member, None
        member = self._member(group, beat)
        member.last_heartbeat = self._clock()
        before = dict(member.owned)
        if beat.owned is not None:
            self._acknowledge(member, beat.owned)
        self._maybe_assign(group, member.last_heartbeat)
        assignment = self._reconcile(group, member)
        # As Kafka's coordinator: the assignment goes to a member joining, one that sent
        # everything (as a client does after an error), or one whose partitions changed.
        if beat.member_epoch == 0 or beat.is_full() or assignment != before:
            return member, assignment
        return member, None

    def _maybe_assign(self, group: ConsumerGroup, now: float) -> None:
        """As Kafka 4.4: the target assignment is made again at most once an interval
        (consumer.assignment.interval.ms); a member joining sooner is told the one in force,
        at its epoch (nothing, for it), and gets its partitions at a heartbeat after the
        interval."""
        if group.assignment_epoch == group.epoch:
            return  # nothing changed since the assignment in force: no config to read
        interval = self._assignment_interval_ms(group.group_id) / 1000
        if now - group.assigned_at >= interval:
            group.target = self._assign(group)
            group.assignment_epoch = group.epoch
            group.assigned_at = now

    def _member(self, group: ConsumerGroup, beat: Heartbeat) -> ConsumerMember:
        member = group.members.get(beat.member_id)
        changed = False  # the group's epoch moves once for whatever this heartbeat changed
        if beat.member_epoch == 0:
            if beat.assignor is not None and beat.assignor not in ASSIGNORS:
                raise HeartbeatError(
                    ErrorCode.unsupported_assignor, f"assignors served: {', '.join(ASSIGNORS)}"
                )
            previous = self._static_member(group, beat)
            if member is None:
                member_id = beat.member_id or str(uuid.uuid4())
                member = group.members[member_id] = ConsumerMember(
                    member_id,
                    beat.instance_id,
                    beat.client_id,
                    beat.client_host,
                    beat.rebalance_timeout_ms,
                )
            else:  # rejoining: it owns nothing now
                member.owned, member.revoking, member.owned_since = {}, {}, {}
            if previous is not None:
                # The same instance, back: it takes over what it had, with no rebalance.
                del group.members[previous.member_id]
                member.subscribed, member.regex = previous.subscribed, previous.regex
                member.owned, member.revoking = previous.owned, previous.revoking
                member.owned_since = previous.owned_since
                member.epoch = previous.epoch
                member.assignor = previous.assignor
                if previous.member_id in group.target:
                    group.target[member.member_id] = group.target.pop(previous.member_id)
            else:
                member.epoch = 0
                changed = True
        elif member is None:
            raise HeartbeatError(ErrorCode.unknown_member_id, "not a member of the group")
        elif beat.member_epoch not in (member.epoch, member.previous_epoch):
            raise HeartbeatError(
                ErrorCode.fenced_member_epoch,
                f"epoch {beat.member_epoch}; the member's is {member.epoch}",
            )
        if beat.regex is not None and beat.regex != member.regex:
            try:
                re.compile(beat.regex)
            except re.error as error:
                raise HeartbeatError(
                    ErrorCode.invalid_regular_expression, f"{beat.regex!r}: {error}"
                ) from None
            member.regex = beat.regex or None
        elif beat.subscribed is not None:
            member.regex = None
        subscribed = self._subscription(member, beat)
        if subscribed != member.subscribed:
            member.subscribed = subscribed
            changed = True
        if beat.assignor is not None:
            member.assignor = beat.assignor
        if changed:
            # As Kafka 4.4 (checked): a new group's first member moves its epoch to 2, where
            # 4.1 moved it to 1; every later change moves it by one.
            group.epoch += 1 if group.epoch else 2
        return member

    @staticmethod
    def _static_member(group: ConsumerGroup, beat: Heartbeat) -> ConsumerMember | None:
        """The member of the same instance id that left for a while (epoch -2), whose
        place a joining static member takes; raises if that instance is still active."""
        if beat.instance_id is None:
            return None
        for member in group.members.values():
            if member.instance_id == beat.instance_id and member.member_id != beat.member_id:
                if not member.left_static:
                    raise HeartbeatError(
                        ErrorCode.unreleased_instance_id,
                        f"instance {beat.instance_id} is still a member",
                    )
                return member
        return None

    def _subscription(self, member: ConsumerMember, beat: Heartbeat) -> tuple[str, ...]:
        """The member's topics now: those it named, or those its regex matches (a topic
        created since joins the subscription at the next heartbeat)."""
        if member.regex is not None:
            pattern = re.compile(member.regex)
            return tuple(sorted(name for name in self._topic_names() if pattern.fullmatch(name)))
        if beat.subscribed is not None:
            return tuple(sorted(beat.subscribed))
        return member.subscribed

    @staticmethod
    def _acknowledge(member: ConsumerMember, owned: Assignment) -> None:
        """The member says what it owns: revocations it no longer lists are done."""
        for topic, revoking in list(member.revoking.items()):
            still = revoking & owned.get(topic, frozenset())
            if still:
                member.revoking[topic] = still
            else:
                del member.revoking[topic]

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember) -> Assignment:
        target = group.target.get(member.member_id, {})
        to_revoke = {
            topic: revoked
            for topic, partitions in member.owned.items()
            if (revoked := partitions - target.get(topic, frozenset()))
        }
        if to_revoke:
            for topic, revoked in to_revoke.items():
                member.revoking[topic] = member.revoking.get(topic, frozenset()) | revoked
                for partition in revoked:
                    member.owned_since.pop((topic, partition), None)
                kept = member.owned[topic] - revoked
                if kept:
                    member.owned[topic] = kept
                else:
                    del member.owned[topic]
            return dict(member.owned)
        if member.revoking:
            return dict(member.owned)  # still waiting for it to give them up
        # Nothing left to revoke: the member is at the group's epoch, and gets what no
        # one else holds of its target (the rest once their owners have let go).
        for topic, partitions in target.items():
            owned = member.owned.get(topic, frozenset())
            free = frozenset(
                partition
                for partition in partitions - owned
                if not group.owner_of(topic, partition, member.member_id)
            )
            if free:
                member.owned[topic] = owned | free
                for partition in free:
                    member.owned_since[topic, partition] = group.assignment_epoch
        if member.epoch != group.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
        return dict(member.owned)

    def _assign(self, group: ConsumerGroup) -> dict[str, Assignment]:
        """The group's target assignment: each subscribed topic's partitions spread over
        its subscribers, range-wise (`range`) or round robin over all of them (`uniform`);
        uniform over members of one subscription as Kafka's assignor does it, keeping what
        each has (`_uniform`)."""
        members = sorted(group.members.values(), key=lambda member: member.member_id)
        target: dict[str, dict[str, set[int]]] = {member.member_id: {} for member in members}
        topics = sorted({topic for member in members for topic in member.subscribed})
        uses_range = any(member.assignor == RANGE for member in members)
        if not uses_range and len({member.subscribed for member in members}) == 1:
            return self._uniform(group, topics)
        turn = 0
        for topic in topics:
            count = self._partitions_of(topic)
            if not count:
                continue
            subscribers = [member.member_id for member in members if topic in member.subscribed]
            if uses_range:
                share, extra = divmod(count, len(subscribers))
                start = 0
                for index, member_id in enumerate(subscribers):
                    size = share + (1 if index < extra else 0)
                    target[member_id][topic] = set(range(start, start + size))
                    start += size
            else:
                for partition in range(count):
                    member_id = subscribers[turn % len(subscribers)]
                    target[member_id].setdefault(topic, set()).add(partition)
                    turn += 1
        return {
            member_id: {topic: frozenset(parts) for topic, parts in assigned.items() if parts}
            for member_id, assigned in target.items()
        }

    def _uniform(self, group: ConsumerGroup, topics: list[str]) -> dict[str, Assignment]:
        """Kafka's uniform assignor where every member subscribes to the same topics (its
        UniformHomogeneousAssignmentBuilder): each member's share is the partitions over the
        members, the first members (in the order Kafka's HashMap of member ids gives them)
        one more while some are left; a member keeps what its last target gave it up to its
        share, and the partitions no one keeps go to the members short of theirs, in that
        order, each filled before the next. Topics come in name order (Kafka's come in the
        order of its random topic ids)."""
        counts = {topic: self._partitions_of(topic) or 0 for topic in topics}
        counts = {topic: count for topic, count in counts.items() if count}
        order = java_hash_map_order(list(group.members))
        kept = {
            member_id: {
                topic: partitions
                for topic, partitions in group.target.get(member_id, {}).items()
                if topic in counts
            }
            for member_id in order
        }
        taken = {
            (topic, p) for assigned in kept.values() for topic, ps in assigned.items() for p in ps
        }
        free = [
            (topic, partition)
            for topic, count in counts.items()
            for partition in range(count)
            if (topic, partition) not in taken
        ]
        share, extra = divmod(sum(counts.values()), len(order))
        target: dict[str, dict[str, set[int]]] = {}
        short: list[tuple[str, int]] = []
        for member_id in order:
            quota = share + (1 if extra > 0 else 0)
            extra -= 1
            mine: dict[str, set[int]] = {}
            for topic, partitions in sorted(kept[member_id].items()):
                for partition in sorted(partitions):
                    if quota > 0:
                        mine.setdefault(topic, set()).add(partition)
                        quota -= 1
                    else:
                        free.append((topic, partition))
            target[member_id] = mine
            if quota > 0:
                short.append((member_id, quota))
        given = iter(free)
        for member_id, quota in short:
            for topic, partition in itertools.islice(given, quota):
                target[member_id].setdefault(topic, set()).add(partition)
        return {
            member_id: {topic: frozenset(parts) for topic, parts in assigned.items() if parts}
            for member_id, assigned in target.items()
        }

    def _expire(self, group: ConsumerGroup) -> None:
        now = self._clock()
        gone = [
            member_id
            for member_id, member in group.members.items()
            if now - member.last_heartbeat > self.session_timeout_ms / 1000
            and member.last_heartbeat
        ]
        for member_id in gone:
            del group.members[member_id]
        if gone:
            group.epoch += 1

    def get(self, group_id: str) -> ConsumerGroup | None:
        """The group of that id, without the members whose sessions have run out (Kafka
        removes them by timer; here they go when their group is next looked at)."""
        group = self.groups.get(group_id)
        if group is not None:
            self._expire(group)
        return group

    def take_if_empty(self, group_id: str) -> dict[str, dict[int, CommittedOffset]] | None:
        """The offsets of a consumer group with no members, which goes, so that a classic
        group takes its place ({} for no such group); None while it has members."""
        group = self.get(group_id)
        if group is None:
            return {}
        if group.members:
            return None
        del self.groups[group_id]
        return group.offsets

    def adopt(self, group_id: str, offsets: dict[str, dict[int, CommittedOffset]]) -> None:
        """Start a consumer group with a classic group's committed offsets."""
        if offsets and group_id not in self.groups:
            self.groups[group_id] = ConsumerGroup(group_id, offsets=offsets)

    def list(self, states: Iterable[str]) -> list[ConsumerGroup]:
        wanted = {state.strip().lower() for state in states}
        return [
            group for group in self.groups.values() if not wanted or group.state.lower() in wanted
        ]


def java_hash_map_order(keys: list[str]) -> list[str]:
    """String keys in the order a java.util.HashMap they were put into in this order
    iterates them: by bucket (the hash's high half folded into its low, masked by the
    table's size, 16 doubled while more than three quarters full), then as put."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        hashed = java_string_hash(key) & 0xFFFFFFFF
        return (hashed ^ (hashed >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)
