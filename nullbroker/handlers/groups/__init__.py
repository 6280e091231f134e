"""Consumer groups: FindCoordinator, the classic group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup), committed offsets (OffsetCommit, OffsetFetch, OffsetDelete) and group
administration (DescribeGroups, ListGroups, DeleteGroups), one module a request (the
administration's three together), as Kafka's and Tansu's handlers are.

This node coordinates every group. The state machine lives in nullbroker.state.groups; these
handlers translate between it and each version's kio entities. JoinGroup and SyncGroup may
wait (for the join phase, for the leader's assignment): they then return a coroutine that
the connection awaits. The family is loaded by its first request
(nullbroker.handlers.IMPORTED_ON_FIRST_USE), which reads HANDLERS here.
"""

from __future__ import annotations

from . import (
    administration,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)
from .find_coordinator import internal_topic_for

__all__ = ["HANDLERS", "internal_topic_for"]

HANDLERS = {
    **offset_commit.HANDLERS,
    **offset_fetch.HANDLERS,
    **find_coordinator.HANDLERS,
    **join_group.HANDLERS,
    **heartbeat.HANDLERS,
    **leave_group.HANDLERS,
    **sync_group.HANDLERS,
    **administration.HANDLERS,
    **offset_delete.HANDLERS,
}
