"""The classic group state machine as one table: for each state, what each event does.

Read it beside Kafka's ClassicGroupState (group-coordinator,
org/apache/kafka/coordinator/group/classic/ClassicGroupState.java), whose javadoc lists, per
state, the answer to each request and the transitions; the rows below say the same, state by
state. As in h11's _state.py the table is data and the code that runs it (classic.py) only
looks up and acts: a reader checks the rules here, without following the code.

An entry is either
- an ErrorCode: the event is not allowed in that state, and that is Kafka's answer (nothing
  changes), or
- an Action: what the group does; the states it may lead to are in its docstring, and every
  move is checked against VALID_PREVIOUS (Kafka's validPreviousStates) when made.

A request's own checks (the member is known, its generation, its protocol) come first, in
every state alike, as in Kafka; the table decides what a request that passed them does. A
Dead group is forgotten as it dies (DeleteGroups, a consumer group taking its id), so the
coordinator never finds one; its row is what Kafka answers a request that races the removal.
"""

from __future__ import annotations

from enum import Enum, StrEnum

from kio.schema.errors import ErrorCode

from .model import GroupState


class Event(StrEnum):
    """What can happen to a classic group: a handler's request, or a timer that fires."""

    # JoinGroup, told apart by who joins (the handler's request, after its checks).
    MEMBER_JOINS = "a new member joins"
    """Without a member id (or with the one MEMBER_ID_REQUIRED gave it, KIP-394)."""
    STATIC_MEMBER_RETURNS = "a static member joins again without its member id"
    """A known group instance id (KIP-345): a restarted client takes its old place."""
    MEMBER_REJOINS_WITH_NEW_METADATA = "a member joins again with other protocols"
    LEADER_REJOINS = "the leader joins again with the same protocols"
    FOLLOWER_REJOINS = "a follower joins again with the same protocols"
    # The other requests.
    SYNC = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    MEMBERS_LEAVE = "LeaveGroup removed members"
    DELETE = "DeleteGroups"
    # Timers.
    SESSION_EXPIRES = "a member's session expires"
    PENDING_MEMBER_EXPIRES = "a member id given with MEMBER_ID_REQUIRED goes unused"
    INITIAL_DELAY_ENDS = "the initial rebalance delay ends"
    JOIN_TIMEOUT = "the rebalance timeout ends the join phase"
    SYNC_TIMEOUT = "members of the generation sent no SyncGroup in time"


class Action(Enum):
    """What a group does on an event its state allows (the code is in classic.py)."""

    NOTHING = "nothing: the event's own bookkeeping only"
    PREPARE_REBALANCE = "→ PreparingRebalance: members must join again"
    """Kafka's prepareRebalance; from Empty the initial delay starts, from the others the
    join phase completes at once if everyone is already parked on a JoinGroup."""
    MAYBE_COMPLETE_JOIN_PHASE = "complete the join phase if every member joined"
    """Kafka's maybeCompleteJoinPhase: not during the initial rebalance's delay, which waits
    for the members that start together."""
    COMPLETE_JOIN_IF_ALL_JOINED = "complete the join phase if every member joined, delay or not"
    """As Kafka after removing a member: the initial delay is not waited out."""
    COMPLETE_JOIN = "→ CompletingRebalance (→ Empty without members): the next generation"
    DELAY_OR_COMPLETE_JOIN = "wait once more if members came, else complete the join phase"
    UPDATE_MEMBER_AND_WAIT = "take the member's protocols; it waits for the join phase"
    UPDATE_MEMBER_AND_REBALANCE = "take the member's protocols, → PreparingRebalance"
    ANSWER_CURRENT_GENERATION = "answer the JoinGroup with the generation as it is"
    KEEP_ASSIGNMENT_UNLESS_PROTOCOL_CHANGES = (
        "answer at once with the old assignment, or → PreparingRebalance if the vote changes"
    )
    AWAIT_ASSIGNMENT = "park the SyncGroup; the leader's assignment → Stable"
    ANSWER_ASSIGNMENT = "answer the SyncGroup with the member's assignment"
    RENEW_SESSION = "renew the member's session"
    RENEW_SESSION_AND_ASK_TO_REJOIN = "renew the session, answer REBALANCE_IN_PROGRESS"
    DROP_UNSYNCED_AND_REBALANCE = "remove who sent no SyncGroup, → PreparingRebalance"
    DELETE = "→ Dead, and the coordinator forgets the group"


Step = Action | ErrorCode

_E, _A = Event, Action

