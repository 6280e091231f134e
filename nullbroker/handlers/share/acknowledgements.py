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
    from ...state.share.groups import ShareGroup


def continued_session(
    broker: Broker, group_id: str, member_id: str, epoch: int
) -> ShareSession | ErrorCode:
    """The member's session for a request at `epoch` (not the opening 0), or the error the
    request is refused with."""
    return broker.share_groups.sessions.find(group_id, member_id, epoch)


def member_group(broker: Broker, group_id: str, member_id: str) -> ShareGroup | ErrorCode:
    """The share group a ShareFetch or ShareAcknowledge names, or the error it is refused
    with. The member need not be one of its members still: a client leaves the group before
    it acknowledges its last records and closes its share session."""
    if not member_id:
        return ErrorCode.unknown_member_id
    group = broker.share_groups.get(group_id) if group_id else None
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
