"""What ShareFetch and ShareAcknowledge share: a member's share session checked, and the
acknowledgements it sends applied to its share partitions, one error per partition."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import trio
from kio.schema.errors import ErrorCode

from ...state.share.sessions import ShareSession

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session
    from ...state.share.groups import ShareGroup


def continued_session(
    broker: Broker, node_id: int, group_id: str, member_id: str, epoch: int
) -> ShareSession | ErrorCode:
    """The member's session with the node for a request at `epoch` (not the opening 0), or
    the error the request is refused with."""
    return broker.share_groups.sessions.find(node_id, group_id, member_id, epoch)


def tie_to_connection(broker: Broker, share_session: ShareSession, session: Session) -> None:
    """Close a share session when the connection that opened it closes, as Kafka's broker
    does (its share session cache listens for disconnects): a worker that dies gives its
    records back at once, not when their locks run out."""
    share_session.connection = session
    session.on_close[share_session.key] = lambda: _connection_closed(broker, share_session)


def _connection_closed(broker: Broker, share_session: ShareSession) -> None:
    share_groups = broker.share_groups
    if not share_groups.sessions.is_open(share_session):
        return  # closed already, or opened again from another connection
    group = share_groups.get(share_session.group_id)
    if group is None:
        share_groups.sessions.close(share_session)
    else:
        close_session(broker, group, share_session, disconnected=True)


def close_session(
    broker: Broker, group: ShareGroup, share_session: ShareSession, disconnected: bool = False
) -> None:
    """Close a member's session with a node (epoch -1, or its connection closed): the
    records it holds of the session's partitions are released, and all it holds if it has
    left the group and has no session left with any node. Released at epoch -1, their
    delivery is not counted; on a disconnect it is (both as Kafka 4.4.0)."""
    share_groups = broker.share_groups
    share_groups.sessions.close(share_session)
    if share_session.connection is not None:
        share_session.connection.on_close.pop(share_session.key, None)
    member_id = share_session.member_id
    counted = share_groups.configs.limits(group.group_id) if disconnected else None
    if member_id not in group.members and not share_groups.sessions.of_member(
        group.group_id, member_id
    ):
        share_groups.release_member(group, member_id, counted)
        return
    for topic_id, index in share_session.partitions:
        topic = broker.topics.by_id(topic_id)
        shared = group.partitions.get((topic.name, index)) if topic is not None else None
        if shared is not None:
            shared.release_member(member_id, counted)


def member_group(broker: Broker, group_id: str, member_id: str) -> ShareGroup | ErrorCode:
    """The share group a ShareFetch or ShareAcknowledge names, or the error it is refused
    with. The member need not be one of its members still: a client leaves the group before
    it acknowledges its last records and closes its share session."""
    if not member_id:
        return ErrorCode.unknown_member_id
    group = broker.share_groups.get(group_id) if group_id else None
    if group is None and group_id and not broker.serves_node(broker.cluster.coordinator(group_id)):
        # Another process coordinates it: this leader holds its share partitions here.
        return broker.share_groups.partitions_holder(group_id)
    if group is None:
        return ErrorCode.unknown_member_id
    return group


def acknowledge(
    broker: Broker,
    group: ShareGroup,
    member_id: str,
    topic_id: Any,
    partition_index: int,
    batches: Iterable[Any],
) -> ErrorCode:
    """Apply one partition's acknowledgement batches for `member_id`: the first error met
    (the batches before it stay applied, as in Kafka, which applies them one by one)."""
    topic = broker.topics.by_id(topic_id)
    if topic is None:
        return ErrorCode.unknown_topic_id
    share_partition = group.partitions.get((topic.name, partition_index))
    if share_partition is None:
        return ErrorCode.invalid_record_state
    limits = broker.share_groups.configs.limits(group.group_id)
    now = trio.current_time()
    for batch in batches:
        kinds = tuple(batch.acknowledge_types)
        error = share_partition.acknowledge(
            member_id, batch.first_offset, batch.last_offset, kinds, now, limits
        )
        if error is not ErrorCode.none:
            return error
    return ErrorCode.none
