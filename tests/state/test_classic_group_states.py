"""The classic group state machine's table (nullbroker/state/groups/classic_states.py), walked
pair by pair: in each state, each event either answers the error the table documents and
changes nothing, or does the table's action, ending in a state that action may lead to.

Each group is made directly in the state under test, with the same two members (a dynamic
leader, a static follower), so that every event passes the request's own checks and reaches
the table; test_groups.py drives the same machine through whole rebalances on the wire.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kio.schema.errors import ErrorCode

from nullbroker.state.groups.classic import ClassicGroups, JoinRequest, SyncRequest
from nullbroker.state.groups.classic_states import TRANSITIONS, VALID_PREVIOUS, Action, Event
from nullbroker.state.groups.model import Group, GroupState, Member, Protocols
from nullbroker.state.groups.replies import Reply
from nullbroker.stats import BrokerStats

PROTOCOLS = (("range", b"subscription"),)
LEADER, FOLLOWER, FOLLOWER_INSTANCE, PENDING = "leader", "follower", "instance", "pending"
GENERATION = 4


def test_the_table_has_every_state_and_every_event() -> None:
    assert set(TRANSITIONS) == set(GroupState)
    for state, row in TRANSITIONS.items():
        assert set(row) == set(Event), state
        assert all(isinstance(step, Action | ErrorCode) for step in row.values()), state


def test_every_move_the_table_can_make_is_one_kafka_allows() -> None:
    # The states an action may end in (ENDS_IN below) are reachable from where it runs.
    for state, row in TRANSITIONS.items():
        for event, step in row.items():
            if isinstance(step, Action):
                for end in ENDS_IN[step](state) - {state}:
                    assert state in VALID_PREVIOUS[end] or _through_preparing(state, end), (
                        state,
                        event,
                        end,
                    )


def _through_preparing(start: GroupState, end: GroupState) -> bool:
    """A rebalance that completes at once passes PreparingRebalance on its way."""
    return (
        start in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]
        and GroupState.PREPARING_REBALANCE in VALID_PREVIOUS[end]
    )


_JOIN_PHASE_ENDS = {
    GroupState.COMPLETING_REBALANCE,
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,  # nobody rejoined: another rebalance timeout
}

ENDS_IN: dict[Action, Callable[[GroupState], set[GroupState]]] = {
    Action.NOTHING: lambda state: {state},
    Action.PREPARE_REBALANCE: lambda state: {
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,  # everyone was already parked on a JoinGroup
    },
    Action.MAYBE_COMPLETE_JOIN_PHASE: lambda state: {state} | _JOIN_PHASE_ENDS,
    Action.COMPLETE_JOIN_IF_ALL_JOINED: lambda state: {state} | _JOIN_PHASE_ENDS,
    Action.COMPLETE_JOIN: lambda state: _JOIN_PHASE_ENDS,
    Action.DELAY_OR_COMPLETE_JOIN: lambda state: {state} | _JOIN_PHASE_ENDS,
    Action.UPDATE_MEMBER_AND_WAIT: lambda state: {state} | _JOIN_PHASE_ENDS,
    Action.UPDATE_MEMBER_AND_REBALANCE: lambda state: {
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
    },
    Action.ANSWER_CURRENT_GENERATION: lambda state: {state},
    Action.KEEP_ASSIGNMENT_UNLESS_PROTOCOL_CHANGES: lambda state: {
        state,
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
    },
    Action.AWAIT_ASSIGNMENT: lambda state: {state, GroupState.STABLE},
    Action.ANSWER_ASSIGNMENT: lambda state: {state},
    Action.RENEW_SESSION: lambda state: {state},
    Action.RENEW_SESSION_AND_ASK_TO_REJOIN: lambda state: {state},
    Action.DROP_UNSYNCED_AND_REBALANCE: lambda state: {
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
    },
    Action.DELETE: lambda state: {GroupState.DEAD},
}
"""Where each action may leave the group, from the state it ran in (its docstring's words)."""


ANSWERS: dict[Action, set[ErrorCode | None]] = {
    Action.ANSWER_CURRENT_GENERATION: {ErrorCode.none},
    Action.KEEP_ASSIGNMENT_UNLESS_PROTOCOL_CHANGES: {ErrorCode.none},
    Action.AWAIT_ASSIGNMENT: {ErrorCode.none},  # the leader's SyncGroup, answered at once
    Action.ANSWER_ASSIGNMENT: {ErrorCode.none},
    Action.RENEW_SESSION: {ErrorCode.none},
    Action.RENEW_SESSION_AND_ASK_TO_REJOIN: {ErrorCode.rebalance_in_progress},
}
"""The answer of a request an action answers at once; the others are no error or parked
(None), and a timer answers nothing."""


def test_every_action_says_where_it_may_lead() -> None:
    assert set(ENDS_IN) == set(Action)


def _member(member_id: str, instance_id: str | None) -> Member:
    return Member(member_id, instance_id, "client", "/127.0.0.1", 60_000, 10_000, "test", PROTOCOLS)


def _group_in(groups: ClassicGroups, state: GroupState) -> Group:
    group = groups.create("group")
    group.add(_member(LEADER, None))
    group.add(_member(FOLLOWER, FOLLOWER_INSTANCE))
    group.generation_id = GENERATION
    group.protocol_name = "range"
    group.pending_sync = {FOLLOWER}
    group.pending_join.add(PENDING)
    group.state = state
    group.previous_state = (
        GroupState.STABLE
        if state is GroupState.PREPARING_REBALANCE
        else GroupState.PREPARING_REBALANCE
    )
    return group


def _join(member_id: str, instance_id: str | None, protocols: Protocols = PROTOCOLS) -> JoinRequest:
    return JoinRequest(
        member_id, instance_id, "test", protocols, 10_000, 60_000, "client", "/127.0.0.1", True
    )


def _answer(reply: Reply) -> ErrorCode | None:
    return reply.value.error if reply.ready else None


FIRE: dict[Event, Callable[[ClassicGroups, Group], ErrorCode | None]] = {
    Event.MEMBER_JOINS: lambda groups, group: _answer(
        groups.join(group, _join("", None), require_known_member_id=False)
    ),
    Event.STATIC_MEMBER_RETURNS: lambda groups, group: _answer(
        groups.join(group, _join("", FOLLOWER_INSTANCE), require_known_member_id=False)
    ),
    Event.MEMBER_REJOINS_WITH_NEW_METADATA: lambda groups, group: _answer(
        groups.join(
            group,
            _join(FOLLOWER, FOLLOWER_INSTANCE, (("range", b"other"),)),
            require_known_member_id=False,
        )
    ),
    Event.LEADER_REJOINS: lambda groups, group: _answer(
        groups.join(group, _join(LEADER, None), require_known_member_id=False)
    ),
    Event.FOLLOWER_REJOINS: lambda groups, group: _answer(
        groups.join(group, _join(FOLLOWER, FOLLOWER_INSTANCE), require_known_member_id=False)
    ),
    Event.SYNC: lambda groups, group: _answer(
        groups.sync(group, SyncRequest(GENERATION, LEADER, None, None, None, [(LEADER, b"a")]))
    ),
    Event.HEARTBEAT: lambda groups, group: groups.heartbeat(group, GENERATION, LEADER, None),
    Event.MEMBERS_LEAVE: lambda groups, group: groups.leave(group, [(FOLLOWER, None)])[0],
    Event.DELETE: lambda groups, group: groups.delete(group),
    Event.SESSION_EXPIRES: lambda groups, group: groups._expire_heartbeat("group", FOLLOWER),
    Event.PENDING_MEMBER_EXPIRES: lambda groups, group: groups._expire_heartbeat("group", PENDING),
    Event.INITIAL_DELAY_ENDS: lambda groups, group: groups._initial_delay_ended("group", 3000, 0),
    Event.JOIN_TIMEOUT: lambda groups, group: groups._join_timed_out("group"),
    Event.SYNC_TIMEOUT: lambda groups, group: groups._expire_pending_sync("group", GENERATION),
}
"""Each event as its request or timer brings it (timers called as they fire)."""


def test_every_event_is_fired() -> None:
    assert set(FIRE) == set(Event)


@pytest.mark.parametrize("event", list(Event), ids=lambda event: event.name)
@pytest.mark.parametrize("state", list(GroupState), ids=lambda state: state.name)
async def test_each_event_in_each_state_does_what_the_table_says(
    state: GroupState, event: Event
) -> None:
    groups = ClassicGroups(BrokerStats(), initial_rebalance_delay_ms=3000, clock=lambda: 0.0)
    group = _group_in(groups, state)
    step = TRANSITIONS[state][event]
    answer = FIRE[event](groups, group)
    if isinstance(step, ErrorCode):
        assert answer is step
        assert group.state is state
        assert groups.groups.get("group") is group
        return
    assert answer in ANSWERS.get(step, {None, ErrorCode.none}), (step, answer)
    assert group.state in ENDS_IN[step](state), (step, group.state)
    if step is Action.DELETE:
        assert "group" not in groups.groups
