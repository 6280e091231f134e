"""Consumer groups, classic protocol, in memory: the code that runs Kafka's group state
machine (classic_states.py holds its table) over every classic group this node coordinates.

This follows Apache Kafka's classic group coordinator (GroupMetadataManager and ClassicGroup
in the group-coordinator module): the same states, transitions, timers and error codes, so
clients rebalance against nullbroker exactly as they would against Kafka. Nothing is written
to a log: a group lives in memory until DeleteGroups removes it.

Each request and timer checks what it must in every state (the member, its generation), then
becomes an event, and TRANSITIONS says what the event does in the group's state: an error to
answer, or an action, run here. Requests that wait (a JoinGroup until the join phase
completes, a SyncGroup until the leader's assignment arrives) get a `Reply` filled in later.
Timers (the initial rebalance delay, rebalance and sync timeouts, member sessions) fire in
`run()`, which the server runs for the broker's life.

The coordinator (coordinator.py) finds and creates groups of either protocol and hands the
classic ones here; the group and its members are in model.py.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import trio
from kio.schema.errors import ErrorCode

from ...stats import BrokerStats
from .classic_states import TRANSITIONS, VALID_PREVIOUS, Action, Event
from .model import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
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

log = logging.getLogger("nullbroker")


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup, as the state machine needs it."""

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


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """A SyncGroup, as the state machine needs it."""

    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: Iterable[tuple[str, bytes]]
    """The leader's assignment by member id (the others send none)."""


def unique_by_name(protocols: Sequence[tuple[str, bytes]]) -> Protocols:
    """Protocols keyed by name, as Kafka's request collection is: the first of a name wins."""
    seen: dict[str, bytes] = {}
    for name, metadata in protocols:
        seen.setdefault(name, metadata)
    return tuple(seen.items())


