"""Consumer groups: FindCoordinator, the classic group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup), the new one (KIP-848: ConsumerGroupHeartbeat,
ConsumerGroupDescribe), committed offsets (OffsetCommit, OffsetFetch, OffsetDelete) and group
administration (DescribeGroups, ListGroups, DeleteGroups), one module a request, as Kafka's
and Tansu's handlers are.

This node coordinates every group. The state machines live in nullbroker.state.groups; these
handlers translate between them and each version's kio entities. JoinGroup and SyncGroup may
wait (for the join phase, for the leader's assignment): they then return a coroutine that
the connection awaits.

Each module declares its KEY beside its `handle` and is imported by its key's first request
(nullbroker.handlers.IMPORTED_ON_FIRST_USE): this package imports none of them, so that one
does not bring the others (a classic group's client never loads the KIP-848 state).
"""
