"""DescribeShareGroupOffsets: each share partition's start offset (and, from v1, its lag),
for `kafka-share-groups --describe --offsets` and the admin client's
listShareGroupOffsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, coordinated_elsewhere, counted
from .partitions import readable_end, reads_committed

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session
    from ...state.share.groups import ShareGroup

NO_OFFSET = -1
NO_LAG = -1


KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, request.header.api_version)

    def described(asked: Any) -> Any:
        group_id = asked.group_id
        error = ErrorCode.none
        if coordinated_elsewhere(broker, session, group_id):
            error = ErrorCode.not_coordinator
        topics: tuple[Any, ...] = ()
        if error is ErrorCode.none:
            # As Kafka 4.4.0: a group that does not exist has no offsets, without an error.
            group = broker.share_groups.get(group_id) if group_id else None
            topics = _topics(broker, types, group, asked.topics)
        return make(
            types.DescribeShareGroupOffsetsResponseGroup,
            group_id=group_id,
            topics=topics,
            error_code=counted(broker, error),
            error_message=None,
        )

    return make(
        types.DescribeShareGroupOffsetsResponse,
        throttle_time=NO_THROTTLE,
        groups=tuple(described(asked) for asked in request.body.groups),
    )


def _topics(broker: Broker, types: Any, group: ShareGroup | None, asked: Any) -> tuple[Any, ...]:
    """The asked topics' partitions (every partition the group has read, for none asked)."""
    committed_only = group is not None and reads_committed(broker, group.group_id)
    wanted: dict[str, list[int]] = {}
    if asked is None and group is not None:
        for name, index in sorted(group.partitions):
            wanted.setdefault(name, []).append(index)
    elif asked is not None:
        for topic in asked:
            wanted.setdefault(topic.topic_name, []).extend(topic.partitions)
    told = []
    for name, indexes in wanted.items():
        topic = broker.topics.get(name)
        if topic is None:
            continue  # as Kafka: a topic that does not exist is left out
        partitions = []
        for index in indexes:
            shared = group.partitions.get((name, index)) if group is not None else None
            start, lag = NO_OFFSET, NO_LAG
            if group is not None and shared is not None and 0 <= index < len(topic.partitions):
                start = shared.start
                end = readable_end(topic.partitions[index], committed_only)
                lag = max(0, end - start - shared.done_in_flight())
            partitions.append(
                make(
                    types.DescribeShareGroupOffsetsResponsePartition,
                    partition_index=index,
                    start_offset=start,
                    leader_epoch=0,
                    lag=lag,
                    error_code=ErrorCode.none,
                    error_message=None,
                )
            )
        told.append(
            make(
                types.DescribeShareGroupOffsetsResponseTopic,
                topic_name=name,
                topic_id=topic.id,
                partitions=tuple(partitions),
            )
        )
    return tuple(told)
