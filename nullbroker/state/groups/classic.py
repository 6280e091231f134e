"""Consumer groups, classic protocol, in memory: Kafka's group state machine, and the
coordinator the handlers and Broker ask about groups of either protocol.

This follows Apache Kafka's classic group coordinator (GroupMetadataManager and ClassicGroup
in the group-coordinator module): the same states, transitions, timers and error codes, so
clients rebalance against nullbroker exactly as they would against Kafka. Nothing is written
to a log: a group lives in memory until DeleteGroups removes it.

Requests that wait (a JoinGroup until the join phase completes, a SyncGroup until the
leader's assignment arrives) get a `Reply` that the coordinator fills in later. Timers (the
initial rebalance delay, rebalance and sync timeouts, member sessions) fire in `run()`, which
the server runs for the broker's life; while it is not running, JoinGroup and SyncGroup are
answered COORDINATOR_NOT_AVAILABLE, as Kafka answers them while its coordinator is inactive.

The pieces around the state machine are modules of their own: the group and its members
(model.py), the replies (replies.py), the timers (timers.py), the offset APIs' rules
(commits.py) and the administration's answers (listing.py). The coordinator finds and
creates groups and hands them to those.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio
from kio.schema.errors import ErrorCode

from ...stats import BrokerStats, GroupSnapshot
from . import commits, listing
from .listing import DescribedGroup, ListedGroup
from .model import (
    DEFAULT_INITIAL_REBALANCE_DELAY_MS,
    MAX_SESSION_TIMEOUT_MS,
    MIN_SESSION_TIMEOUT_MS,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    VALID_PREVIOUS,
    Group,
    GroupState,
    JoinResult,
    LeavingMember,
    Member,
    Protocols,
    SyncResult,
)
from .offsets import CommittedOffset
from .replies import Reply
from .timers import TimerKey, Timers

if TYPE_CHECKING:
    from .consumer import ConsumerGroup, ConsumerGroups

log = logging.getLogger("nullbroker")


class GroupCoordinator:
    """Every classic group and its committed offsets; this node coordinates them all."""

    def __init__(
        self,
        stats: BrokerStats,
        initial_rebalance_delay_ms: int = DEFAULT_INITIAL_REBALANCE_DELAY_MS,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.stats = stats
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._clock = clock
        self._groups: dict[str, Group] = {}
        self.consumer_groups: ConsumerGroups | None = None
        """The new protocol's groups (KIP-848): they share the group ids, the offset APIs
        and ListGroups with the classic ones."""
        self._timers = Timers()
        self._active = False
        self._wake = trio.Event()
        self._sleeping_until = math.inf

    # Running the timers.

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fire timers when due, until cancelled. Then answer every parked request with
        NOT_COORDINATOR, as Kafka does when a coordinator unloads, so no connection waits
        for an answer that would never come."""
        self._active = True
        task_status.started()
        try:
            while True:
                while (action := self._timers.pop_due(self._clock())) is not None:
                    try:
                        action()
                    except Exception:
                        # A bug of ours must cost one group's timer, never the broker.
                        log.exception("group coordinator timer failed")
                self._wake = trio.Event()
                self._sleeping_until = self._timers.next_deadline()
                with trio.move_on_at(self._sleeping_until):
                    await self._wake.wait()
        finally:
            self._active = False
            self._unload()

    def start_in(self, nursery: trio.Nursery) -> None:
        """Run the timers in `nursery`, taking requests from now on: a coordinator made by
        a group request answers it, where run() would take requests from its first step."""
        self._active = True
        nursery.start_soon(self.run)

    def _unload(self) -> None:
        for group in self._groups.values():
            self._tell_members_not_coordinator(group)

    def _tell_members_not_coordinator(self, group: Group) -> None:
        for member in group.members.values():
            self._give_join(member, JoinResult(ErrorCode.not_coordinator, member.member_id))
            self._give_sync(member, SyncResult(ErrorCode.not_coordinator))

    def _schedule(self, key: TimerKey, delay_ms: float, action: Callable[[], None]) -> None:
        deadline = self._clock() + delay_ms / 1000
        self._timers.schedule(key, deadline, action)
        if deadline < self._sleeping_until:
            self._wake.set()

    def _schedule_heartbeat(self, group: Group, member_id: str, timeout_ms: float) -> None:
        self._schedule(
            ("heartbeat", group.group_id, member_id),
            timeout_ms,
            lambda: self._expire_heartbeat(group.group_id, member_id),
        )

    def _cancel_heartbeat(self, group: Group, member_id: str) -> None:
        self._timers.cancel(("heartbeat", group.group_id, member_id))

    def _reschedule_heartbeat(self, group: Group, member: Member) -> None:
        self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    # Groups and their states.

    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def find(self, group_id: str) -> Group | ConsumerGroup | None:
        """The group of that id, of either protocol: classic groups and the new protocol's
        (KIP-848) share their ids, their offsets' APIs and the administration's. Every
        request that is not one protocol's own looks its group up here."""
        group = self._groups.get(group_id)
        if group is None and self.consumer_groups is not None:
            return self.consumer_groups.get(group_id)
        return group

    def _create(self, group_id: str) -> Group:
        group = self._groups[group_id] = Group(group_id)
        self.stats.groups[group.state.value] += 1
        return group

    def _transition(self, group: Group, state: GroupState) -> None:
        if group.state not in VALID_PREVIOUS[state]:
            raise RuntimeError(
                f"group {group.group_id}: no transition from {group.state} to {state}"
            )
        if group.state is not GroupState.DEAD:
            self.stats.groups[group.state.value] -= 1
        if state is not GroupState.DEAD:
            self.stats.groups[state.value] += 1
        group.previous_state, group.state = group.state, state

    # Parked requests.

    @staticmethod
    def _park_join(member: Member, reply: Reply[JoinResult]) -> None:
        if member.joining is not None and member.joining is not reply:
            # Kafka forgets a JoinGroup superseded by another from the same member (on
            # another connection); answering it lets its connection move on.
            member.joining.give(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        member.joining = reply

    @staticmethod
    def _give_join(member: Member, result: JoinResult) -> None:
        if member.joining is not None:
            member.joining.give(result)
            member.joining = None

    @staticmethod
    def _give_sync(member: Member, result: SyncResult) -> None:
        if member.syncing is not None:
            member.syncing.give(result)
            member.syncing = None

    def _forget(self, group: Group, member: Member) -> None:
        """Remove a member; a JoinGroup it is parked on gets UNKNOWN_MEMBER_ID, so the
        client joins again if it is still there."""
        self._give_join(member, JoinResult(ErrorCode.unknown_member_id, ""))
        # Kafka leaves a parked SyncGroup of a removed member unanswered until the client
        # gives up; answering it frees its connection.
        self._give_sync(member, SyncResult(ErrorCode.unknown_member_id))
        self._cancel_heartbeat(group, member.member_id)
        group.remove(member.member_id)

    # JoinGroup.

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
        if not self._active:
            return Reply.now(JoinResult(ErrorCode.coordinator_not_available, member_id))
        if not group_id:
            return Reply.now(JoinResult(ErrorCode.invalid_group_id, member_id))
        if not MIN_SESSION_TIMEOUT_MS <= session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            return Reply.now(JoinResult(ErrorCode.invalid_session_timeout, member_id))
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                return Reply.now(JoinResult(ErrorCode.unknown_member_id, member_id))
            consumer = self.consumer_groups
            offsets = consumer.take_if_empty(group_id) if consumer is not None else {}
            if offsets is None:  # a consumer group with members: not for this protocol
                return Reply.now(JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
            group = self._create(group_id)
            group.offsets = offsets  # an empty consumer group becomes a classic one
        request = _JoinRequest(
            member_id,
            group_instance_id,
            protocol_type,
            _unique_by_name(protocols),
            session_timeout_ms,
            rebalance_timeout_ms,
            client_id,
            client_host,
            supports_skip_assignment,
        )
        reply: Reply[JoinResult] = Reply()
        if not member_id:
            self._join_new_member(group, request, reply, require_known_member_id)
        else:
            self._join_existing_member(group, request, reply)
        return reply

    def _join_new_member(
        self, group: Group, request: _JoinRequest, reply: Reply[JoinResult], require_known: bool
    ) -> None:
        if group.state is GroupState.DEAD:
            reply.give(JoinResult(ErrorCode.coordinator_not_available, ""))
            return
        if not group.supports_protocols(request.protocol_type, request.protocol_names):
            reply.give(JoinResult(ErrorCode.inconsistent_group_protocol, ""))
            return
        prefix = (
            request.group_instance_id
            if request.group_instance_id is not None
            else request.client_id
        )
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        if request.group_instance_id is not None:
            existing = group.static_members.get(request.group_instance_id)
            if existing is not None:
                self._replace_static_member(group, request, existing, new_member_id, reply)
            else:
                self._add_member(group, request, new_member_id, reply)
        elif require_known:
            # KIP-394: the member must come back with the id it is given, so that a client
            # whose first JoinGroup times out does not leave an unknown member behind.
            group.pending_join.add(new_member_id)
            self._schedule_heartbeat(group, new_member_id, request.session_timeout_ms)
            reply.give(JoinResult(ErrorCode.member_id_required, new_member_id))
        else:
            self._add_member(group, request, new_member_id, reply)

    def _join_existing_member(
        self, group: Group, request: _JoinRequest, reply: Reply[JoinResult]
    ) -> None:
        member_id = request.member_id
        if group.state is GroupState.DEAD:
            reply.give(JoinResult(ErrorCode.coordinator_not_available, member_id))
            return
        if not group.supports_protocols(request.protocol_type, request.protocol_names):
            reply.give(JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if member_id in group.pending_join:
            if request.group_instance_id is not None:
                # Kafka treats this as a state it cannot be in (a pending member is dynamic).
                reply.give(JoinResult(ErrorCode.unknown_server_error, member_id))
                return
            self._add_member(group, request, member_id, reply)
            return
        error = group.validate_member(member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            reply.give(JoinResult(error, member_id))
            return
        member = group.members[member_id]
        same_metadata = member.protocols == request.protocols
        if group.state is GroupState.PREPARING_REBALANCE or (
            group.state is GroupState.COMPLETING_REBALANCE and not same_metadata
        ):
            self._update_member_then_rebalance(group, member, request, reply)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            # Same metadata: the member probably missed its JoinGroup answer; repeat it.
            reply.give(self._current_generation(group, member_id, with_members=True))
        elif group.state is GroupState.STABLE:
            if group.is_leader(member_id) or not same_metadata:
                # A leader rejoins to have the group reassigned (e.g. topic metadata changed).
                self._update_member_then_rebalance(group, member, request, reply)
            else:
                reply.give(self._current_generation(group, member_id, with_members=False))
        else:
            reply.give(JoinResult(ErrorCode.unknown_member_id, member_id))

    def _current_generation(
        self, group: Group, member_id: str, *, with_members: bool
    ) -> JoinResult:
        return JoinResult(
            ErrorCode.none,
            member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            group.joined_members() if with_members and group.is_leader(member_id) else (),
        )

    def _add_member(
        self, group: Group, request: _JoinRequest, member_id: str, reply: Reply[JoinResult]
    ) -> None:
        member = Member(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            request.protocols,
            joining=reply,
            is_new=True,
        )
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.previous_state is GroupState.EMPTY
        ):
            group.new_member_added = True
        group.add(member)
        # A new member cannot heartbeat before its first JoinGroup answer, and its parked
        # request cannot show that the client left: it expires after a long fixed timeout.
        self._schedule_heartbeat(group, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_then_rebalance(
        self, group: Group, member: Member, request: _JoinRequest, reply: Reply[JoinResult]
    ) -> None:
        group.update_protocols(member, request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        self._park_join(member, reply)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _replace_static_member(
        self,
        group: Group,
        request: _JoinRequest,
        old_member_id: str,
        new_member_id: str,
        reply: Reply[JoinResult],
    ) -> None:
        """A static member rejoined without its member id (a restart): the new id takes the
        old one's place and assignment, and whoever still uses the old id is fenced."""
        current_leader = group.leader_id or ""
        old = group.members.pop(old_member_id)
        self._give_join(old, JoinResult(ErrorCode.fenced_instance_id, old_member_id))
        self._give_sync(old, SyncResult(ErrorCode.fenced_instance_id))
        self._cancel_heartbeat(group, old_member_id)
        member = Member(
            new_member_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        group.members[new_member_id] = member
        if group.is_leader(old_member_id):
            group.leader_id = new_member_id
        assert request.group_instance_id is not None
        group.static_members[request.group_instance_id] = new_member_id
        self._reschedule_heartbeat(group, member)
        group.update_protocols(member, request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.joining = reply

        if group.state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Nothing changes for the group: no rebalance, the member keeps its
                # assignment. From v9 a rejoining leader is told to skip assigning.
                is_leader = group.is_leader(new_member_id)
                skip = request.supports_skip_assignment and is_leader
                self._give_join(
                    member,
                    JoinResult(
                        ErrorCode.none,
                        new_member_id,
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        (group.leader_id or "")
                        if request.supports_skip_assignment
                        else current_leader,
                        group.joined_members() if skip else (),
                        skip_assignment=skip,
                    ),
                )
            else:
                self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may have assigned to the old member id: assign again.
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    # The join phase.

    def _maybe_prepare_rebalance_or_complete_join(self, group: Group) -> None:
        if group.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]:
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: Group) -> None:
        # An initial rebalance always waits out its delay, to gather the members that start
        # together.
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.previous_state is not GroupState.EMPTY
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment(group, ErrorCode.rebalance_in_progress)
        group.pending_sync.clear()
        self._timers.cancel(("sync", group.group_id))
        initial = group.state is GroupState.EMPTY
        if initial:
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
        self._transition(group, GroupState.PREPARING_REBALANCE)
        log.info(
            "group %s: preparing to rebalance (generation %d)", group.group_id, group.generation_id
        )
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self._schedule_join_timeout(group)

    def _schedule_initial_join(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        group_id = group.group_id
        self._schedule(
            ("join", group_id),
            delay_ms,
            lambda: self._complete_initial_join(group_id, delay_ms, remaining_ms),
        )

    def _complete_initial_join(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        group = self._groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms:
            # Members are still arriving: wait once more, within the rebalance timeout.
            group.new_member_added = False
            next_delay = min(self.initial_rebalance_delay_ms, remaining_ms)
            self._schedule_initial_join(group, next_delay, max(remaining_ms - delay_ms, 0))
        else:
            self._complete_join(group)

    def _schedule_join_timeout(self, group: Group) -> None:
        group_id = group.group_id
        self._schedule(
            ("join", group_id), group.rebalance_timeout_ms(), lambda: self._join_timed_out(group_id)
        )

    def _join_timed_out(self, group_id: str) -> None:
        group = self._groups.get(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the join phase: members that did not rejoin in time are dropped (static ones
        are kept), and the next generation starts with everyone who did."""
        self._timers.cancel(("join", group.group_id))
        for member in list(group.members.values()):
            if member.joining is None and member.group_instance_id is None:
                self._cancel_heartbeat(group, member.member_id)
                group.remove(member.member_id)
        if group.state is GroupState.DEAD:
            return
        if not self._elect_joined_leader(group) and group.members:
            # Nobody rejoined: wait another rebalance timeout for sessions to expire.
            self._schedule_join_timeout(group)
            return
        group.generation_id += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.subscribed_topics = group.compute_subscribed_topics()
            self._transition(group, GroupState.COMPLETING_REBALANCE)
        else:
            group.protocol_name = None
            group.subscribed_topics = group.compute_subscribed_topics()
            self._transition(group, GroupState.EMPTY)
        group.pending_sync.clear()
        if group.state is GroupState.EMPTY:
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            return
        self.stats.rebalances += 1
        log.info(
            "group %s: generation %d with %d members",
            group.group_id,
            group.generation_id,
            len(group.members),
        )
        for member in group.members.values():
            self._give_join(
                member, self._current_generation(group, member.member_id, with_members=True)
            )
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group_id, generation = group.group_id, group.generation_id
        self._schedule(
            ("sync", group_id),
            group.rebalance_timeout_ms(),
            lambda: self._expire_pending_sync(group_id, generation),
        )

    @staticmethod
    def _elect_joined_leader(group: Group) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        if group.leader_id is None:
            return False
        if group.members[group.leader_id].joining is not None:
            return True
        for member in group.members.values():
            if member.joining is not None:
                group.leader_id = member.member_id
                return True
        return False

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self._groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if (
            group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            and group.pending_sync
        ):
            for member_id in list(group.pending_sync):
                self._cancel_heartbeat(group, member_id)
                group.remove(member_id)
            self._prepare_rebalance(group)

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return
        if member_id in group.pending_join:
            group.remove(member_id)
            if group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("group %s: member %s left no heartbeat within its session", group_id, member_id)
        self._remove_member_and_update_group(group, member)

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        self._forget(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(group)

    # SyncGroup.

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
        if not self._active:
            return Reply.now(SyncResult(ErrorCode.coordinator_not_available))
        if not group_id:
            return Reply.now(SyncResult(ErrorCode.invalid_group_id))
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.EMPTY:
            return Reply.now(SyncResult(ErrorCode.unknown_member_id))
        error = group.validate_member(member_id, group_instance_id)
        if error is ErrorCode.none and generation_id != group.generation_id:
            error = ErrorCode.illegal_generation
        if error is ErrorCode.none and (
            _inconsistent(protocol_type, group.protocol_type)
            or _inconsistent(protocol_name, group.protocol_name)
        ):
            error = ErrorCode.inconsistent_group_protocol
        if error is not ErrorCode.none:
            return Reply.now(SyncResult(error))
        if group.state is GroupState.PREPARING_REBALANCE:
            return Reply.now(SyncResult(ErrorCode.rebalance_in_progress))
        member = group.members[member_id]
        if group.state is GroupState.STABLE:
            self._remove_pending_sync(group, member_id)
            return Reply.now(self._assignment_of(group, member))
        reply: Reply[SyncResult] = Reply()
        if member.syncing is not None:
            # A SyncGroup superseded by another from the same member; see _park_join.
            member.syncing.give(SyncResult(ErrorCode.rebalance_in_progress))
        member.syncing = reply
        self._remove_pending_sync(group, member_id)
        if group.is_leader(member_id):
            assigned = dict(assignments)
            for each in group.members.values():
                each.assignment = assigned.get(each.member_id, b"")
            self._propagate_assignment(group, ErrorCode.none)
            self._transition(group, GroupState.STABLE)
        return reply

    @staticmethod
    def _assignment_of(group: Group, member: Member) -> SyncResult:
        return SyncResult(
            ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name
        )

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._timers.cancel(("sync", group.group_id))

    def _reset_and_propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            if member.syncing is None:
                continue
            if error is ErrorCode.none:
                self._give_sync(member, self._assignment_of(group, member))
            else:
                self._give_sync(member, SyncResult(error, member.assignment))
            # Sessions that ran out while members waited for the assignment start again.
            self._reschedule_heartbeat(group, member)

    # Heartbeat and LeaveGroup.

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        error = group.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.none:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.state is GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        self._reschedule_heartbeat(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

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
        if group.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available, []
        answers = []
        for member_id, instance_id in leaving:
            if not member_id:
                static_id = (
                    group.static_members.get(instance_id) if instance_id is not None else None
                )
                if static_id is None:
                    error = ErrorCode.unknown_member_id
                else:
                    self._forget(group, group.members[static_id])
                    error = ErrorCode.none
            elif member_id in group.pending_join:
                group.remove(member_id)
                self._cancel_heartbeat(group, member_id)
                error = ErrorCode.none
            else:
                error = group.validate_member(member_id, instance_id)
                if error is ErrorCode.none:
                    self._forget(group, group.members[member_id])
            answers.append(LeavingMember(member_id, instance_id, error))
        if any(answer.error is ErrorCode.none for answer in answers):
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group)
            elif group.state is GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group)
        return ErrorCode.none, answers

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
            group = self._create(group_id)
        error = group.validate_commit(
            member_id,
            generation_id,
            group_instance_id,
            transactional=transactional,
            api_version=api_version,
        )
        return error, group if error is ErrorCode.none else None

    def take_if_empty(self, group_id: str) -> dict[str, dict[int, CommittedOffset]] | None:
        """The committed offsets of a classic group with no members, which goes, so that
        a consumer group of the new protocol takes its place ({} for no such group);
        None while it has members."""
        group = self._groups.get(group_id)
        if group is None:
            return {}
        if group.members:
            return None
        del self._groups[group_id]
        self.stats.groups[group.state.value] -= 1
        return group.offsets

    commit = staticmethod(commits.commit)

    def commit_transaction_offsets(
        self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]
    ) -> None:
        """A committed transaction's offsets, taken when its TxnOffsetCommit was: they go
        to the group whatever its members did since, to a new group without members if it
        was deleted meanwhile (as Kafka replays them)."""
        group = self.find(group_id) or self._create(group_id)
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
        return listing.describe(group_id, self.find(group_id))

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def snapshots(self) -> dict[str, GroupSnapshot]:
        """Every group's members and committed offsets, of either protocol, by group id."""
        groups: list[Group | ConsumerGroup] = [*self._groups.values()]
        if self.consumer_groups is not None:
            groups += self.consumer_groups.groups.values()
        return {group.group_id: listing.snapshot(group) for group in groups}

    def hand_over(self, group_id: str) -> dict[str, dict[int, CommittedOffset]]:
        """Give up a group whose coordinator is now another process's node (`--processes`):
        its waiting members are told NOT_COORDINATOR, as when a coordinator unloads, and
        its committed offsets are returned for the new coordinator."""
        group = self._groups.pop(group_id)
        self._tell_members_not_coordinator(group)
        for member_id in [*group.members, *group.pending_join]:
            self._cancel_heartbeat(group, member_id)
        self._timers.cancel(("join", group_id))
        self._timers.cancel(("sync", group_id))
        self.stats.groups[group.state.value] -= 1
        return group.offsets

    def take_over(self, group_id: str, offsets: dict[str, dict[int, CommittedOffset]]) -> None:
        """Coordinate a group handed over by another process, from its committed offsets;
        its members join again, as after a coordinator moves in Kafka."""
        group = self._groups.get(group_id) or self._create(group_id)
        for topic, partitions in offsets.items():
            group.offsets.setdefault(topic, {}).update(partitions)

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[ListedGroup]:
        return listing.list_groups(self._groups.values(), self.consumer_groups, states, types)

    def delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, ErrorCode]]:
        """DeleteGroups: a group without members goes, with its offsets."""
        return [(group_id, self._delete_group(group_id)) for group_id in group_ids]

    def _delete_group(self, group_id: str) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.find(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if not isinstance(group, Group):
            assert self.consumer_groups is not None
            offsets = self.consumer_groups.take_if_empty(group_id)
            return ErrorCode.non_empty_group if offsets is None else ErrorCode.none
        refusal = listing.refusal_to_delete(group)
        if refusal is not None:
            return refusal
        self._timers.cancel(("join", group_id))
        self._timers.cancel(("sync", group_id))
        for member_id in group.pending_join:
            self._timers.cancel(("heartbeat", group_id, member_id))
        self._transition(group, GroupState.DEAD)
        del self._groups[group_id]
        return ErrorCode.none


@dataclass(frozen=True, slots=True)
class _JoinRequest:
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    supports_skip_assignment: bool

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


def _unique_by_name(protocols: Sequence[tuple[str, bytes]]) -> Protocols:
    """Protocols keyed by name, as Kafka's request collection is: the first of a name wins."""
    seen: dict[str, bytes] = {}
    for name, metadata in protocols:
        seen.setdefault(name, metadata)
    return tuple(seen.items())


def _inconsistent(asked: str | None, chosen: str | None) -> bool:
    return asked is not None and chosen is not None and asked != chosen
