"""DeleteShareGroupOffsets: forget a share group's share partitions of some topics (the
group must have no members): the next member to read one starts where
share.auto.offset.reset says."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import coordinated_elsewhere, counted
from .partitions import NOT_EMPTY_MESSAGE, UNKNOWN_TOPIC_MESSAGE, offsets_answer

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.DELETE_SHARE_GROUP_OFFSETS, request.header.api_version)
    body = request.body
    group_id = body.group_id

    answer = partial(offsets_answer, broker, types.DeleteShareGroupOffsetsResponse)

    if coordinated_elsewhere(broker, session, group_id):
        return answer(ErrorCode.not_coordinator)
    group = broker.share_groups.get(group_id) if group_id else None
    if group is None:
        return answer(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
    if group.members:
        return answer(ErrorCode.non_empty_group, NOT_EMPTY_MESSAGE)
    told = []
    for asked in body.topics:
        name = asked.topic_name
        topic = broker.topics.get(name)
        error = ErrorCode.none
        if topic is None:
            error = ErrorCode.unknown_topic_or_partition
        else:
            for key in [key for key in group.partitions if key[0] == name]:
                del group.partitions[key]
        told.append(
            make(
                types.DeleteShareGroupOffsetsResponseTopic,
                topic_name=name,
                topic_id=topic.id if topic is not None else None,
                error_code=counted(broker, error),
                error_message=None if error is ErrorCode.none else UNKNOWN_TOPIC_MESSAGE,
            )
        )
    return answer(ErrorCode.none, topics=tuple(told))
