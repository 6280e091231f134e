"""AlterShareGroupOffsets: set where a share group without members starts reading each
partition (`kafka-share-groups --reset-offsets`): its share partition starts again there,
with nothing in flight, as Kafka's share coordinator initializes it."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.share.groups import ShareGroup
from ..common import coordinated_elsewhere, counted
from .partitions import NOT_EMPTY_MESSAGE, UNKNOWN_TOPIC_MESSAGE, offsets_answer, share_partition

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.ALTER_SHARE_GROUP_OFFSETS, request.header.api_version)
    body = request.body
    group_id = body.group_id

    answer = partial(offsets_answer, broker, types.AlterShareGroupOffsetsResponse)

    if coordinated_elsewhere(broker, session, group_id):
        return answer(ErrorCode.not_coordinator)
    if not group_id:
        return answer(ErrorCode.invalid_group_id, "The group id is empty.")
    if broker.groups.find(group_id) is not None:
        return answer(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
    share_groups = broker.share_groups
    group = share_groups.get(group_id)
    if group is not None and group.members:
        return answer(ErrorCode.non_empty_group, NOT_EMPTY_MESSAGE)
    if group is None:
        group = share_groups.groups[group_id] = ShareGroup(group_id)
    told = []
    for asked in body.topics:
        topic = broker.topics.get(asked.topic_name)
        partitions = []
        for partition in asked.partitions:
            index = partition.partition_index
            error = ErrorCode.none
            if topic is None or not 0 <= index < len(topic.partitions):
                error = ErrorCode.unknown_topic_or_partition
            else:
                share_partition(broker, group, topic, topic.partitions[index]).reset(
                    partition.start_offset
                )
            partitions.append(
                make(
                    types.AlterShareGroupOffsetsResponsePartition,
                    partition_index=index,
                    error_code=counted(broker, error),
                    error_message=None if error is ErrorCode.none else UNKNOWN_TOPIC_MESSAGE,
                )
            )
        told.append(
            make(
                types.AlterShareGroupOffsetsResponseTopic,
                topic_name=asked.topic_name,
                topic_id=topic.id if topic is not None else None,
                partitions=tuple(partitions),
            )
        )
    return answer(ErrorCode.none, topics=tuple(told))
