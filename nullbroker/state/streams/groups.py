"""Streams groups (KIP-1071, `group.protocol=streams`): Kafka Streams' own group protocol, in
which the broker knows the application's topology and assigns its tasks, as Kafka 4.4 serves
it (checked against a 4.4.0 node, research notes of 2026-11-29).

A member (a stream thread) joins with epoch 0, its process id and the topology. The group
keeps the first topology it is given; the internal topics it needs are created
(topology.py says which) and the group is NotReady until they exist. A group starts at epoch 1
and every change of its members or of the topics it reads moves the epoch; the target
assignment (assignor.py) is made again when the epoch has moved, at most once an assignment
interval, and not before the initial rebalance delay has passed since the first member of an
empty group joined (until then its members are at the group's assignment epoch with no
tasks). Each heartbeat moves its member towards its target (reconciliation.py). Members
leave with epoch -1 (-2: a static member, for a while) or when they stop heartbeating for the
session timeout. Offsets are committed with member epochs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar

from kio.schema.errors import ErrorCode

from ..groups.consumer import LEAVE_EPOCH, STATIC_LEAVE_EPOCH, HeartbeatError
from ..groups.member_epochs import FIRST_COMMIT_VERSION_FOR_MEMBERS, commit_error, fetch_error
from ..groups.model import STREAMS_GROUP_TYPE
from ..groups.offsets import CommittedOffset
from .assignor import AssignorMember, Task, TaskAssignment, Tasks, as_tasks, assign
from .reconciliation import Holdings, MemberState, Tasks3, reconcile, released
from .topology import ConfiguredTopology, Status, StatusDetail, TopicInfo, Topology, configure

if TYPE_CHECKING:
    from ..share.configs import GroupConfigs

ASSIGNOR_NAME = "sticky"
INITIAL_DELAY_DETAIL = "Assignment delayed due to the configured initial rebalance delay."
INTERVAL_DELAY_DETAIL = "Assignment delayed due to the configured assignment interval."
FIRST_EPOCH = 1
"""A new group's epoch and assignment epoch (Kafka's StreamsGroup starts both at 1)."""
STATE_FILTERS = {
    "Empty": "empty",
    "NotReady": "not_ready",
    "Assigning": "assigning",
    "Reconciling": "reconciling",
    "Stable": "stable",
    "Dead": "dead",
}
"""Each state's name in ListGroups' states filter."""


@dataclass(slots=True)
class StreamsMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    topology_epoch: int = -1
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Tasks3 = field(default_factory=Tasks3)
    """What the member runs, as far as the coordinator knows."""
    revoking: Tasks3 = field(default_factory=Tasks3)
    """Tasks it was told to give up and has not yet said it gave up."""
    active_since: dict[Task, int] = field(default_factory=dict)
    """The assignment epoch at which it was given each active task (a commit at an older
    epoch is taken for the partitions of tasks it has run since)."""
    task_offsets: tuple[tuple[str, int, int], ...] = ()
    task_end_offsets: tuple[tuple[str, int, int], ...] = ()
    last_heartbeat: float = 0.0

    @property
    def owned(self) -> TaskAssignment:
        return self.assigned.as_assignment()


@dataclass(slots=True)
class StreamsGroup:
    GROUP_TYPE: ClassVar[str] = STREAMS_GROUP_TYPE
    group_id: str
    epoch: int = FIRST_EPOCH
    assignment_epoch: int = FIRST_EPOCH
    topology: Topology | None = None
    configured: ConfiguredTopology | None = None
    members: dict[str, StreamsMember] = field(default_factory=dict)
    target: dict[str, TaskAssignment] = field(default_factory=dict)
    assigned_at: float | None = None
    """When the target was last made (None: never; the interval does not hold it back)."""
    delayed_until: float = 0.0
    """The end of the initial rebalance delay, from the first member of an empty group."""
    shutdown_by: str | None = None
    """The member that asked the application to shut down, until the group is empty."""
    endpoint_epoch: int = 0
    """Moves when a member with an endpoint changes it or its tasks: members serving
    interactive queries learn where every task runs when theirs is older."""
    offsets: dict[str, dict[int, CommittedOffset]] = field(default_factory=dict)
    rebalances: int = 0
    """Target assignments made for the group (the accounts' count)."""

    @property
    def state(self) -> str:
        """As Kafka names a streams group's state (StreamsGroup.StreamsGroupState)."""
        if not self.members:
            return "Empty"
        if self.configured is None or not self.configured.ready:
            return "NotReady"
        if self.assignment_epoch < self.epoch:
            return "Assigning"
        if any(
            member.state is not MemberState.STABLE or member.epoch != self.assignment_epoch
            for member in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    def source_topics(self) -> set[str]:
        if self.topology is None:
            return set()
        return {topic for sub in self.topology.subtopologies for topic in sub.sources()}

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return bool(self.members) and topic in self.source_topics()

    def holdings(self) -> Holdings:
        return Holdings.of(
            (member.member_id, member.process_id, member.assigned, member.revoking)
            for member in self.members.values()
        )

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
        """May an OffsetCommit or TxnOffsetCommit commit `partitions`? As Kafka 4.4 answers
        a streams group: a member at its epoch; at an older epoch, only partitions of tasks
        it has run (or is giving up) since then; no member only while the group is empty."""
        return commit_error(
            self.members,
            member_id,
            member_epoch,
            group_instance_id,
            transactional=transactional,
            api_version=api_version,
            held_since=lambda member, epoch: self._ran_since(member, epoch, partitions),
        )

    def _ran_since(
        self, member: StreamsMember, epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> bool:
        asked = list(partitions)
        if not asked or self.topology is None:
            return False
        for topic, partition in asked:
            tasks = [
                (sub.subtopology_id, partition)
                for sub in self.topology.subtopologies
                if topic in sub.sources()
            ]
            if not any(
                member.active_since.get(task, epoch + 1) <= epoch or task in member.revoking.active
                for task in tasks
            ):
                return False
        return True

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        return fetch_error(self.members, member_id, member_epoch)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What a member sent, as the coordinator needs it."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    topology: Topology | None
    active: Tasks | None
    standby: Tasks | None
    warmup: Tasks | None
    process_id: str | None
    user_endpoint: tuple[str, int] | None
    client_tags: tuple[tuple[str, str], ...] | None
    task_offsets: tuple[tuple[str, int, int], ...] | None
    task_end_offsets: tuple[tuple[str, int, int], ...] | None
    shutdown_application: bool
    endpoint_epoch: int
    client_id: str
    client_host: str

    def owned(self) -> Tasks3 | None:
        """What the member says it runs: None unless it sent all three kinds."""
        if self.active is None or self.standby is None or self.warmup is None:
            return None
        return Tasks3.of(TaskAssignment(self.active, self.standby, self.warmup))


@dataclass(frozen=True, slots=True)
class Answer:
    """What a heartbeat is answered: the member after it, its tasks (None: unchanged, not
    sent), the statuses it is told, the group's endpoint epoch and, when the member's is
    older, the partitions each endpoint serves (active, standby: partitions by topic)."""

    member: StreamsMember
    assignment: TaskAssignment | None
    statuses: tuple[StatusDetail, ...] = ()
    endpoint_epoch: int = 0
    endpoints: tuple[tuple[tuple[str, int], Tasks, Tasks], ...] | None = None


@dataclass(frozen=True, slots=True)
class StreamsSettings:
    """A group's numbers, read from its group configs at each heartbeat."""

    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    num_standby_replicas: int = 0
    initial_rebalance_delay_ms: int = 3000
    assignment_interval_ms: int = 1000


def streams_settings(configs: GroupConfigs, group_id: str) -> StreamsSettings:
    """A group's streams.* group configs, set on it or the broker's."""
    return StreamsSettings(
        heartbeat_interval_ms=configs.int_value(group_id, "streams.heartbeat.interval.ms"),
        session_timeout_ms=configs.int_value(group_id, "streams.session.timeout.ms"),
        num_standby_replicas=configs.int_value(group_id, "streams.num.standby.replicas"),
        initial_rebalance_delay_ms=configs.int_value(
            group_id, "streams.initial.rebalance.delay.ms"
        ),
        assignment_interval_ms=configs.int_value(group_id, "streams.assignment.interval.ms"),
    )


class StreamsGroups:
    """Every streams group of this coordinator."""

    def __init__(
        self,
        partitions_of: Callable[[str], int | None],
        create_topic: Callable[[str, int, TopicInfo], None],
        settings: Callable[[str], StreamsSettings] = lambda group_id: StreamsSettings(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._partitions_of = partitions_of
        self._create_topic = create_topic
        """Create an internal topic: (name, partitions, as the topology describes it)."""
        self.settings = settings
        self._clock = clock
        self.groups: dict[str, StreamsGroup] = {}

    def heartbeat(self, beat: Heartbeat) -> Answer:
        """Apply one heartbeat. Raises HeartbeatError."""
        group = self.groups.get(beat.group_id)
        created = group is None
        settings = self.settings(beat.group_id)
        now = self._clock()
        if group is None:
            if beat.member_epoch != 0:
                if beat.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                    message = f"Group {beat.group_id} not found."
                else:
                    message = f"Streams group {beat.group_id} not found."
                raise HeartbeatError(ErrorCode.group_id_not_found, message)
            group = StreamsGroup(beat.group_id)
        else:
            self._expire(group, settings, now)
        if beat.shutdown_application and group.shutdown_by is None:
            group.shutdown_by = beat.member_id
        if beat.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, beat)
        if beat.member_epoch == 0 and not group.members:
            group.delayed_until = now + settings.initial_rebalance_delay_ms / 1000
        member, endpoint_moved = self._member(group, beat)
        if created:
            self.groups[beat.group_id] = group
        member.last_heartbeat = now
        statuses = self._configure(group)
        delay = self._maybe_assign(group, settings, now)
        before = member.assigned
        self._reconcile(group, member, beat.owned())
        changed = member.assigned != before
        if not created and ((changed and member.user_endpoint is not None) or endpoint_moved):
            group.endpoint_epoch += 1
        told: list[StatusDetail] = []
        if group.topology is not None and member.topology_epoch < group.topology.epoch:
            told.append(
                StatusDetail(
                    Status.STALE_TOPOLOGY,
                    f"The member's topology epoch {member.topology_epoch} is behind the "
                    f"group's topology epoch {group.topology.epoch}.",
                )
            )
        if delay is not None:
            told.append(StatusDetail(Status.ASSIGNMENT_DELAYED, delay))
        told += statuses
        if group.shutdown_by is not None:
            told.append(
                StatusDetail(
                    Status.SHUTDOWN_APPLICATION,
                    f"Streams group member {group.shutdown_by} encountered a fatal error and "
                    "requested a shutdown for the entire application.",
                )
            )
        # The group's endpoint epoch, but 0 to the request that made the group (Kafka's).
        endpoint_epoch = 0 if created else group.endpoint_epoch
        endpoints = None
        if beat.endpoint_epoch != endpoint_epoch or (created and member.user_endpoint):
            endpoints = self._endpoints(group, member)
        sent = member.assigned.as_assignment() if beat.member_epoch == 0 or changed else None
        return Answer(member, sent, tuple(told), endpoint_epoch, endpoints)

    def _leave(self, group: StreamsGroup, beat: Heartbeat) -> Answer:
        member = group.members.get(beat.member_id)
        if member is None:
            raise HeartbeatError(
                ErrorCode.unknown_member_id,
                f"Member {beat.member_id} is not a member of group {group.group_id}.",
            )
        if beat.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # Gone for a while: its tasks wait for its instance, the group's epoch unmoved.
            member.epoch = STATIC_LEAVE_EPOCH
            member.revoking = Tasks3()
            return Answer(member, None)
        self._remove(group, beat.member_id)
        return Answer(replace(member, epoch=LEAVE_EPOCH), None)

    def _remove(self, group: StreamsGroup, member_id: str) -> None:
        del group.members[member_id]
        group.target.pop(member_id, None)
        group.epoch += 1
        if not group.members:
            # As Kafka: an empty group is assigned (nothing) at its new epoch.
            group.assignment_epoch = group.epoch
            group.assigned_at = None
            group.shutdown_by = None

    def _member(self, group: StreamsGroup, beat: Heartbeat) -> tuple[StreamsMember, bool]:
        """The member after what the heartbeat says of it, and whether its endpoint moved."""
        member = group.members.get(beat.member_id)
        if beat.member_epoch == 0:
            member = self._joining(group, beat, member)
            changed = True
        elif member is None:
            raise HeartbeatError(
                ErrorCode.unknown_member_id,
                f"Member {beat.member_id} is not a member of group {group.group_id}.",
            )
        else:
            self._check_epoch(member, beat)
            changed = False
        before = (member.rack_id, member.client_id, member.client_host,
                  member.rebalance_timeout_ms, member.process_id, member.user_endpoint,
                  member.client_tags)  # fmt: skip
        endpoint = member.user_endpoint
        if beat.process_id is not None:
            member.process_id = beat.process_id
        if beat.user_endpoint is not None or beat.member_epoch == 0:
            member.user_endpoint = beat.user_endpoint
        if beat.client_tags is not None:
            member.client_tags = beat.client_tags
        if beat.rack_id is not None:
            member.rack_id = beat.rack_id
        if beat.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = beat.rebalance_timeout_ms
        member.client_id, member.client_host = beat.client_id, beat.client_host
        if beat.task_offsets is not None:
            member.task_offsets = tuple(sorted(beat.task_offsets))
        if beat.task_end_offsets is not None:
            member.task_end_offsets = tuple(sorted(beat.task_end_offsets))
        after = (member.rack_id, member.client_id, member.client_host,
                 member.rebalance_timeout_ms, member.process_id, member.user_endpoint,
                 member.client_tags)  # fmt: skip
        if changed or before != after:
            group.epoch += 1
        return member, member.user_endpoint != endpoint

    def _joining(
        self, group: StreamsGroup, beat: Heartbeat, member: StreamsMember | None
    ) -> StreamsMember:
        assert beat.topology is not None  # the handler refuses a join without one
        if group.topology is None:
            group.topology = beat.topology
        elif beat.topology.epoch >= group.topology.epoch and beat.topology != group.topology:
            raise HeartbeatError(
                ErrorCode.invalid_request, "Topology updates are not supported yet."
            )
        previous = self._static_member(group, beat)
        if member is None:
            member = StreamsMember(
                beat.member_id,
                beat.instance_id,
                beat.rack_id,
                beat.client_id,
                beat.client_host,
                beat.rebalance_timeout_ms,
            )
            if previous is not None:
                # The same instance, back: it takes over what its predecessor had.
                del group.members[previous.member_id]
                member.assigned, member.active_since = previous.assigned, previous.active_since
                if previous.member_id in group.target:
                    group.target[member.member_id] = group.target.pop(previous.member_id)
            group.members[member.member_id] = member
        member.topology_epoch = beat.topology.epoch
        return member

    @staticmethod
    def _check_epoch(member: StreamsMember, beat: Heartbeat) -> None:
        if beat.member_epoch == member.epoch:
            return
        owned = beat.owned()
        if (
            beat.member_epoch < member.epoch
            and beat.member_epoch == member.previous_epoch
            and owned is not None
            and owned.all() <= member.assigned.all()
        ):
            return
        relation = "greater" if beat.member_epoch > member.epoch else "smaller"
        raise HeartbeatError(
            ErrorCode.fenced_member_epoch,
            f"The streams group member has a {relation} member epoch ({beat.member_epoch}) "
            f"than the one known by the group coordinator ({member.epoch}). The member must "
            "abandon all its partitions and rejoin.",
        )

    @staticmethod
    def _static_member(group: StreamsGroup, beat: Heartbeat) -> StreamsMember | None:
        if beat.instance_id is None:
            return None
        for member in group.members.values():
            if member.instance_id == beat.instance_id and member.member_id != beat.member_id:
                if member.epoch != STATIC_LEAVE_EPOCH:
                    raise HeartbeatError(
                        ErrorCode.unreleased_instance_id,
                        f"Static member {beat.member_id} with instance id {beat.instance_id} "
                        f"cannot join the group because the instance id is owned by "
                        f"{member.member_id} member.",
                    )
                return member
        return None

    def _configure(self, group: StreamsGroup) -> list[StatusDetail]:
        """The topology against the topics now. The internal topics it lacks are created,
        as Kafka's broker has its controller create them: they count from the next
        heartbeat on. A change of what the topics make of it moves the group's epoch."""
        if group.topology is None:
            return []
        configured = configure(group.topology, self._partitions_of)
        for name, (partitions, info) in configured.to_create.items():
            self._create_topic(name, partitions, info)
        previous = group.configured
        group.configured = configured
        if previous is not None and (previous.tasks, previous.ready) != (
            configured.tasks,
            configured.ready,
        ):
            group.epoch += 1
        return list(configured.statuses)

    def _maybe_assign(
        self, group: StreamsGroup, settings: StreamsSettings, now: float
    ) -> str | None:
        """Make the target assignment again if the group's epoch moved since it was made;
        why it is delayed, if it is."""
        if now < group.delayed_until:
            for member_id in group.members:
                group.target.setdefault(member_id, TaskAssignment())
            return INITIAL_DELAY_DETAIL
        if group.assignment_epoch >= group.epoch:
            return None
        if group.assigned_at is not None and now < group.assigned_at + (
            settings.assignment_interval_ms / 1000
        ):
            return INTERVAL_DELAY_DETAIL
        configured = group.configured
        ready = configured is not None and configured.ready and group.topology is not None
        tasks = configured.tasks if ready and configured is not None else {}
        stateful = frozenset(
            sub.subtopology_id
            for sub in (group.topology.subtopologies if group.topology else ())
            if sub.changelog_topics
        )
        members = [
            AssignorMember(
                member.member_id,
                member.process_id,
                as_tasks(member.assigned.active),
                as_tasks(member.assigned.standby),
                {(sub, partition): offset for sub, partition, offset in member.task_offsets},
            )
            for member in group.members.values()
        ]
        group.target = assign(members, tasks, settings.num_standby_replicas, stateful)
        group.assignment_epoch = group.epoch
        group.assigned_at = now
        group.rebalances += 1
        return None

    def _reconcile(self, group: StreamsGroup, member: StreamsMember, owned: Tasks3 | None) -> None:
        target_epoch = group.assignment_epoch
        if member.state is MemberState.STABLE and member.epoch == target_epoch:
            return
        if member.state is MemberState.UNREVOKED_TASKS and not released(member.revoking, owned):
            return
        target = Tasks3.of(group.target.get(member.member_id) or TaskAssignment())
        step = reconcile(
            member.member_id,
            member.process_id,
            member.epoch,
            member.assigned,
            target,
            target_epoch,
            group.holdings(),
            owned,
        )
        for task in step.assigned.active - member.assigned.active:
            member.active_since[task] = target_epoch
        for task in member.assigned.active - step.assigned.active:
            member.active_since.pop(task, None)
        if step.epoch != member.epoch:
            member.previous_epoch = member.epoch
        member.epoch, member.state = step.epoch, step.state
        member.assigned, member.revoking = step.assigned, step.revoking

    def _endpoints(
        self, group: StreamsGroup, asking: StreamsMember
    ) -> tuple[tuple[tuple[str, int], Tasks, Tasks], ...]:
        """Each member's endpoint with the partitions it serves, active and standby: the
        other members' first, the asking member's last, as Kafka lists them."""
        assert group.topology is not None
        subtopologies = {sub.subtopology_id: sub for sub in group.topology.subtopologies}

        def partitions(tasks: set[Task]) -> Tasks:
            by_topic: dict[str, set[int]] = {}
            for sub_id, partition in tasks:
                sub = subtopologies.get(sub_id)
                for topic in sub.sources() if sub is not None else ():
                    if partition < (self._partitions_of(topic) or 0):
                        by_topic.setdefault(topic, set()).add(partition)
            return {topic: frozenset(parts) for topic, parts in by_topic.items()}

        members = [m for m in group.members.values() if m is not asking] + [asking]
        return tuple(
            (
                member.user_endpoint,
                partitions(member.assigned.active),
                partitions(member.assigned.standby | member.assigned.warmup),
            )
            for member in members
            if member.user_endpoint is not None
        )

    def _expire(self, group: StreamsGroup, settings: StreamsSettings, now: float) -> None:
        for member_id, member in list(group.members.items()):
            if now - member.last_heartbeat > settings.session_timeout_ms / 1000:
                self._remove(group, member_id)

    def get(self, group_id: str) -> StreamsGroup | None:
        group = self.groups.get(group_id)
        if group is not None:
            self._expire(group, self.settings(group_id), self._clock())
        return group

    def take_if_empty(self, group_id: str) -> dict[str, dict[int, CommittedOffset]] | None:
        """The offsets of a streams group with no members, which goes ({} for no such
        group); None while it has members."""
        group = self.get(group_id)
        if group is None:
            return {}
        if group.members:
            return None
        del self.groups[group_id]
        return group.offsets

    def adopt(self, group_id: str, offsets: dict[str, dict[int, CommittedOffset]]) -> None:
        """Start a streams group with an empty group's committed offsets."""
        if group_id not in self.groups and offsets:
            self.groups[group_id] = StreamsGroup(group_id, offsets=offsets)

    def list(self, states: Iterable[str]) -> list[StreamsGroup]:
        wanted = {state.strip().lower() for state in states}
        return [
            group
            for group in self.groups.values()
            if not wanted or STATE_FILTERS[group.state] in wanted
        ]