TRANSITIONS: dict[GroupState, dict[Event, Step]] = {
    GroupState.EMPTY: {
        # No members: they lingered only for their committed offsets.
        _E.MEMBER_JOINS: _A.PREPARE_REBALANCE,
        _E.STATIC_MEMBER_RETURNS: _A.MAYBE_COMPLETE_JOIN_PHASE,  # none are left to return
        _E.MEMBER_REJOINS_WITH_NEW_METADATA: ErrorCode.unknown_member_id,
        _E.LEADER_REJOINS: ErrorCode.unknown_member_id,
        _E.FOLLOWER_REJOINS: ErrorCode.unknown_member_id,
        _E.SYNC: ErrorCode.unknown_member_id,
        _E.HEARTBEAT: ErrorCode.unknown_member_id,
        _E.MEMBERS_LEAVE: _A.NOTHING,  # only ids given with MEMBER_ID_REQUIRED can leave
        _E.DELETE: _A.DELETE,
        _E.SESSION_EXPIRES: _A.NOTHING,
        _E.PENDING_MEMBER_EXPIRES: _A.NOTHING,
        _E.INITIAL_DELAY_ENDS: _A.NOTHING,
        _E.JOIN_TIMEOUT: _A.NOTHING,
        _E.SYNC_TIMEOUT: _A.NOTHING,
    },
    GroupState.PREPARING_REBALANCE: {
        # JoinGroups are parked until every member joined or the rebalance timeout.
        _E.MEMBER_JOINS: _A.MAYBE_COMPLETE_JOIN_PHASE,
        _E.STATIC_MEMBER_RETURNS: _A.MAYBE_COMPLETE_JOIN_PHASE,
        _E.MEMBER_REJOINS_WITH_NEW_METADATA: _A.UPDATE_MEMBER_AND_WAIT,
        _E.LEADER_REJOINS: _A.UPDATE_MEMBER_AND_WAIT,
        _E.FOLLOWER_REJOINS: _A.UPDATE_MEMBER_AND_WAIT,
        _E.SYNC: ErrorCode.rebalance_in_progress,
        _E.HEARTBEAT: _A.RENEW_SESSION_AND_ASK_TO_REJOIN,
        _E.MEMBERS_LEAVE: _A.MAYBE_COMPLETE_JOIN_PHASE,
        _E.DELETE: ErrorCode.non_empty_group,
        _E.SESSION_EXPIRES: _A.COMPLETE_JOIN_IF_ALL_JOINED,
        _E.PENDING_MEMBER_EXPIRES: _A.COMPLETE_JOIN_IF_ALL_JOINED,
        _E.INITIAL_DELAY_ENDS: _A.DELAY_OR_COMPLETE_JOIN,
        _E.JOIN_TIMEOUT: _A.COMPLETE_JOIN,
        _E.SYNC_TIMEOUT: _A.NOTHING,
    },
    GroupState.COMPLETING_REBALANCE: {
        # The generation is known; its members wait for the leader's assignment.
        _E.MEMBER_JOINS: _A.PREPARE_REBALANCE,
        _E.STATIC_MEMBER_RETURNS: _A.PREPARE_REBALANCE,  # the leader may assign the old id
        _E.MEMBER_REJOINS_WITH_NEW_METADATA: _A.UPDATE_MEMBER_AND_REBALANCE,
        _E.LEADER_REJOINS: _A.ANSWER_CURRENT_GENERATION,  # it missed its JoinGroup answer
        _E.FOLLOWER_REJOINS: _A.ANSWER_CURRENT_GENERATION,
        _E.SYNC: _A.AWAIT_ASSIGNMENT,
        _E.HEARTBEAT: _A.RENEW_SESSION,
        _E.MEMBERS_LEAVE: _A.PREPARE_REBALANCE,
        _E.DELETE: ErrorCode.non_empty_group,
        _E.SESSION_EXPIRES: _A.PREPARE_REBALANCE,
        _E.PENDING_MEMBER_EXPIRES: _A.NOTHING,
        _E.INITIAL_DELAY_ENDS: _A.NOTHING,
        _E.JOIN_TIMEOUT: _A.NOTHING,
        _E.SYNC_TIMEOUT: _A.DROP_UNSYNCED_AND_REBALANCE,
    },
    GroupState.STABLE: {
        # Every member has its assignment.
        _E.MEMBER_JOINS: _A.PREPARE_REBALANCE,
        _E.STATIC_MEMBER_RETURNS: _A.KEEP_ASSIGNMENT_UNLESS_PROTOCOL_CHANGES,
        _E.MEMBER_REJOINS_WITH_NEW_METADATA: _A.UPDATE_MEMBER_AND_REBALANCE,
        _E.LEADER_REJOINS: _A.UPDATE_MEMBER_AND_REBALANCE,  # to have the group reassigned
        _E.FOLLOWER_REJOINS: _A.ANSWER_CURRENT_GENERATION,
        _E.SYNC: _A.ANSWER_ASSIGNMENT,
        _E.HEARTBEAT: _A.RENEW_SESSION,
        _E.MEMBERS_LEAVE: _A.PREPARE_REBALANCE,
        _E.DELETE: ErrorCode.non_empty_group,
        _E.SESSION_EXPIRES: _A.PREPARE_REBALANCE,
        _E.PENDING_MEMBER_EXPIRES: _A.NOTHING,
        _E.INITIAL_DELAY_ENDS: _A.NOTHING,
        _E.JOIN_TIMEOUT: _A.NOTHING,
        _E.SYNC_TIMEOUT: _A.DROP_UNSYNCED_AND_REBALANCE,  # a member got its assignment late
    },
    GroupState.DEAD: {
        _E.MEMBER_JOINS: ErrorCode.coordinator_not_available,
        _E.STATIC_MEMBER_RETURNS: ErrorCode.coordinator_not_available,
        _E.MEMBER_REJOINS_WITH_NEW_METADATA: ErrorCode.coordinator_not_available,
        _E.LEADER_REJOINS: ErrorCode.coordinator_not_available,
        _E.FOLLOWER_REJOINS: ErrorCode.coordinator_not_available,
        _E.SYNC: ErrorCode.coordinator_not_available,
        _E.HEARTBEAT: ErrorCode.coordinator_not_available,
        _E.MEMBERS_LEAVE: ErrorCode.coordinator_not_available,
        _E.DELETE: ErrorCode.group_id_not_found,
        _E.SESSION_EXPIRES: _A.NOTHING,
        _E.PENDING_MEMBER_EXPIRES: _A.NOTHING,
        _E.INITIAL_DELAY_ENDS: _A.NOTHING,
        _E.JOIN_TIMEOUT: _A.NOTHING,
        _E.SYNC_TIMEOUT: _A.NOTHING,
    },
}
"""For each state, what each event does. Every pair is here: the test walks them all."""


VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}
"""The states a group may come to each state from (Kafka's validPreviousStates)."""