class ClassicGroups:
    """Every classic group of this node, moved by TRANSITIONS, and the timers that move them."""

    def __init__(
        self,
        stats: BrokerStats,
        initial_rebalance_delay_ms: int,
        clock: Callable[[], float],
    ) -> None:
        self.stats = stats
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._clock = clock
        self.groups: dict[str, Group] = {}
        self._timers = Timers()
        self.active = False
        """Taking requests: the timers run (JoinGroup and SyncGroup wait on them)."""
        self._wake = trio.Event()
        self._sleeping_until = math.inf
        self._group_actions: dict[Action, Callable[[Group], None]] = {
            Action.NOTHING: lambda group: None,
            Action.PREPARE_REBALANCE: self._prepare_rebalance,
            Action.MAYBE_COMPLETE_JOIN_PHASE: self._maybe_complete_join_phase,
            Action.COMPLETE_JOIN_IF_ALL_JOINED: self._complete_join_if_all_joined,
            Action.COMPLETE_JOIN: self._complete_join,
        }
        """The actions that need nothing but the group; the others are their event's."""

    # Running the timers.

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fire timers when due, until cancelled. Then answer every parked request with
        NOT_COORDINATOR, as Kafka does when a coordinator unloads, so no connection waits
        for an answer that would never come."""
        self.active = True
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
            self.active = False
            self._unload()

    def _unload(self) -> None:
        for group in self.groups.values():
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

    def create(self, group_id: str) -> Group:
        group = self.groups[group_id] = Group(group_id)
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

    def _act(self, group: Group, action: Action) -> None:
        self._group_actions[action](group)

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
        self, group: Group, request: JoinRequest, *, require_known_member_id: bool
    ) -> Reply[JoinResult]:
        """A JoinGroup: answered at once (errors, MEMBER_ID_REQUIRED, a rejoin with
        nothing changed) or when the group's join phase completes."""
        reply: Reply[JoinResult] = Reply()
        if not group.supports_protocols(request.protocol_type, request.protocol_names):
            reply.give(JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id))
        elif not request.member_id:
            self._join_new_member(group, request, reply, require_known_member_id)
        elif request.member_id in group.pending_join:
            self._join_pending_member(group, request, reply)
        else:
            self._rejoin(group, request, reply)
        return reply

    def _join_new_member(
        self, group: Group, request: JoinRequest, reply: Reply[JoinResult], require_known: bool
    ) -> None:
        instance_id = request.group_instance_id
        old_member_id = group.static_members.get(instance_id) if instance_id is not None else None
        event = Event.MEMBER_JOINS if old_member_id is None else Event.STATIC_MEMBER_RETURNS
        step = TRANSITIONS[group.state][event]
        if isinstance(step, ErrorCode):
            reply.give(JoinResult(step, ""))
            return
        prefix = instance_id if instance_id is not None else request.client_id
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        if old_member_id is not None:
            self._replace_static_member(group, request, old_member_id, new_member_id, reply, step)
        elif instance_id is None and require_known:
            # KIP-394: the member must come back with the id it is given, so that a client
            # whose first JoinGroup times out does not leave an unknown member behind.
            group.pending_join.add(new_member_id)
            self._schedule_heartbeat(group, new_member_id, request.session_timeout_ms)
            reply.give(JoinResult(ErrorCode.member_id_required, new_member_id))
        else:
            self._add_member(group, request, new_member_id, reply)
            self._act(group, step)

    def _join_pending_member(
        self, group: Group, request: JoinRequest, reply: Reply[JoinResult]
    ) -> None:
        if request.group_instance_id is not None:
            # Kafka treats this as a state it cannot be in (a pending member is dynamic).
            reply.give(JoinResult(ErrorCode.unknown_server_error, request.member_id))
            return
        step = TRANSITIONS[group.state][Event.MEMBER_JOINS]
        if isinstance(step, ErrorCode):
            reply.give(JoinResult(step, request.member_id))
            return
        self._add_member(group, request, request.member_id, reply)
        self._act(group, step)

    def _rejoin(self, group: Group, request: JoinRequest, reply: Reply[JoinResult]) -> None:
        member_id = request.member_id
        error = group.validate_member(member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            reply.give(JoinResult(error, member_id))
            return
        member = group.members[member_id]
        if member.protocols != request.protocols:
            event = Event.MEMBER_REJOINS_WITH_NEW_METADATA
        elif group.is_leader(member_id):
            event = Event.LEADER_REJOINS
        else:
            event = Event.FOLLOWER_REJOINS
        step = TRANSITIONS[group.state][event]
        if isinstance(step, ErrorCode):
            reply.give(JoinResult(step, member_id))
        elif step is Action.ANSWER_CURRENT_GENERATION:
            # The member probably missed its JoinGroup answer; repeat it.
            reply.give(self._current_generation(group, member_id))
        else:
            group.update_protocols(member, request.protocols)
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
            member.session_timeout_ms = request.session_timeout_ms
            self._park_join(member, reply)
            if step is Action.UPDATE_MEMBER_AND_WAIT:
                self._maybe_complete_join_phase(group)
            else:
                assert step is Action.UPDATE_MEMBER_AND_REBALANCE, step
                self._prepare_rebalance(group)

    @staticmethod
    def _current_generation(group: Group, member_id: str) -> JoinResult:
        """The generation as it is; the members too if `member_id` leads."""
        return JoinResult(
            ErrorCode.none,
            member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            group.joined_members() if group.is_leader(member_id) else (),
        )

    def _add_member(
        self, group: Group, request: JoinRequest, member_id: str, reply: Reply[JoinResult]
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

    def _replace_static_member(
        self,
        group: Group,
        request: JoinRequest,
        old_member_id: str,
        new_member_id: str,
        reply: Reply[JoinResult],
        step: Action,
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

        if step is not Action.KEEP_ASSIGNMENT_UNLESS_PROTOCOL_CHANGES:
            self._act(group, step)
        elif group.protocol_name != group.select_protocol():
            self._prepare_rebalance(group)
        else:
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
                    (group.leader_id or "") if request.supports_skip_assignment else current_leader,
                    group.joined_members() if skip else (),
                    skip_assignment=skip,
                ),
            )

    # The join phase.

    def _maybe_complete_join_phase(self, group: Group) -> None:
        # An initial rebalance always waits out its delay, to gather the members that start
        # together.
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.previous_state is not GroupState.EMPTY
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join_if_all_joined(self, group: Group) -> None:
        if group.has_all_members_joined():
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
            lambda: self._initial_delay_ended(group_id, delay_ms, remaining_ms),
        )

    def _initial_delay_ended(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        step = TRANSITIONS[group.state][Event.INITIAL_DELAY_ENDS]
        if step is not Action.DELAY_OR_COMPLETE_JOIN:
            self._act(group, step)
        elif group.new_member_added and remaining_ms:
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
        group = self.groups.get(group_id)
        if group is not None:
            step = TRANSITIONS[group.state][Event.JOIN_TIMEOUT]
            assert isinstance(step, Action), step
            self._act(group, step)

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
            self._give_join(member, self._current_generation(group, member.member_id))
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
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        step = TRANSITIONS[group.state][Event.SYNC_TIMEOUT]
        if step is not Action.DROP_UNSYNCED_AND_REBALANCE:
            assert isinstance(step, Action), step
            self._act(group, step)
        elif group.pending_sync:
            for member_id in list(group.pending_sync):
                self._cancel_heartbeat(group, member_id)
                group.remove(member_id)
            self._prepare_rebalance(group)

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if member_id in group.pending_join:
            step = TRANSITIONS[group.state][Event.PENDING_MEMBER_EXPIRES]
            assert isinstance(step, Action), step
            group.remove(member_id)
            self._act(group, step)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        step = TRANSITIONS[group.state][Event.SESSION_EXPIRES]
        assert isinstance(step, Action), step
        log.info("group %s: member %s left no heartbeat within its session", group_id, member_id)
        self._forget(group, member)
        self._act(group, step)

    # SyncGroup.

    def sync(self, group: Group, request: SyncRequest) -> Reply[SyncResult]:
        """A SyncGroup: the leader brings the assignment; the others wait for it."""
        member_id = request.member_id
        error = group.validate_member(member_id, request.group_instance_id)
        if error is ErrorCode.none and request.generation_id != group.generation_id:
            error = ErrorCode.illegal_generation
        if error is ErrorCode.none and (
            _inconsistent(request.protocol_type, group.protocol_type)
            or _inconsistent(request.protocol_name, group.protocol_name)
        ):
            error = ErrorCode.inconsistent_group_protocol
        if error is not ErrorCode.none:
            return Reply.now(SyncResult(error))
        step = TRANSITIONS[group.state][Event.SYNC]
        if isinstance(step, ErrorCode):
            return Reply.now(SyncResult(step))
        member = group.members[member_id]
        if step is Action.ANSWER_ASSIGNMENT:
            self._remove_pending_sync(group, member_id)
            return Reply.now(self._assignment_of(group, member))
        assert step is Action.AWAIT_ASSIGNMENT, step
        reply: Reply[SyncResult] = Reply()
        if member.syncing is not None:
            # A SyncGroup superseded by another from the same member; see _park_join.
            member.syncing.give(SyncResult(ErrorCode.rebalance_in_progress))
        member.syncing = reply
        self._remove_pending_sync(group, member_id)
        if group.is_leader(member_id):
            assigned = dict(request.assignments)
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
        self, group: Group, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        error = group.validate_member(member_id, group_instance_id)
        if error is not ErrorCode.none:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        step = TRANSITIONS[group.state][Event.HEARTBEAT]
        if isinstance(step, ErrorCode):
            return step
        self._reschedule_heartbeat(group, group.members[member_id])
        if step is Action.RENEW_SESSION_AND_ASK_TO_REJOIN:
            return ErrorCode.rebalance_in_progress
        assert step is Action.RENEW_SESSION, step
        return ErrorCode.none

    def leave(
        self, group: Group, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[LeavingMember]]:
        """LeaveGroup for (member id, group instance id) pairs: the group-level error and
        one answer per member. A static member may be removed by instance id alone."""
        step = TRANSITIONS[group.state][Event.MEMBERS_LEAVE]
        if isinstance(step, ErrorCode):
            return step, []
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
            self._act(group, step)
        return ErrorCode.none, answers

    # A group's end, here or on another node.

    def delete(self, group: Group) -> ErrorCode:
        """DeleteGroups of a classic group: an empty one goes, with its offsets."""
        step = TRANSITIONS[group.state][Event.DELETE]
        if isinstance(step, ErrorCode):
            return step
        assert step is Action.DELETE, step
        group_id = group.group_id
        self._timers.cancel(("join", group_id))
        self._timers.cancel(("sync", group_id))
        for member_id in group.pending_join:
            self._timers.cancel(("heartbeat", group_id, member_id))
        self._transition(group, GroupState.DEAD)
        del self.groups[group_id]
        return ErrorCode.none

    def take_if_empty(self, group_id: str) -> dict[str, dict[int, CommittedOffset]] | None:
        """The committed offsets of a classic group with no members, which goes, so that
        a consumer group of the new protocol takes its place ({} for no such group);
        None while it has members."""
        group = self.groups.get(group_id)
        if group is None:
            return {}
        if group.members:
            return None
        del self.groups[group_id]
        self.stats.groups[group.state.value] -= 1
        return group.offsets

    def hand_over(self, group_id: str) -> dict[str, dict[int, CommittedOffset]]:
        """Give up a group whose coordinator is now another process's node (`--processes`):
        its waiting members are told NOT_COORDINATOR, as when a coordinator unloads, and
        its committed offsets are returned for the new coordinator."""
        group = self.groups.pop(group_id)
        self._tell_members_not_coordinator(group)
        for member_id in [*group.members, *group.pending_join]:
            self._cancel_heartbeat(group, member_id)
        self._timers.cancel(("join", group_id))
        self._timers.cancel(("sync", group_id))
        self.stats.groups[group.state.value] -= 1
        return group.offsets


def _inconsistent(asked: str | None, chosen: str | None) -> bool:
    return asked is not None and chosen is not None and asked != chosen
